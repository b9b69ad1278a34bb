// Small facts about claims and volumes that every binder decision asks:
// how big, which modes, who is bound to whom (the class: shared/kube/claim-class.ts).
import { compareQuantities, parseQuantityBytes } from "../kube/quantity.ts";
import type { ObjectReference, PersistentVolume, PersistentVolumeClaim } from "../kube/types.ts";
import { annBoundByController, annSelectedNode } from "../kube/well-known.ts";

export function requestedStorage(claim: PersistentVolumeClaim): string {
  return claim.spec.resources?.requests?.storage ?? "0";
}

export function volumeCapacity(volume: PersistentVolume): string {
  return volume.spec.capacity?.storage ?? "0";
}

/** capacity >= request, exactly (quantities compared without float error); unparsable sizes never match. */
export function volumeIsLargeEnough(volume: PersistentVolume, claim: PersistentVolumeClaim): boolean {
  try {
    return compareQuantities(volumeCapacity(volume), requestedStorage(claim)) >= 0;
  } catch {
    return false;
  }
}

export function capacityBytes(volume: PersistentVolume): bigint {
  try {
    return parseQuantityBytes(volumeCapacity(volume));
  } catch {
    return 0n;
  }
}

/** nil volumeMode means Filesystem on both sides (an older API server may not default it). */
export function volumeModeMismatch(claim: PersistentVolumeClaim, volume: PersistentVolume): boolean {
  return (claim.spec.volumeMode ?? "Filesystem") !== (volume.spec.volumeMode ?? "Filesystem");
}

/** A claim's or volume's VolumeAttributesClass; unset and "" both mean none. */
export function volumeAttributesClassOf(o: PersistentVolume | PersistentVolumeClaim): string {
  return o.spec.volumeAttributesClassName ?? "";
}

/** Claim and volume name different VolumeAttributesClasses (nil equals ""), which never bind. */
export function volumeAttributesClassMismatch(
  claim: PersistentVolumeClaim,
  volume: PersistentVolume,
): boolean {
  return volumeAttributesClassOf(claim) !== volumeAttributesClassOf(volume);
}

/** Every mode the claim asks for is offered by the volume. */
export function volumeHasAccessModes(volume: PersistentVolume, claim: PersistentVolumeClaim): boolean {
  const offered = new Set(volume.spec.accessModes ?? []);
  return (claim.spec.accessModes ?? []).every((m) => offered.has(m));
}

/** The volume's claimRef points at this claim (by namespace/name, and uid when the ref has one). */
export function isVolumeBoundToClaim(volume: PersistentVolume, claim: PersistentVolumeClaim): boolean {
  const ref = volume.spec.claimRef;
  if (!ref) return false;
  if (ref.name !== claim.metadata.name || ref.namespace !== claim.metadata.namespace) return false;
  return !ref.uid || ref.uid === claim.metadata.uid;
}

/**
 * The claim a volume's claimRef names ("namespace/name"), or "" for a volume
 * with no claimRef: the index of the binder's watched copy. A claim can only
 * get a volume from its own key or from "" (judgeVolumeForClaim skips every
 * volume bound to another claim), so the search need not look further.
 */
export function volumeClaimIndexKey(volume: PersistentVolume): string {
  const ref = volume.spec.claimRef;
  return ref ? claimRefKey(ref) : "";
}

export function claimKey(claim: { metadata: { namespace?: string; name: string } }): string {
  return `${claim.metadata.namespace ?? ""}/${claim.metadata.name}`;
}

export function claimRefKey(ref: ObjectReference): string {
  return `${ref.namespace ?? ""}/${ref.name ?? ""}`;
}

export function hasAnnotation(
  o: { metadata: { annotations?: Record<string, string> } },
  key: string,
): boolean {
  return o.metadata.annotations?.[key] !== undefined;
}

export function isBoundByController(o: { metadata: { annotations?: Record<string, string> } }): boolean {
  return hasAnnotation(o, annBoundByController);
}

/** The scheduler picked a node for this WaitForFirstConsumer claim. */
export function isDelayBindingProvisioning(claim: PersistentVolumeClaim): boolean {
  return hasAnnotation(claim, annSelectedNode);
}

const accessModeOrder = ["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod"];

/** A canonical key for a set of access modes (deduplicated, fixed order), as upstream's PV index uses. */
export function accessModesKey(modes: readonly string[] | undefined): string {
  if (!modes) return "";
  // A search over a watched copy asks again for the same (unchanging) arrays.
  let key = accessModesKeys.get(modes);
  if (key === undefined) {
    const set = new Set(modes);
    const known = accessModeOrder.filter((m) => set.has(m));
    const unknown = [...set].filter((m) => !accessModeOrder.includes(m)).sort();
    key = [...known, ...unknown].join(",");
    accessModesKeys.set(modes, key);
  }
  return key;
}

const accessModesKeys = new WeakMap<readonly string[], string>();
