// What the driver advertises. Both lists are configurable so tests can run
// the sidecar logic against drivers of different shapes (for example one
// without PUBLISH_UNPUBLISH_VOLUME, which the attacher handles trivially).
import { csiEnumNames } from "../../shared/csi/proto.ts";
import type { ControllerRpcType, NodeRpcType, PluginServiceType } from "../../shared/csi/types.ts";

export type ControllerCapability = Exclude<ControllerRpcType, "UNKNOWN">;
export type PluginCapability = Exclude<PluginServiceType, "UNKNOWN">;
export type NodeCapability = Exclude<NodeRpcType, "UNKNOWN">;

/** Every name csi.proto gives the enum, but UNKNOWN (which no driver advertises). */
function knownNames<T extends string>(enumName: string): readonly T[] {
  return csiEnumNames(enumName).filter((name) => name !== "UNKNOWN") as T[];
}

const controllerCapabilityNames = knownNames<ControllerCapability>(
  "csi.v1.ControllerServiceCapability.RPC.Type",
);
const pluginCapabilityNames = knownNames<PluginCapability>("csi.v1.PluginCapability.Service.Type");
const nodeCapabilityNames = knownNames<NodeCapability>("csi.v1.NodeServiceCapability.RPC.Type");

/**
 * A node plugin that stages, so the kubelet's MountDevice step runs as on most
 * real drivers, and grows filesystems after a controller expansion.
 */
const defaultNodeCapabilities: readonly NodeCapability[] = ["STAGE_UNSTAGE_VOLUME", "EXPAND_VOLUME"];

const defaultControllerCapabilities: readonly ControllerCapability[] = [
  "CREATE_DELETE_VOLUME",
  "PUBLISH_UNPUBLISH_VOLUME",
  "LIST_VOLUMES",
  "LIST_VOLUMES_PUBLISHED_NODES",
  "GET_CAPACITY",
  "CREATE_DELETE_SNAPSHOT",
  "LIST_SNAPSHOTS",
  "CLONE_VOLUME",
  "EXPAND_VOLUME",
  "PUBLISH_READONLY",
  "SINGLE_NODE_MULTI_WRITER",
  "MODIFY_VOLUME",
];

const defaultPluginCapabilities: readonly PluginCapability[] = [
  "CONTROLLER_SERVICE",
  "VOLUME_ACCESSIBILITY_CONSTRAINTS",
];

/**
 * The capability a controller RPC needs. A driver that does not advertise it
 * answers UNIMPLEMENTED, as a real driver without that feature would.
 */
export const requiredCapability: Readonly<Record<string, ControllerCapability>> = {
  CreateVolume: "CREATE_DELETE_VOLUME",
  DeleteVolume: "CREATE_DELETE_VOLUME",
  ControllerPublishVolume: "PUBLISH_UNPUBLISH_VOLUME",
  ControllerUnpublishVolume: "PUBLISH_UNPUBLISH_VOLUME",
  ListVolumes: "LIST_VOLUMES",
  GetCapacity: "GET_CAPACITY",
  CreateSnapshot: "CREATE_DELETE_SNAPSHOT",
  DeleteSnapshot: "CREATE_DELETE_SNAPSHOT",
  ListSnapshots: "LIST_SNAPSHOTS",
  ControllerExpandVolume: "EXPAND_VOLUME",
  ControllerModifyVolume: "MODIFY_VOLUME",
};

/** The capability a node RPC needs (the Node service's own list). */
export const requiredNodeCapability: Readonly<Record<string, NodeCapability>> = {
  NodeStageVolume: "STAGE_UNSTAGE_VOLUME",
  NodeUnstageVolume: "STAGE_UNSTAGE_VOLUME",
  NodeExpandVolume: "EXPAND_VOLUME",
};

function checkNames<T extends string>(what: string, known: readonly T[], given: readonly string[]): T[] {
  for (const name of given) {
    if (!(known as readonly string[]).includes(name)) {
      throw new Error(`unknown ${what} capability ${JSON.stringify(name)}; known: ${known.join(", ")}`);
    }
  }
  return [...new Set(given)] as T[];
}

export function controllerCapabilities(given: readonly string[] | undefined): ControllerCapability[] {
  return checkNames("controller", controllerCapabilityNames, given ?? defaultControllerCapabilities);
}

export function nodeCapabilities(given: readonly string[] | undefined): NodeCapability[] {
  return checkNames("node", nodeCapabilityNames, given ?? defaultNodeCapabilities);
}

export function pluginCapabilities(given: readonly string[] | undefined): PluginCapability[] {
  return checkNames("plugin", pluginCapabilityNames, given ?? defaultPluginCapabilities);
}
