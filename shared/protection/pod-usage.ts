// Which pods hold a claim, by kube-controller-manager's pvc-protection rules:
// only a scheduled pod counts (the kubelet starts no pod whose claim is being
// deleted, and only sees scheduled ones), whatever its phase: a Succeeded or
// Failed pod still holds its claims until it is deleted. A generic ephemeral
// volume's claim `<pod>-<volume>` counts only while the pod controls it and is
// not shut down.
import { isRecord } from "../is-record.ts";
import { ephemeralClaimName } from "../kube/pod-claims.ts";
import { isPodTerminated } from "../kube/pod-terminated.ts";
import type { PersistentVolumeClaim, Pod, PodVolume } from "../kube/types.ts";

function volumesOf(pod: Pod): PodVolume[] {
  const volumes = pod.spec?.volumes;
  return Array.isArray(volumes) ? volumes.filter(isRecord) : [];
}

/**
 * Deleted with a zero grace period: the kubelet is done with it (it asks for
 * grace 0 only after unpublishing every volume) or it was force-deleted. Its
 * ephemeral claims are free then, which also breaks a cycle of a pod
 * finalizer waiting for its claim.
 */
export function podIsShutDown(pod: Pod): boolean {
  return Boolean(pod.metadata.deletionTimestamp) && pod.metadata.deletionGracePeriodSeconds === 0;
}

/** The claim is the one made for this pod's ephemeral volume: same namespace, the pod its controller. */
function claimIsForPod(claim: PersistentVolumeClaim, pod: Pod): boolean {
  if (claim.metadata.namespace !== pod.metadata.namespace) return false;
  const refs = Array.isArray(claim.metadata.ownerReferences) ? claim.metadata.ownerReferences : [];
  const controller = refs.find((r) => isRecord(r) && r.controller === true);
  const uid = pod.metadata.uid;
  return typeof uid === "string" && uid !== "" && controller?.uid === uid;
}

export function podUsesClaim(pod: Pod, claim: PersistentVolumeClaim): boolean {
  if (!pod.spec?.nodeName || pod.metadata.namespace !== claim.metadata.namespace) return false;
  return volumesOf(pod).some((volume) => {
    if (volume.persistentVolumeClaim?.claimName === claim.metadata.name) return true;
    return (
      !podIsShutDown(pod) &&
      isRecord(volume.ephemeral) &&
      ephemeralClaimName(pod, volume) === claim.metadata.name &&
      claimIsForPod(claim, pod)
    );
  });
}

/**
 * Whether a pod's change can free one of its claims, so its claims are
 * checked: deleted, terminated, or not scheduled. A running, scheduled pod
 * frees nothing.
 */
export function podMayFreeClaims(pod: Pod, deleted: boolean): boolean {
  return deleted || isPodTerminated(pod) || !pod.spec?.nodeName;
}
