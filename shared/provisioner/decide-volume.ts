// What the provisioner does about one PV: delete the backing volume of a
// released Delete volume it provisioned, keep its finalizer in step with the
// reclaim policy, and never touch a Retain volume's data.
import type { PersistentVolume, VolumeAttachment } from "../kube/types.ts";
import { annDynamicallyProvisioned, pvDeletionProtectionFinalizer } from "../kube/well-known.ts";
import { message } from "./constants.ts";

export type VolumeDecision =
  | { action: "ignore"; reason: string }
  | { action: "add-finalizer" }
  | { action: "remove-finalizer"; reason: string }
  /** DeleteVolume, then delete the PV object and drop the finalizer. */
  | { action: "delete" }
  /** Deletion must wait: a VolumeAttachment still references the volume. */
  | { action: "blocked"; message: string };

export interface VolumeContext {
  driverName: string;
  /** VolumeAttachments naming this PV; only consulted when the driver publishes volumes. */
  attachments: readonly VolumeAttachment[];
  driverPublishes: boolean;
}

/** The PV is this driver's: provisioned by it, or (without the annotation) a CSI volume of it. */
export function isVolumeForDriver(pv: PersistentVolume, driverName: string): boolean {
  const by = pv.metadata.annotations?.[annDynamicallyProvisioned];
  if (by !== undefined) return by === driverName;
  return pv.spec.csi?.driver === driverName;
}

/**
 * Whether decideVolume answers "ignore" for this PV. The attachments and the
 * driver's capabilities only ever turn a deletion into "blocked", never into
 * or out of "ignore" (a property test holds it), so this can be asked of an
 * event's own copy of the PV; a PV that changes afterwards comes back with an
 * event of its own.
 */
export function volumeNeedsNothing(pv: PersistentVolume, driverName: string): boolean {
  return decideVolume(pv, { driverName, attachments: [], driverPublishes: false }).action === "ignore";
}

export function decideVolume(pv: PersistentVolume, ctx: VolumeContext): VolumeDecision {
  if (!isVolumeForDriver(pv, ctx.driverName))
    return { action: "ignore", reason: `not provisioned by ${ctx.driverName}` };
  const policy = pv.spec.persistentVolumeReclaimPolicy ?? "Retain";
  const finalized = (pv.metadata.finalizers ?? []).includes(pvDeletionProtectionFinalizer);
  const deleting = pv.metadata.deletionTimestamp !== undefined;

  if (policy !== "Delete") {
    // Observed: Retain or Recycle: the provisioner never deletes the volume; its finalizer must not hold the PV.
    return finalized
      ? { action: "remove-finalizer", reason: `reclaim policy is ${policy}` }
      : { action: "ignore", reason: `reclaim policy is ${policy}` };
  }
  // Observed: our finalizer is gone from a PV being deleted: the backing volume was deleted already
  // (another finalizer, e.g. pv-protection, still holds the object); asking again would repeat DeleteVolume.
  if (deleting && !finalized) return { action: "ignore", reason: "being deleted without our finalizer" };
  const released = pv.status?.phase === "Released";
  // A PV deleted while still Bound waits: its claim may be in use; it is reclaimed once Released.
  if (released || (deleting && finalized && pv.status?.phase !== "Bound")) {
    if (ctx.driverPublishes) {
      const attached = ctx.attachments.find((va) => va.spec.source.persistentVolumeName === pv.metadata.name);
      if (attached) {
        return {
          action: "blocked",
          message: message.stillAttached(pv.metadata.name, attached.spec.nodeName),
        };
      }
    }
    return { action: "delete" };
  }
  if (deleting) return { action: "ignore", reason: "deleted while Bound: reclaimed once Released" };
  if (!finalized && pv.status?.phase === "Bound") return { action: "add-finalizer" };
  return { action: "ignore", reason: `phase ${pv.status?.phase ?? "unset"}: nothing to reclaim` };
}
