// VolumeAttachment names as kube-controller-manager's CSI attacher makes
// them, so objects it created and ours are the same objects.
import { createHash } from "node:crypto";

export function volumeAttachmentName(volumeHandle: string, driverName: string, nodeName: string): string {
  return `csi-${createHash("sha256").update(`${volumeHandle}${driverName}${nodeName}`).digest("hex")}`;
}

/** How kubelet reports a CSI volume in node.status.volumesInUse. */
export function uniqueVolumeName(driverName: string, volumeHandle: string): string {
  return `kubernetes.io/csi/${driverName}^${volumeHandle}`;
}
