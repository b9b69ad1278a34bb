// The ListVolumes reconciler (upstream csiHandler.ReconcileVA): the driver's
// own list of where each volume is published, compared with what each
// VolumeAttachment of this driver claims. A disagreement is repaired by
// syncing that attachment once more, forced past "already attached".
import type { ListVolumesEntry } from "../csi/types.ts";
import type { CSINode, PersistentVolume, VolumeAttachment } from "../kube/types.ts";
import { resolveSource } from "./attachment-source.ts";
import { isAttachmentForDriver } from "./handler.ts";
import { nodeIdFor } from "./node-id.ts";

/** volume_id -> published_node_ids, over all pages (a later entry for the same id wins, as upstream). */
export function publishedNodesByVolume(entries: readonly ListVolumesEntry[]): Map<string, string[]> {
  const published = new Map<string, string[]>();
  for (const e of entries) {
    if (e.volume) published.set(e.volume.volumeId, [...(e.status?.publishedNodeIds ?? [])]);
  }
  return published;
}

interface AttachmentMismatch {
  name: string;
  /** What status.attached says. */
  attached: boolean;
  /** What the driver says. */
  published: boolean;
  volumeHandle: string;
  nodeId: string;
}

interface ReconcileInput {
  driverName: string;
  attachments: readonly VolumeAttachment[];
  /** PVs by name (those the attachments reference; more is fine). */
  volumes: ReadonlyMap<string, PersistentVolume>;
  /** CSINodes by name. */
  csiNodes: ReadonlyMap<string, CSINode>;
  published: ReadonlyMap<string, readonly string[]>;
}

export function findAttachmentMismatches(input: ReconcileInput): AttachmentMismatch[] {
  const out: AttachmentMismatch[] = [];
  for (const va of input.attachments) {
    if (!isAttachmentForDriver(va, input.driverName)) continue;
    // Observed: an attachment we cannot place (no node id, no CSI source) is skipped, as upstream logs and skips it.
    const node = nodeIdFor(input.driverName, va.spec.nodeName, input.csiNodes.get(va.spec.nodeName), va);
    if (!node.ok) continue;
    const pvName = va.spec.source.persistentVolumeName;
    const source = resolveSource(va, pvName ? input.volumes.get(pvName) : undefined, { forAttach: false });
    if (!source.ok) continue;
    const volumeHandle = source.csi.volumeHandle;
    const attached = va.status?.attached === true;
    const published = (input.published.get(volumeHandle) ?? []).includes(node.nodeId);
    if (attached !== published)
      out.push({ name: va.metadata.name, attached, published, volumeHandle, nodeId: node.nodeId });
  }
  return out;
}
