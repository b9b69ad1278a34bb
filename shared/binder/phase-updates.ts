// The status and binding edits the binder makes, as pure functions that
// return a new object (or the same one when nothing would change, so the
// caller writes nothing).
import { compareQuantities } from "../kube/quantity.ts";
import type { ObjectReference, PersistentVolume, PersistentVolumeClaim } from "../kube/types.ts";
import {
  annBindCompleted,
  annBoundByController,
  annDynamicallyProvisioned,
  provisioningFinalizer,
} from "../kube/well-known.ts";
import { annPreResizeCapacity } from "./constants.ts";
import { isVolumeBoundToClaim } from "./volume-helpers.ts";

function withAnnotation<T extends { metadata: { annotations?: Record<string, string> } }>(
  o: T,
  key: string,
  value: string,
): T {
  return { ...o, metadata: { ...o.metadata, annotations: { ...o.metadata.annotations, [key]: value } } };
}

/** A full reference to the claim, as the PV's claimRef carries it. */
export function claimReference(claim: PersistentVolumeClaim): ObjectReference {
  return {
    kind: "PersistentVolumeClaim",
    namespace: claim.metadata.namespace,
    name: claim.metadata.name,
    uid: claim.metadata.uid,
    apiVersion: "v1",
    resourceVersion: claim.metadata.resourceVersion,
  };
}

/** A PV a provisioner created for exactly this claim (not a static PV that happens to match). */
export function isProvisionedForClaim(volume: PersistentVolume, claim: PersistentVolumeClaim): boolean {
  return (
    volume.metadata.annotations?.[annDynamicallyProvisioned] !== undefined &&
    volume.spec.claimRef?.uid !== undefined &&
    volume.spec.claimRef.uid === claim.metadata.uid
  );
}

/** Step 1 of bind: point the volume at the claim; mark it bound-by-controller unless it was (pre-)bound already. */
export function volumeBoundToClaim(volume: PersistentVolume, claim: PersistentVolumeClaim): PersistentVolume {
  let next = volume;
  const ref = volume.spec.claimRef;
  const alreadyBound = isVolumeBoundToClaim(volume, claim);
  if (
    !ref ||
    ref.name !== claim.metadata.name ||
    ref.namespace !== claim.metadata.namespace ||
    ref.uid !== claim.metadata.uid
  ) {
    next = { ...next, spec: { ...next.spec, claimRef: claimReference(claim) } };
  }
  if (!alreadyBound && next.metadata.annotations?.[annBoundByController] === undefined) {
    next = withAnnotation(next, annBoundByController, "yes");
  }
  return next;
}

/** The volume in `phase` with `message`; unchanged when already in that phase. */
export function volumeWithPhase(
  volume: PersistentVolume,
  phase: string,
  message: string,
  now: string,
): PersistentVolume {
  if (volume.status?.phase === phase) return volume;
  const status = { ...volume.status, phase, lastPhaseTransitionTime: now };
  if (message) status.message = message;
  else delete status.message;
  return { ...volume, status };
}

/**
 * Step 3 of bind: the claim names the volume, bound-by-controller when we
 * chose it, bind-completed. Binding to the PV a provisioner made for this very
 * claim also drops the provisioner's intent finalizer: the PV now records the
 * volume, and doing it here saves the provisioner a write.
 */
export function claimBoundToVolume(
  claim: PersistentVolumeClaim,
  volume: PersistentVolume,
  provisionedForClaim = false,
): PersistentVolumeClaim {
  let next = claim;
  const chosenByController = claim.spec.volumeName !== volume.metadata.name;
  if (claim.spec.volumeName !== volume.metadata.name) {
    next = { ...next, spec: { ...next.spec, volumeName: volume.metadata.name } };
  }
  if (chosenByController && next.metadata.annotations?.[annBoundByController] === undefined) {
    next = withAnnotation(next, annBoundByController, "yes");
  }
  if (next.metadata.annotations?.[annBindCompleted] === undefined) {
    next = withAnnotation(next, annBindCompleted, "yes");
  }
  if (provisionedForClaim && next.metadata.finalizers?.includes(provisioningFinalizer)) {
    const finalizers = next.metadata.finalizers.filter((f) => f !== provisioningFinalizer);
    const metadata = { ...next.metadata, finalizers };
    if (finalizers.length === 0) delete (metadata as { finalizers?: string[] }).finalizers;
    next = { ...next, metadata };
  }
  return next;
}

function sameQuantity(a: string | undefined, b: string | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  try {
    return compareQuantities(a, b) === 0;
  } catch {
    return a === b;
  }
}

/**
 * The claim's status in `phase`. Without a volume, access modes, capacity and
 * the current VolumeAttributesClass are cleared; with one, they come from the
 * volume, capacity only when the phase changes (a deliberate difference after
 * a resize must survive).
 */
export function claimWithStatus(
  claim: PersistentVolumeClaim,
  phase: string,
  volume: PersistentVolume | undefined,
): PersistentVolumeClaim {
  const status = { ...claim.status };
  let dirty = false;
  if (status.phase !== phase) {
    status.phase = phase;
    dirty = true;
  }
  if (!volume) {
    if (status.accessModes !== undefined) {
      delete status.accessModes;
      dirty = true;
    }
    if (status.capacity !== undefined) {
      delete status.capacity;
      dirty = true;
    }
    if (status.currentVolumeAttributesClassName != null) {
      delete status.currentVolumeAttributesClassName;
      dirty = true;
    }
  } else {
    const modes = volume.spec.accessModes;
    if (JSON.stringify(status.accessModes) !== JSON.stringify(modes)) {
      if (modes === undefined) delete status.accessModes;
      else status.accessModes = [...modes];
      dirty = true;
    }
    // The class the volume has now is the claim's current one (the resizer changes both together).
    const volumeAttributesClass = volume.spec.volumeAttributesClassName;
    if ((status.currentVolumeAttributesClassName ?? undefined) !== volumeAttributesClass) {
      if (volumeAttributesClass === undefined) delete status.currentVolumeAttributesClassName;
      else status.currentVolumeAttributesClassName = volumeAttributesClass;
      dirty = true;
    }
    if (claim.status?.phase !== phase) {
      const preResize = volume.metadata.annotations?.[annPreResizeCapacity];
      const volumeCapacity = volume.spec.capacity?.storage;
      if (preResize !== undefined) {
        status.capacity = { ...status.capacity, storage: preResize };
        dirty = true;
      } else if (!sameQuantity(status.capacity?.storage, volumeCapacity)) {
        status.capacity = { ...volume.spec.capacity };
        dirty = true;
      }
    }
  }
  return dirty ? { ...claim, status } : claim;
}
