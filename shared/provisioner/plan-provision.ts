// The provisioning rounds of a claim that decideClaim says to provision:
// progress Event (slow or retried claims) → CreateVolume → PV → success, each
// failure answered as the external-provisioner answers it (Event, backoff
// annotations, reschedule, retry later). Pure.
import { progressEventsDue } from "../kube/progress-events.ts";
import { rfc3339 } from "../kube/time.ts";
import type { PersistentVolumeClaim, StorageClass } from "../kube/types.ts";
import { annSelectedNode, provisioningFinalizer } from "../kube/well-known.ts";
import {
  type ClaimState,
  claimWarning,
  recordingVolume,
  releaseSourceSteps,
  saveOutcome,
} from "./claim-state.ts";
import { annProvisioningFailures, annProvisioningRetryAfter, message, reason } from "./constants.ts";
import { sourceOf } from "./data-source-ref.ts";
import { nextRetryDelaySeconds } from "./decide-claim.ts";
import { takeBackRound } from "./plan-take-back.ts";
import {
  backoffAnnotations,
  type CsiFailure,
  hasAnyAnnotation,
  type Needs,
  type ProvisionerPlan,
  type ProvisionerStep,
  withoutAnnotations,
  withoutFinalizer,
} from "./steps.ts";

function dataSourceKind(claim: PersistentVolumeClaim): string {
  return claim.spec.dataSourceRef?.kind ?? claim.spec.dataSource?.kind ?? "";
}

/**
 * A final failure: a Warning and the backoff annotations. A final answer to
 * this exact request means no volume exists under its name, so the intent
 * goes with the backoff write; except after ALREADY_EXISTS (`keepIntent`):
 * something exists that this request cannot reconcile, so the intent stays
 * and blocks the claim's deletion until someone looks.
 */
function failFinalSteps(
  s: ClaimState,
  storageClass: StorageClass,
  error: string,
  kind: "final" | "infeasible",
  keepIntent = false,
): ProvisionerStep[] {
  const { claim } = s;
  const text = kind === "infeasible" ? message.infeasible : message.failed(storageClass.metadata.name, error);
  const failures = Number(claim.metadata.annotations?.[annProvisioningFailures] ?? "0") + 1;
  const interval = s.retryInterval ?? {};
  const seconds = nextRetryDelaySeconds(kind === "infeasible" ? Number.MAX_SAFE_INTEGER : failures, interval);
  const retryAfter = rfc3339(new Date(s.now.getTime() + seconds * 1000));
  const annotations = {
    ...claim.metadata.annotations,
    [annProvisioningFailures]: String(failures),
    [annProvisioningRetryAfter]: retryAfter,
  };
  let next: PersistentVolumeClaim = { ...claim, metadata: { ...claim.metadata, annotations } };
  if (!keepIntent) next = withoutFinalizer(next, provisioningFinalizer);
  return [claimWarning(claim, text), { op: "write-claim", claim: next }];
}

/** RESOURCE_EXHAUSTED on the selected node, or the node is gone: let the scheduler pick another. */
function rescheduleSteps(
  claim: PersistentVolumeClaim,
  storageClass: StorageClass,
  error: string,
): ProvisionerStep[] {
  const next = withoutFinalizer(withoutAnnotations(claim, [annSelectedNode]), provisioningFinalizer);
  return [
    claimWarning(claim, message.failed(storageClass.metadata.name, error)),
    { op: "write-claim", claim: next },
  ];
}

