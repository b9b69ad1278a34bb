// NodePublishVolume / NodeUnpublishVolume: a volume made available at a
// pod's target path on a node (the kubelet's SetUp), after staging when the
// plugin stages. Hostpath-style: the target path is made (a directory, or a
// file for a block volume) and the publication recorded.
import type { Empty, NodePublishVolumeRequest, NodeUnpublishVolumeRequest } from "../../shared/csi/types.ts";
import type { DriverContext } from "./config.ts";
import { CsiError } from "./errors.ts";
import { mountTarget, requirePath, teardownTarget } from "./node-access.ts";
import { makeNodePath, removeNodePath } from "./node-paths.ts";
import { requireField } from "./validate.ts";

export async function publishNodeVolume(
  ctx: DriverContext,
  node: string,
  req: NodePublishVolumeRequest,
): Promise<Empty> {
  const method = "NodePublishVolume";
  const id = requireField(method, "volume_id", req.volumeId);
  const target = requirePath(method, "target_path", req.targetPath);
  const readonly = req.readonly ?? false;
  const stages = ctx.config.nodeCapabilities.has("STAGE_UNSTAGE_VOLUME");
  const stagingPath = stages ? requirePath(method, "staging_target_path", req.stagingTargetPath) : "";
  const { volume, mode } = mountTarget(ctx, method, node, id, req.volumeCapability);
  if (stages) {
    const staged = volume.nodeStaged?.[node];
    if (!staged || staged.path !== stagingPath) {
      throw new CsiError(
        "FAILED_PRECONDITION",
        `${method}: volume ${id} is not staged at ${stagingPath} on node ${node} (NodeStageVolume first)`,
      );
    }
  }

  const mounts = volume.nodeMounts?.[node] ?? {};
  const existing = mounts[target];
  if (existing) {
    if (
      existing.readonly === readonly &&
      existing.accessMode === mode &&
      existing.stagingPath === stagingPath
    ) {
      return {};
    }
    throw new CsiError(
      "ALREADY_EXISTS",
      `${method}: volume ${id} is already published at ${target} on node ${node} with access mode ${existing.accessMode}, readonly ${existing.readonly}`,
    );
  }
  await makeNodePath(target, volume.kind);
  volume.nodeMounts = {
    ...volume.nodeMounts,
    [node]: {
      ...mounts,
      [target]: {
        readonly,
        accessMode: mode,
        stagingPath,
        publishedAt: new Date().toISOString(),
      },
    },
  };
  ctx.store.changed();
  return {};
}

/** Idempotent: a target the volume is not published at is already unpublished. */
export async function unpublishNodeVolume(
  ctx: DriverContext,
  node: string,
  req: NodeUnpublishVolumeRequest,
): Promise<Empty> {
  const { path: target, volume } = teardownTarget(
    ctx,
    "NodeUnpublishVolume",
    req,
    "target_path",
    req.targetPath,
  );
  const mounts = volume.nodeMounts?.[node];
  if (!mounts?.[target]) return {};
  await removeNodePath(target, volume.kind);
  const rest = { ...mounts };
  delete rest[target];
  const all = { ...volume.nodeMounts };
  if (Object.keys(rest).length === 0) delete all[node];
  else all[node] = rest;
  volume.nodeMounts = all;
  ctx.store.changed();
  return {};
}
