// NodeStageVolume / NodeUnstageVolume: the node plugin's per-node staging of
// a volume (the kubelet's MountDevice), hostpath-style: the staging path is
// made a directory and the staging is recorded in the driver's state.
import { mkdir } from "node:fs/promises";
import type { Empty, NodeStageVolumeRequest, NodeUnstageVolumeRequest } from "../../shared/csi/types.ts";
import type { DriverContext } from "./config.ts";
import { CsiError } from "./errors.ts";
import { mountTarget, requirePath, teardownTarget } from "./node-access.ts";
import { removeNodePath } from "./node-paths.ts";
import { requireField } from "./validate.ts";

export async function stageVolume(
  ctx: DriverContext,
  node: string,
  req: NodeStageVolumeRequest,
): Promise<Empty> {
  const method = "NodeStageVolume";
  const id = requireField(method, "volume_id", req.volumeId);
  const path = requirePath(method, "staging_target_path", req.stagingTargetPath);
  const { volume, mode } = mountTarget(ctx, method, node, id, req.volumeCapability);

  const staged = volume.nodeStaged?.[node];
  if (staged) {
    if (staged.path === path && staged.accessMode === mode) return {};
    throw new CsiError(
      "ALREADY_EXISTS",
      `${method}: volume ${id} is already staged on node ${node} at ${staged.path} with access mode ${staged.accessMode}`,
    );
  }
  await mkdir(path, { recursive: true });
  volume.nodeStaged = {
    ...volume.nodeStaged,
    [node]: { path, accessMode: mode, stagedAt: new Date().toISOString() },
  };
  ctx.store.changed();
  return {};
}

/** Idempotent: nothing staged at the path is already unstaged. Refused while a publication uses it. */
export async function unstageVolume(
  ctx: DriverContext,
  node: string,
  req: NodeUnstageVolumeRequest,
): Promise<Empty> {
  const method = "NodeUnstageVolume";
  const { id, path, volume } = teardownTarget(ctx, method, req, "staging_target_path", req.stagingTargetPath);
  const staged = volume.nodeStaged?.[node];
  if (!staged || staged.path !== path) return {};
  const targets = Object.keys(volume.nodeMounts?.[node] ?? {}).sort();
  if (targets.length > 0) {
    throw new CsiError(
      "FAILED_PRECONDITION",
      `${method}: volume ${id} is still published on node ${node} at ${targets.join(", ")}`,
    );
  }
  await removeNodePath(path, "mount");
  const rest = { ...volume.nodeStaged };
  delete rest[node];
  volume.nodeStaged = rest;
  ctx.store.changed();
  return {};
}
