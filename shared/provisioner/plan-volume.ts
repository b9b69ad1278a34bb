// One round of a PV sync as a plan: decideVolume says what the PV needs; a
// deletion runs DeleteVolume → drop our finalizer and delete the PV object,
// one round each, each deciding on what the last left. Pure.
import type { PersistentVolume, VolumeAttachment } from "../kube/types.ts";
import { pvDeletionProtectionFinalizer } from "../kube/well-known.ts";
import { reason } from "./constants.ts";
import { decideVolume } from "./decide-volume.ts";
import {
  type EventStep,
  type Needs,
  type Progress,
  type ProvisionerPlan,
  type ProvisionerStep,
  warnedFailure,
  withFinalizer,
  withoutFinalizer,
} from "./steps.ts";

export interface VolumeState {
  volume: PersistentVolume;
  driverName: string;
  driverPublishes: boolean;
  /** VolumeAttachments, read when the PV may be reclaimed and the driver publishes. */
  attachments: readonly VolumeAttachment[];
  progress: Progress;
  /** performance.now() when this sync started deleting (for the duration metric). */
  startedAt?: number;
  /** The deletion Secret's data (undefined: the PV names none), once a round needs it. */
  secrets?: { ok: true; value: Record<string, string> | undefined } | { ok: false; error: string };
}

function volumeWarning(volume: PersistentVolume, text: string): EventStep {
  return { op: "event", object: volume, type: "Warning", reason: reason.volumeFailedDelete, message: text };
}

export function planVolumeRound(s: VolumeState): ProvisionerPlan | Needs {
  const { volume } = s;
  const decision = decideVolume(volume, {
    driverName: s.driverName,
    attachments: s.attachments,
    driverPublishes: s.driverPublishes,
  });
  switch (decision.action) {
    case "ignore":
      return { steps: [], outcome: decision.reason };
    case "blocked":
      return warnedFailure(volumeWarning(volume, decision.message), "deletion waits for detach");
    case "add-finalizer":
      return {
        steps: [{ op: "write-volume", volume: withFinalizer(volume, pvDeletionProtectionFinalizer) }],
        outcome: "added finalizer",
      };
    case "remove-finalizer":
      return {
        steps: [{ op: "write-volume", volume: withoutFinalizer(volume, pvDeletionProtectionFinalizer) }],
        outcome: `removed finalizer: ${decision.reason}`,
      };
    case "delete":
      return deleteRound(s);
  }
}

function deleteRound(s: VolumeState): ProvisionerPlan | Needs {
  const { volume, progress: p } = s;
  const labels = { class: volume.spec.storageClassName ?? "" };
  const volumeId = volume.spec.csi?.volumeHandle ?? "";
  const failed: ProvisionerStep = { op: "count", metric: "deleteFailed", labels };
  if (p.pvDeleted) {
    // The backing volume and the PV object are gone; our finalizer lets what is left go.
    const { remaining } = p.pvDeleted;
    const release =
      remaining && (remaining.metadata.finalizers ?? []).includes(pvDeletionProtectionFinalizer)
        ? [
            {
              op: "write-volume" as const,
              volume: withoutFinalizer(remaining, pvDeletionProtectionFinalizer),
            },
          ]
        : [];
    const since = s.startedAt !== undefined ? { since: s.startedAt } : {};
    return {
      steps: [...release, { op: "count", metric: "deleteTotal", labels, ...since }],
      outcome: `deleted volume ${volumeId}`,
    };
  }
  if (p.volumeDeleted) {
    // The backing volume is gone, so our finalizer has done its job: it goes before the PV object is
    // deleted (upstream drops it after), which leaves pv-protection's the only write after the deletion
    // instead of two controllers racing to update the deleted PV.
    const release = (volume.metadata.finalizers ?? []).includes(pvDeletionProtectionFinalizer)
      ? [{ op: "write-volume" as const, volume: withoutFinalizer(volume, pvDeletionProtectionFinalizer) }]
      : [];
    return {
      steps: [...release, { op: "delete-pv", volume }],
      outcome: `deleting PV ${volume.metadata.name}`,
      again: true,
    };
  }
  if (p.deleteFailed) {
    const f = p.deleteFailed;
    const later: ProvisionerStep[] =
      f.errorClass === "in-progress"
        ? [
            {
              op: "retry-later",
              message: `DeleteVolume for volume ${volume.metadata.name}: ${f.text}`,
              cause: f.error,
            },
          ]
        : [];
    return {
      steps: [volumeWarning(volume, f.text), failed, ...later],
      outcome: "delete failed",
      error: f.text,
    };
  }
  if (!s.secrets) return { needs: "secrets" };
  if (!s.secrets.ok) {
    return {
      steps: [volumeWarning(volume, s.secrets.error), failed],
      outcome: "delete failed",
      error: s.secrets.error,
    };
  }
  return {
    steps: [{ op: "delete-volume", volumeId, secrets: s.secrets.value }],
    outcome: `deleting volume ${volumeId}`,
    again: true,
  };
}