export function provisionRound(
  s: ClaimState,
  storageClass: StorageClass,
  pvName: string,
): ProvisionerPlan | Needs {
  const { claim, progress: p } = s;
  const labels = { class: storageClass.metadata.name, source: dataSourceKind(claim) };
  const failed: ProvisionerStep = { op: "count", metric: "provisionFailed", labels };
  const claimKey = `${claim.metadata.namespace}/${claim.metadata.name}`;
  const saved = saveOutcome(s, pvName);
  const secrets = s.request?.kind === "ready" ? s.request.request.secrets : undefined;

  if (saved === "saved") {
    // Failures recorded earlier are history now; the finalizer itself goes with the bind.
    const cleared = hasAnyAnnotation(claim, backoffAnnotations)
      ? [{ op: "write-claim" as const, claim: withoutAnnotations(claim, backoffAnnotations) }]
      : [];
    const done: ProvisionerStep[] = [
      ...releaseSourceSteps(claim),
      {
        op: "event",
        object: claim,
        type: "Normal",
        reason: reason.provisioningSucceeded,
        message: message.succeeded(pvName),
      },
      {
        op: "count",
        metric: "provisionTotal",
        labels,
        ...(s.startedAt !== undefined ? { since: s.startedAt } : {}),
      },
      ...cleared,
    ];
    return { steps: done, outcome: `provisioned volume ${pvName}` };
  }
  if (saved !== undefined) return takeBackRound(s, saved.failed, claimKey, secrets);
  if (p.volumeDeleted || p.deleteFailed) {
    // The volume was too small to use: given back, the claim backs off (the intent stayed until it was gone).
    if (p.deleteFailed)
      return { steps: [{ op: "throw", error: p.deleteFailed.error }], outcome: "delete failed" };
    const built = recordingVolume(s, storageClass, pvName);
    const error = built && !built.ok ? built.error : `volume ${pvName} cannot be recorded`;
    return { steps: failFinalSteps(s, storageClass, error, "final"), outcome: "provisioning failed", error };
  }
  if (p.created) {
    const pv = recordingVolume(s, storageClass, pvName);
    if (!pv?.ok) {
      return {
        steps: [{ op: "delete-volume", volumeId: p.created.volumeId, secrets }],
        outcome: `giving back volume ${p.created.volumeId}`,
        again: true,
      };
    }
    return {
      steps: [{ op: "create-pv", volume: pv.value }],
      outcome: `recording volume ${pvName}`,
      again: true,
    };
  }
  if (p.createFailed) return createFailedPlan(s, storageClass, p.createFailed, failed);
  // A retry or a slow claim is told it is being provisioned; a fast first attempt only hears the outcome.
  const isRetry = claim.metadata.annotations?.[annProvisioningFailures] !== undefined;
  if ((isRetry || progressEventsDue(claim.metadata.creationTimestamp, s.now)) && !p.announced) {
    const text = message.provisioning(claimKey);
    return {
      steps: [
        {
          op: "event",
          object: claim,
          type: "Normal",
          reason: reason.provisioning,
          message: text,
          announces: true,
        },
      ],
      outcome: "provisioning",
      again: true,
    };
  }
  const r = s.request;
  if (!r) return { needs: "request" };
  switch (r.kind) {
    case "populator":
      return { steps: [{ op: "event", object: claim, type: "Normal", ...r.event }], outcome: r.reason };
    case "reschedule":
      return {
        steps: [...rescheduleSteps(claim, storageClass, r.error), failed],
        outcome: "rescheduled",
        error: r.error,
      };
    case "error":
      return {
        steps: [...failFinalSteps(s, storageClass, r.error, "final"), failed],
        outcome: "provisioning failed",
        error: r.error,
      };
    case "ready": {
      // The source of a clone or restore must outlive the copy.
      const source = sourceOf(claim);
      const nodeSelected = r.selectedNode !== undefined;
      return {
        steps: [
          ...(source ? [{ op: "protect-source" as const, source }] : []),
          { op: "create-volume", request: r.request, nodeSelected },
        ],
        outcome: `creating volume ${pvName}`,
        again: true,
      };
    }
  }
}

/** CreateVolume failed: counted, then answered by how the error reads (see shared/csi/errors.ts). */
function createFailedPlan(
  s: ClaimState,
  storageClass: StorageClass,
  f: CsiFailure,
  failed: ProvisionerStep,
): ProvisionerPlan {
  const { claim } = s;
  const claimKey = `${claim.metadata.namespace}/${claim.metadata.name}`;
  switch (f.errorClass) {
    case "in-progress":
      // The driver may still be creating it: keep the intent, retry the same request soon.
      return {
        steps: [
          failed,
          claimWarning(claim, message.failed(storageClass.metadata.name, f.text)),
          {
            op: "retry-later",
            message: `CreateVolume for claim ${claimKey} is still in progress: ${f.text}`,
            cause: f.error,
          },
        ],
        outcome: "CreateVolume in progress",
      };
    case "reschedule":
      return {
        steps: [failed, ...rescheduleSteps(claim, storageClass, f.text), ...releaseSourceSteps(claim)],
        outcome: "rescheduled",
        error: f.text,
      };
    case "infeasible":
      return {
        steps: [
          failed,
          ...failFinalSteps(s, storageClass, f.text, "infeasible"),
          ...releaseSourceSteps(claim),
        ],
        outcome: "provisioning failed (infeasible)",
        error: f.text,
      };
    case "final":
      return {
        steps: [
          failed,
          ...failFinalSteps(s, storageClass, f.text, "final", f.alreadyExists),
          ...releaseSourceSteps(claim),
        ],
        outcome: "provisioning failed",
        error: f.text,
      };
  }
}
