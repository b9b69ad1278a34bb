// Checks every Node-service call makes before touching a volume on a node:
// required fields, an absolute path, a known volume, a capability of the
// volume's kind, and (for a driver that attaches) a ControllerPublishVolume
// to this node first.
import { isAbsolute } from "node:path";
import type { CsiAccessMode, VolumeCapability } from "../../shared/csi/types.ts";
import type { DriverContext } from "./config.ts";
import { CsiError, invalidArgument, notFound } from "./errors.ts";
import type { VolumeRecord } from "./state.ts";
import { capabilityProblem, requireField } from "./validate.ts";

export function requirePath(method: string, field: string, value: string | undefined): string {
  const path = requireField(method, field, value);
  if (!isAbsolute(path)) throw invalidArgument(`${method}: ${field} must be an absolute path, got ${path}`);
  return path;
}

function requireVolume(ctx: DriverContext, method: string, id: string): VolumeRecord {
  const volume = ctx.store.volumes.get(id);
  if (!volume) throw notFound(`${method}: volume ${id} does not exist`);
  return volume;
}

/** The access mode of a well-formed capability that matches the volume's kind. */
function checkCapability(
  ctx: DriverContext,
  method: string,
  volume: VolumeRecord,
  cap: VolumeCapability | undefined,
): CsiAccessMode {
  if (!cap) throw invalidArgument(`${method}: volume_capability missing in request`);
  const problem = capabilityProblem(cap, ctx.config.nodeCapabilities.has("SINGLE_NODE_MULTI_WRITER"));
  if (problem) throw invalidArgument(`${method}: volume_capability: ${problem}`);
  if (cap.accessType !== volume.kind) {
    throw invalidArgument(`${method}: volume ${volume.id} is a ${volume.kind} volume, not ${cap.accessType}`);
  }
  return cap.accessMode!.mode;
}

/** A driver that attaches serves a node only the volumes ControllerPublishVolume gave it. */
function requireControllerPublished(
  ctx: DriverContext,
  method: string,
  volume: VolumeRecord,
  node: string,
): void {
  if (!ctx.config.controllerCapabilities.has("PUBLISH_UNPUBLISH_VOLUME")) return;
  if (node in volume.publishedNodes) return;
  throw new CsiError(
    "FAILED_PRECONDITION",
    `${method}: volume ${volume.id} is not published to node ${node} (ControllerPublishVolume first)`,
  );
}

/** What NodeUnstage and NodeUnpublish check: the volume id, then the path at `pathField`, then a known volume. */
export function teardownTarget(
  ctx: DriverContext,
  method: string,
  request: { volumeId?: string },
  pathField: string,
  path: string | undefined,
): { id: string; path: string; volume: VolumeRecord } {
  const id = requireField(method, "volume_id", request.volumeId);
  const checkedPath = requirePath(method, pathField, path);
  return { id, path: checkedPath, volume: requireVolume(ctx, method, id) };
}

/**
 * What NodeStage and NodePublish check once their ids and paths are read: a
 * capability, a known volume it fits, and (for a driver that attaches) a
 * ControllerPublishVolume to this node. Answers the capability's access mode.
 */
export function mountTarget(
  ctx: DriverContext,
  method: string,
  node: string,
  id: string,
  capability: VolumeCapability | undefined,
): { volume: VolumeRecord; mode: CsiAccessMode } {
  if (!capability) throw invalidArgument(`${method}: volume_capability missing in request`);
  const volume = requireVolume(ctx, method, id);
  const mode = checkCapability(ctx, method, volume, capability);
  requireControllerPublished(ctx, method, volume, node);
  return { volume, mode };
}
