// CreateSnapshot (idempotent by name), DeleteSnapshot (unknown ids succeed)
// and ListSnapshots. A snapshot is an independent copy, so deleting its
// source volume later is fine.
import { randomUUID } from "node:crypto";
import type {
  CreateSnapshotRequest,
  CreateSnapshotResponse,
  DeleteSnapshotRequest,
  Empty,
  ListSnapshotsRequest,
  ListSnapshotsResponse,
} from "../../shared/csi/types.ts";
import type { DriverContext } from "./config.ts";
import { snapshotMessage } from "./convert.ts";
import { CsiError, notFound } from "./errors.ts";
import { paginate } from "./paging.ts";
import type { SnapshotRecord } from "./state.ts";
import { copyBacking, removeBacking } from "./storage.ts";
import { snapshotsDir } from "./store.ts";
import { requireField } from "./validate.ts";

export async function createSnapshot(
  ctx: DriverContext,
  req: CreateSnapshotRequest,
): Promise<CreateSnapshotResponse> {
  const method = "CreateSnapshot";
  const { store } = ctx;
  const name = requireField(method, "name", req.name);
  const sourceId = requireField(method, "source_volume_id", req.sourceVolumeId);
  const existing = store.snapshotByName(name);
  if (existing) {
    if (existing.sourceVolumeId === sourceId) return { snapshot: snapshotMessage(existing) };
    throw new CsiError(
      "ALREADY_EXISTS",
      `${method}: snapshot ${JSON.stringify(name)} already exists (id ${existing.id}) for another source volume, ${existing.sourceVolumeId}`,
    );
  }
  const volume = store.volumes.get(sourceId);
  if (!volume) throw notFound(`${method}: source volume ${sourceId} does not exist`);
  const id = randomUUID();
  const snapshot: SnapshotRecord = {
    id,
    name,
    sourceVolumeId: sourceId,
    sizeBytes: volume.capacityBytes,
    kind: volume.kind,
    path: `${snapshotsDir}/${id}`,
    parameters: { ...req.parameters },
    createdAt: new Date().toISOString(),
  };
  try {
    await copyBacking(store.abs(volume.path), store.abs(snapshot.path), volume.kind, volume.capacityBytes);
  } catch (err) {
    await removeBacking(store.abs(snapshot.path));
    throw new CsiError("INTERNAL", `${method}: copying volume ${sourceId} failed: ${String(err)}`);
  }
  store.snapshots.set(id, snapshot);
  store.changed();
  return { snapshot: snapshotMessage(snapshot) };
}

export async function deleteSnapshot(ctx: DriverContext, req: DeleteSnapshotRequest): Promise<Empty> {
  const id = requireField("DeleteSnapshot", "snapshot_id", req.snapshotId);
  ctx.store.drop(ctx.store.snapshots, id);
  return {};
}

export async function listSnapshots(
  ctx: DriverContext,
  req: ListSnapshotsRequest,
): Promise<ListSnapshotsResponse> {
  let all = [...ctx.store.snapshots.values()];
  if (req.snapshotId) all = all.filter((s) => s.id === req.snapshotId);
  if (req.sourceVolumeId) all = all.filter((s) => s.sourceVolumeId === req.sourceVolumeId);
  const page = paginate("ListSnapshots", all, (s) => s.id, req);
  return { entries: page.items.map((s) => ({ snapshot: snapshotMessage(s) })), nextToken: page.nextToken };
}
