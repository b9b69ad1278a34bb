// The attacher's side of a PV (upstream csi_handler.go SyncNewOrUpdatedPersistentVolume):
// our finalizer goes once the PV is being deleted and no VolumeAttachment
// names it. Only such a PV needs the list of every VolumeAttachment.
import type { PersistentVolume } from "../kube/types.ts";
import type { VolumeState } from "./attacher-steps.ts";
import type { AttacherPlan } from "./attachment-protocol.ts";
import type { AttachHandler } from "./handler.ts";
import { removeVolumeFinalizerPatch } from "./patches.ts";

/** Deleting and holding our finalizer: worth listing every VolumeAttachment for. */
export function mayReleaseVolume(pv: Pick<PersistentVolume, "metadata">, handler: AttachHandler): boolean {
  const { finalizer } = handler;
  const finalizers: unknown = pv.metadata.finalizers;
  return (
    finalizer !== undefined &&
    Boolean(pv.metadata.deletionTimestamp) &&
    Array.isArray(finalizers) &&
    finalizers.includes(finalizer)
  );
}

export function planVolume(s: VolumeState): AttacherPlan {
  const decision = s.handler.decideVolume(s.pv, s.attachments);
  if (decision.action === "ignore") return { steps: [], outcome: decision.reason };
  const patch = removeVolumeFinalizerPatch(s.pv, s.handler.finalizer ?? "");
  const name = s.pv.metadata.name;
  return {
    steps: patch ? [{ op: "remove-volume-finalizer", name, patch }] : [],
    outcome: "removed the attacher finalizer",
  };
}
