// The protection decisions (../decide-*.ts) as runtime plans: one finalizer
// write, or a held deletion counted, or nothing, with the outcome text each
// answer reports. Pure.
import type { Plan } from "../../controller/plan.ts";
import type { PersistentVolume, PersistentVolumeClaim } from "../../kube/types.ts";
import { pvcProtectionFinalizer, pvProtectionFinalizer } from "../../kube/well-known.ts";
import type { ClaimStep } from "../decide-claim.ts";
import type { VolumeStep } from "../decide-volume.ts";
import type { ProtectedKind } from "./protection-metrics.ts";

export type ProtectionStep =
  /**
   * The whole object written back, conditional on the resourceVersion read;
   * or, decided on `basis` (an event's copy), only its finalizers, by a patch
   * whose tests pin everything the decision read (shared/kube/tested-patch.ts).
   */
  | {
      op: "write-claim";
      claim: PersistentVolumeClaim;
      change: "added" | "removed";
      basis?: PersistentVolumeClaim;
    }
  | { op: "write-volume"; volume: PersistentVolume; change: "added" | "removed"; basis?: PersistentVolume }
  /** A deletion kept waiting because the object is in use (counted, nothing written). */
  | { op: "held"; kind: ProtectedKind };

export type ProtectionPlan = Plan<ProtectionStep, never>;

export function claimPlan(step: ClaimStep): ProtectionPlan {
  switch (step.op) {
    case "add-finalizer":
      return {
        steps: [{ op: "write-claim", claim: step.claim, change: "added" }],
        outcome: `added ${pvcProtectionFinalizer}`,
      };
    case "remove-finalizer":
      return {
        steps: [{ op: "write-claim", claim: step.claim, change: "removed" }],
        outcome: `removed ${pvcProtectionFinalizer}: no pod uses it`,
      };
    case "keep":
      return {
        steps: [{ op: "held", kind: "PersistentVolumeClaim" }],
        outcome: `kept ${pvcProtectionFinalizer}: ${step.reason}`,
      };
    case "list-pods":
      // The loader lists the pods whenever decideClaim asks; it never asks twice.
      throw new Error("decideClaim asked for a live pod list it was given");
    case "none":
      return { steps: [], outcome: step.reason };
  }
}

export function volumePlan(step: VolumeStep): ProtectionPlan {
  switch (step.op) {
    case "add-finalizer":
      return {
        steps: [{ op: "write-volume", volume: step.volume, change: "added" }],
        outcome: `added ${pvProtectionFinalizer}`,
      };
    case "remove-finalizer":
      return {
        steps: [{ op: "write-volume", volume: step.volume, change: "removed" }],
        outcome: `removed ${pvProtectionFinalizer}: not Bound`,
      };
    case "keep":
      return {
        steps: [{ op: "held", kind: "PersistentVolume" }],
        outcome: `kept ${pvProtectionFinalizer}: ${step.reason}`,
      };
    case "none":
      return { steps: [], outcome: step.reason };
  }
}
