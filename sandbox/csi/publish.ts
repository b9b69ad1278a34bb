// ControllerPublishVolume / ControllerUnpublishVolume: the driver's record of
// which nodes each volume is attached to, with the spec's answers for
// repeats, conflicts and single-node volumes.
import type {
  ControllerPublishVolumeRequest,
  ControllerPublishVolumeResponse,
  ControllerUnpublishVolumeRequest,
  CsiAccessMode,
  Empty,
} from "../../shared/csi/types.ts";
import type { DriverContext } from "./config.ts";
import { CsiError, invalidArgument, notFound } from "./errors.ts";
import type { VolumeRecord } from "./state.ts";
import { capabilityProblem, isMultiNode, requireField } from "./validate.ts";

const method = "ControllerPublishVolume";

export async function publishVolume(
  ctx: DriverContext,
  req: ControllerPublishVolumeRequest,
): Promise<ControllerPublishVolumeResponse> {
  const { config, store } = ctx;
  const id = requireField(method, "volume_id", req.volumeId);
  const node = requireField(method, "node_id", req.nodeId);
  const readonly = req.readonly ?? false;
  const cap = req.volumeCapability;
  if (!cap) throw invalidArgument(`${method}: volume_capability missing in request`);
  const problem = capabilityProblem(cap, config.controllerCapabilities.has("SINGLE_NODE_MULTI_WRITER"));
  if (problem) throw invalidArgument(`${method}: volume_capability: ${problem}`);
  if (readonly && !config.controllerCapabilities.has("PUBLISH_READONLY")) {
    throw invalidArgument(`${method}: readonly is set but the driver does not advertise PUBLISH_READONLY`);
  }
  const volume = store.volumes.get(id);
  if (!volume) throw notFound(`${method}: volume ${id} does not exist`);
  if (cap.accessType !== volume.kind) {
    throw invalidArgument(`${method}: volume ${id} is a ${volume.kind} volume, not ${cap.accessType}`);
  }
  const mode = cap.accessMode!.mode;
  const context = { volumePath: store.abs(volume.path) };

  const existing = volume.publishedNodes[node];
  if (existing) {
    if (existing.readonly === readonly && existing.accessMode === mode) return { publishContext: context };
    throw new CsiError(
      "ALREADY_EXISTS",
      `${method}: volume ${id} is already published to node ${node} with access mode ${existing.accessMode}, readonly ${existing.readonly}`,
    );
  }
  const conflict = otherNodeConflict(volume, node, mode, readonly);
  if (conflict) throw new CsiError("FAILED_PRECONDITION", `${method}: ${conflict}`);
  if (config.maxVolumesPerNode > 0) {
    const onNode = [...store.volumes.values()].filter((v) => node in v.publishedNodes).length;
    if (onNode >= config.maxVolumesPerNode) {
      throw new CsiError(
        "RESOURCE_EXHAUSTED",
        `${method}: node ${node} already has the maximum of ${config.maxVolumesPerNode} volumes`,
      );
    }
  }
  volume.publishedNodes[node] = {
    readonly,
    accessMode: mode,
    publishedAt: new Date().toISOString(),
  };
  store.changed();
  return { publishContext: context };
}

/**
 * Why the volume cannot also go to this node. The spec wants the node it is
 * already published at in the message.
 */
function otherNodeConflict(
  volume: VolumeRecord,
  node: string,
  mode: CsiAccessMode,
  readonly: boolean,
): string | undefined {
  const others = Object.entries(volume.publishedNodes).filter(([n]) => n !== node);
  if (others.length === 0) return undefined;
  const where = others
    .map(([n]) => n)
    .sort()
    .join(", ");
  const singleNode = others.find(([, p]) => !isMultiNode(p.accessMode));
  if (!isMultiNode(mode) || singleNode) {
    return `volume ${volume.id} is already published to node ${where} and its access mode ${singleNode?.[1].accessMode ?? mode} allows a single node only`;
  }
  if (mode === "MULTI_NODE_SINGLE_WRITER" && !readonly) {
    const writer = others.find(([, p]) => !p.readonly);
    if (writer) return `volume ${volume.id} already has its single writer on node ${writer[0]}`;
  }
  return undefined;
}

/** Idempotent: an unknown volume or node is already unpublished. No node id: from every node. */
export async function unpublishVolume(
  ctx: DriverContext,
  req: ControllerUnpublishVolumeRequest,
): Promise<Empty> {
  const id = requireField("ControllerUnpublishVolume", "volume_id", req.volumeId);
  const volume = ctx.store.volumes.get(id);
  if (!volume) return {};
  if (req.nodeId) {
    if (!(req.nodeId in volume.publishedNodes)) return {};
    delete volume.publishedNodes[req.nodeId];
  } else {
    if (Object.keys(volume.publishedNodes).length === 0) return {};
    volume.publishedNodes = {};
  }
  ctx.store.changed();
  return {};
}
