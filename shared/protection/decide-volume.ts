// pv-protection for one PersistentVolume: objects in, the one step out. A PV
// being deleted loses kubernetes.io/pv-protection once its phase is no longer
// Bound (the binder releases it when its claim goes); no claim is looked up.
import type { PersistentVolume } from "../kube/types.ts";
import { pvProtectionFinalizer } from "../kube/well-known.ts";
import { isDeletionCandidate, needToAddFinalizer, withFinalizer, withoutFinalizer } from "./finalizers.ts";

export type VolumeStep =
  | { op: "add-finalizer"; volume: PersistentVolume }
  | { op: "remove-finalizer"; volume: PersistentVolume }
  | { op: "keep"; reason: string }
  | { op: "none"; reason: string };

export function decideVolume(volume: PersistentVolume): VolumeStep {
  if (isDeletionCandidate(volume, pvProtectionFinalizer)) {
    if (volume.status?.phase === "Bound") return { op: "keep", reason: "Bound" };
    return { op: "remove-finalizer", volume: withoutFinalizer(volume, pvProtectionFinalizer) };
  }
  if (needToAddFinalizer(volume, pvProtectionFinalizer))
    return { op: "add-finalizer", volume: withFinalizer(volume, pvProtectionFinalizer) };
  return {
    op: "none",
    reason: volume.metadata.deletionTimestamp ? "being deleted, not held by pv-protection" : "protected",
  };
}

/** What a PV event's own copy shows is enough to do nothing: upstream's informer handler filter. */
export function volumeNeedsNoSync(volume: PersistentVolume): boolean {
  return (
    !isDeletionCandidate(volume, pvProtectionFinalizer) && !needToAddFinalizer(volume, pvProtectionFinalizer)
  );
}
