// The names and paths a kubelet uses for a CSI volume: the unique volume
// name of node status, the VolumeAttachment the attach/detach controller
// creates, and the staging and target paths under the kubelet's root
// directory (/var/lib/kubelet on a real node).
import { createHash } from "node:crypto";
import { join } from "node:path";

export function uniqueVolumeName(driver: string, volumeHandle: string): string {
  return `kubernetes.io/csi/${driver}^${volumeHandle}`;
}

export function volumeAttachmentName(driver: string, volumeHandle: string, node: string): string {
  return `csi-${createHash("sha256").update(`${volumeHandle}${driver}${node}`).digest("hex")}`;
}

/** Where NodeStageVolume puts the volume, one per volume and node. */
export function stagingPath(
  root: string,
  driver: string,
  volumeHandle: string,
  pvName: string,
  block: boolean,
): string {
  if (block) return join(root, "plugins/kubernetes.io/csi/volumeDevices/staging", pvName);
  const digest = createHash("sha256").update(volumeHandle).digest("hex");
  return join(root, "plugins/kubernetes.io/csi", driver, digest, "globalmount");
}

/** Where NodePublishVolume puts it for one pod. */
export function targetPath(root: string, podUid: string, pvName: string, block: boolean): string {
  if (block) return join(root, "plugins/kubernetes.io/csi/volumeDevices/publish", pvName, podUid);
  return join(root, "pods", podUid, "volumes/kubernetes.io~csi", pvName, "mount");
}
