// The StorageClass a claim or volume names (upstream GetPersistentVolumeClaimClass
// and GetPersistentVolumeClass), and the cluster's default class.
import type { PersistentVolume, PersistentVolumeClaim, StorageClass } from "./types.ts";
import { annBetaDefaultClass, annBetaStorageClass, annDefaultClass } from "./well-known.ts";

/** The beta annotation wins over spec.storageClassName; "" when neither. */
function classOf(o: PersistentVolumeClaim | PersistentVolume): string {
  return o.metadata.annotations?.[annBetaStorageClass] ?? o.spec.storageClassName ?? "";
}

export function claimClass(claim: PersistentVolumeClaim): string {
  return classOf(claim);
}

/** Whether the user asked for a class at all ("" counts: it means "no class, no default"). */
export function claimHasClass(claim: PersistentVolumeClaim): boolean {
  return (
    claim.metadata.annotations?.[annBetaStorageClass] !== undefined ||
    (claim.spec.storageClassName !== undefined && claim.spec.storageClassName !== null)
  );
}

export function volumeClass(volume: PersistentVolume): string {
  return classOf(volume);
}

export function isDefaultClass(cls: StorageClass): boolean {
  const a = cls.metadata.annotations ?? {};
  return a[annDefaultClass] === "true" || a[annBetaDefaultClass] === "true";
}

/** The default class: newest creationTimestamp wins, ties by name (as upstream since 1.28). */
export function defaultStorageClass(classes: readonly StorageClass[]): StorageClass | undefined {
  let best: StorageClass | undefined;
  for (const c of classes) {
    if (!isDefaultClass(c)) continue;
    if (!best) {
      best = c;
      continue;
    }
    const a = Date.parse(c.metadata.creationTimestamp ?? "") || 0;
    const b = Date.parse(best.metadata.creationTimestamp ?? "") || 0;
    if (a > b || (a === b && c.metadata.name < best.metadata.name)) best = c;
  }
  return best;
}
