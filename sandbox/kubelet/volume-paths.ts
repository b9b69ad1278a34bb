// The staging and target paths a kubelet uses for a CSI volume under its
// root directory (/var/lib/kubelet on a real node). The volume's unique name
// and its VolumeAttachment's name are shared vocabulary
// (shared/attach-detach/volume-attachment-name.ts).
import { createHash } from "node:crypto";
import { join } from "node:path";

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
