// What a new PersistentVolume gets at creation (PV CREATE, main resource
// only): StorageObjectInUseProtection's kubernetes.io/pv-protection, which the
// PV protection controller removes once no claim is bound to the volume.
// Idempotent: a volume that has it already is left as it is.

import type { PersistentVolume } from "../kube/types.ts";
import { pvProtectionFinalizer } from "../kube/well-known.ts";

export function mutateVolumeOnCreate(volume: PersistentVolume): PersistentVolume {
  const finalizers = volume.metadata.finalizers ?? [];
  if (finalizers.includes(pvProtectionFinalizer)) return volume;
  return { ...volume, metadata: { ...volume.metadata, finalizers: [...finalizers, pvProtectionFinalizer] } };
}
