// Driver options, their defaults, and the context every handler gets.
import {
  type ControllerCapability,
  controllerCapabilities,
  type NodeCapability,
  nodeCapabilities,
  type PluginCapability,
  pluginCapabilities,
} from "./capabilities.ts";
import { CapacityPools } from "./capacity.ts";
import type { VolumeKind } from "./state.ts";
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
  /**
   * The pool of each topology segment (one per node, as hostpath's per-node
   * storage): volumes placed in a segment take from it, and GetCapacity with
   * that segment answers what is left. Default 100 TiB.
   */
  segmentCapacityBytes?: number;
  /** Pools of particular segments, by the value of the topology key (the node name). */
  segmentCapacityOverrides?: Readonly<Record<string, number>>;
  /**
   * The volume kinds whose ControllerExpandVolume answers
   * node_expansion_required (their filesystem grows on the node). Default
   * ["mount"], as hostpath: a block device needs nothing on the node.
   */
  nodeExpansionKinds?: readonly VolumeKind[];
  /**
   * The VolumeExpansion plugin capability: ONLINE (default, as hostpath),
   * OFFLINE (ControllerExpandVolume refuses a volume published or staged
   * anywhere with FAILED_PRECONDITION, which the external-resizer reads as
   * "in use"), or NONE (not advertised).
   */
  volumeExpansion?: VolumeExpansionMode;
  /** Further nodes the driver serves (each with a node plugin); their segments show in the capacity report. */
  nodes?: readonly string[];
  /** Size of a volume created without a capacity range. Default 1 GiB. */
  defaultVolumeBytes?: number;
  /** NodeGetInfo max_volumes_per_node and the publish limit per node; 0 = unlimited. */
  maxVolumesPerNode?: number;
}

export type VolumeExpansionMode = "ONLINE" | "OFFLINE" | "NONE";

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
  nodeExpansionKinds: ReadonlySet<VolumeKind>;
  volumeExpansion: VolumeExpansionMode;
  /** The driver's own node first, then the further ones. */
  nodes: readonly string[];
}

export interface DriverContext {
  config: DriverConfig;
  store: DriverStore;
  /** Per-segment pools; changeable at run time through the admin API. */
  pools: CapacityPools;
}

function sizeOption(name: string, value: number | undefined, fallback: number): number {
  const v = value ?? fallback;
  if (!Number.isSafeInteger(v) || v < 0) throw new Error(`${name} must be a non-negative integer, got ${v}`);
  return v;
}

function kindsOption(given: readonly string[] | undefined): Set<VolumeKind> {
  const kinds = given ?? ["mount"];
  for (const k of kinds) {
    if (k !== "mount" && k !== "block") {
      throw new Error(`nodeExpansionKinds: unknown volume kind ${JSON.stringify(k)}; known: mount, block`);
    }
  }
  return new Set(kinds as VolumeKind[]);
}

function expansionOption(given: string | undefined): VolumeExpansionMode {
  const mode = given ?? "ONLINE";
  if (mode !== "ONLINE" && mode !== "OFFLINE" && mode !== "NONE") {
    throw new Error(`volumeExpansion must be ONLINE, OFFLINE or NONE, got ${JSON.stringify(mode)}`);
  }
  return mode;
}

/** The per-segment pools the options ask for; throws on sizes that make no sense. */
export function resolvePools(options: CsiDriverOptions): CapacityPools {
  const pools = new CapacityPools(
    sizeOption("segmentCapacityBytes", options.segmentCapacityBytes, 100 * TiB),
  );
  for (const [segment, bytes] of Object.entries(options.segmentCapacityOverrides ?? {})) {
    pools.set(segment, sizeOption(`segmentCapacityOverrides[${JSON.stringify(segment)}]`, bytes, 0));
  }
  return pools;
}

export function resolveConfig(options: CsiDriverOptions): DriverConfig {
  const name = options.name ?? "hostpath.csi.k8s.io";
  if (!name) throw new Error("driver name must not be empty");
  const nodeId = options.nodeId ?? "sandbox-node";
  return {
    name,
    vendorVersion: options.vendorVersion ?? "0.1.0-sandbox",
    nodeId,
    topologyKey: options.topologyKey ?? "topology.hostpath.csi/node",
    controllerCapabilities: new Set(controllerCapabilities(options.controllerCapabilities)),
    pluginCapabilities: new Set(pluginCapabilities(options.pluginCapabilities)),
    nodeCapabilities: new Set(nodeCapabilities(options.nodeCapabilities)),
    maxVolumeBytes: sizeOption("maxVolumeBytes", options.maxVolumeBytes, TiB),
    totalCapacityBytes: sizeOption("totalCapacityBytes", options.totalCapacityBytes, 100 * TiB),
    defaultVolumeBytes: sizeOption("defaultVolumeBytes", options.defaultVolumeBytes, GiB),
    maxVolumesPerNode: sizeOption("maxVolumesPerNode", options.maxVolumesPerNode, 0),
    nodeExpansionKinds: kindsOption(options.nodeExpansionKinds),
    volumeExpansion: expansionOption(options.volumeExpansion),
    nodes: [...new Set([nodeId, ...(options.nodes ?? [])])],
  };
}
