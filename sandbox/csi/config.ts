// Driver options, their defaults, and the context every handler gets.
import {
  type ControllerCapability,
  controllerCapabilities,
  type NodeCapability,
  nodeCapabilities,
  type PluginCapability,
  pluginCapabilities,
} from "./capabilities.ts";
import type { DriverStore } from "./store.ts";

const GiB = 1024 ** 3;
const TiB = 1024 ** 4;

export interface CsiDriverOptions {
  /** Directory for the state file, volumes and snapshots (created if missing). */
  dir: string;
  /** GetPluginInfo name; default hostpath.csi.k8s.io. */
  name?: string;
  vendorVersion?: string;
  /** NodeGetInfo node id, and the topology of volumes created without requirements. */
  nodeId?: string;
  /** Topology segment key; default topology.hostpath.csi/node. */
  topologyKey?: string;
  controllerCapabilities?: readonly ControllerCapability[];
  pluginCapabilities?: readonly PluginCapability[];
  /** What NodeGetCapabilities advertises; default STAGE_UNSTAGE_VOLUME. */
  nodeCapabilities?: readonly NodeCapability[];
  /** Largest volume; larger required_bytes is OUT_OF_RANGE. Default 1 TiB. */
  maxVolumeBytes?: number;
  /** Sum of all volume capacities; beyond it CreateVolume is RESOURCE_EXHAUSTED. Default 100 TiB. */
  totalCapacityBytes?: number;
  /** Size of a volume created without a capacity range. Default 1 GiB. */
  defaultVolumeBytes?: number;
  /** NodeGetInfo max_volumes_per_node and the publish limit per node; 0 = unlimited. */
  maxVolumesPerNode?: number;
}

export interface DriverConfig {
  name: string;
  vendorVersion: string;
  nodeId: string;
  topologyKey: string;
  controllerCapabilities: ReadonlySet<ControllerCapability>;
  pluginCapabilities: ReadonlySet<PluginCapability>;
  nodeCapabilities: ReadonlySet<NodeCapability>;
  maxVolumeBytes: number;
  totalCapacityBytes: number;
  defaultVolumeBytes: number;
  maxVolumesPerNode: number;
}

export interface DriverContext {
  config: DriverConfig;
  store: DriverStore;
}

function sizeOption(name: string, value: number | undefined, fallback: number): number {
  const v = value ?? fallback;
  if (!Number.isSafeInteger(v) || v < 0) throw new Error(`${name} must be a non-negative integer, got ${v}`);
  return v;
}

export function resolveConfig(options: CsiDriverOptions): DriverConfig {
  const name = options.name ?? "hostpath.csi.k8s.io";
  if (!name) throw new Error("driver name must not be empty");
  return {
    name,
    vendorVersion: options.vendorVersion ?? "0.1.0-sandbox",
    nodeId: options.nodeId ?? "sandbox-node",
    topologyKey: options.topologyKey ?? "topology.hostpath.csi/node",
    controllerCapabilities: new Set(controllerCapabilities(options.controllerCapabilities)),
    pluginCapabilities: new Set(pluginCapabilities(options.pluginCapabilities)),
    nodeCapabilities: new Set(nodeCapabilities(options.nodeCapabilities)),
    maxVolumeBytes: sizeOption("maxVolumeBytes", options.maxVolumeBytes, TiB),
    totalCapacityBytes: sizeOption("totalCapacityBytes", options.totalCapacityBytes, 100 * TiB),
    defaultVolumeBytes: sizeOption("defaultVolumeBytes", options.defaultVolumeBytes, GiB),
    maxVolumesPerNode: sizeOption("maxVolumesPerNode", options.maxVolumesPerNode, 0),
  };
}
