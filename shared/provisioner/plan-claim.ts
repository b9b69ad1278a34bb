// One round of a claim sync as a plan: decideClaim says what the claim
// needs; the facts this sync's earlier steps left (progress) say how far
// that has got. The leak-proof protocol runs one CSI call or object create
// per round: intent finalizer → CreateVolume → PV → success; and, for a claim
// that no longer wants its volume, CreateVolume again by name → DeleteVolume
// or a PV. A process killed between two rounds leaves the claim's intent in
// the API, and the next event starts again from decideClaim. Pure.
import { claimClass } from "../kube/claim-class.ts";
import type { StorageClass } from "../kube/types.ts";
import { provisioningFinalizer } from "../kube/well-known.ts";
import { type ClaimState, claimWarning, recordingVolume, releaseSteps, saveOutcome } from "./claim-state.ts";
import { type SourceRef, stillProvisioningFrom } from "./data-source-ref.ts";
import { decideClaim } from "./decide-claim.ts";
import { provisionRound } from "./plan-provision.ts";
import { type Needs, type ProvisionerPlan, warnedFailure, withFinalizer } from "./steps.ts";

export function planClaimRound(s: ClaimState): ProvisionerPlan | Needs {
  const round = claimRound(s);
  if ("needs" in round || !round.steps.some((step) => step.op === "release-source")) return round;
  // The source stays protected while another claim may still call CreateVolume from it.
  const claims = s.sourceClaims;
  if (!claims) return { needs: "source-claims" };
  const uid = s.claim.metadata.uid;
  const stillUsed = (source: SourceRef) => claims.some((c) => stillProvisioningFrom(c, source, uid));
  const steps = round.steps.filter((step) => step.op !== "release-source" || !stillUsed(step.source));
  return { ...round, steps };
}

function claimRound(s: ClaimState): ProvisionerPlan | Needs {
  const { claim } = s;
  if (!s.pvName.ok) return { steps: [], outcome: "ignored", error: s.pvName.error };
  const decision = decideClaim(claim, {
    driverName: s.driverName,
    storageClass: s.storageClass,
    existingVolume: s.existingVolume,
    now: s.now,
  });
  switch (decision.action) {
    case "ignore":
      return { steps: [], outcome: decision.reason };
    case "backoff":
      return { steps: [], outcome: `backing off until ${decision.until}` };
    case "fail":
      return warnedFailure(claimWarning(claim, decision.message), "provisioning failed");
    case "release-intent":
      return {
        steps: [...(decision.warning ? [claimWarning(claim, decision.warning)] : []), ...releaseSteps(claim)],
        outcome: `released the provisioning intent: ${decision.reason}`,
      };
    case "add-intent":
      // The intent is on record before the driver ever hears of the volume.
      return {
        steps: [{ op: "add-intent-finalizer", claim: withFinalizer(claim, provisioningFinalizer) }],
        outcome: "recorded the provisioning intent",
        again: true,
      };
    case "provision":
      return provisionRound(s, s.storageClass as StorageClass, s.pvName.value);
    case "cleanup":
      return cleanupRound(s, s.pvName.value, decision.reason);
  }
}

/**
 * The claim no longer wants the volume an earlier attempt may have created.
 * CreateVolume is idempotent by name, so asking again with the same request
 * returns that volume (or makes one); then it is deleted, or, if the class
 * retains volumes, recorded in a PV that the binder releases.
 */
function cleanupRound(s: ClaimState, pvName: string, why: string): ProvisionerPlan | Needs {
  const { claim, storageClass, progress: p } = s;
  const blocked = (text: string): ProvisionerPlan =>
    warnedFailure(claimWarning(claim, text), "cleanup blocked");
  if (!storageClass) {
    const cls = claimClass(claim);
    return blocked(
      `cannot clean up a possible volume ${pvName}: StorageClass "${cls}" is gone; remove finalizer ${provisioningFinalizer} by hand once the volume is checked`,
    );
  }
  const saved = saveOutcome(s, pvName);
  if (typeof saved === "object")
    return { steps: [{ op: "throw", error: saved.failed }], outcome: "cleanup failed" };
  if (p.deleteFailed)
    return { steps: [{ op: "throw", error: p.deleteFailed.error }], outcome: "cleanup failed" };
  const release = (outcome: string): ProvisionerPlan => ({ steps: releaseSteps(claim), outcome });
  if (saved === "saved") return release(`recorded retained volume ${pvName} (${why})`);
  if (p.volumeDeleted) return release(`deleted unused volume ${p.created?.volumeId ?? ""} (${why})`);
  if (p.created) {
    if ((storageClass.reclaimPolicy ?? "Delete") === "Delete") {
      const secrets = s.request?.kind === "ready" ? s.request.request.secrets : undefined;
      return {
        steps: [{ op: "delete-volume", volumeId: p.created.volumeId, secrets }],
        outcome: `deleting unused volume ${p.created.volumeId}`,
        again: true,
      };
    }
    // Retained classes never lose a volume: record it; the binder releases it and the policy keeps it.
    const pv = recordingVolume(s, storageClass, pvName);
    if (!pv?.ok) return release(`recorded retained volume ${pvName} (${why})`);
    return {
      steps: [{ op: "create-pv", volume: pv.value }],
      outcome: `recording retained volume ${pvName}`,
      again: true,
    };
  }
  if (p.createFailed) {
    const f = p.createFailed;
    if (f.errorClass === "in-progress" || f.alreadyExists) {
      return {
        steps: [{ op: "retry-later", message: `cleanup of ${pvName}: ${f.text}`, cause: f.error }],
        outcome: "cleanup waits for the driver",
      };
    }
    // A final answer to the same request: no such volume exists.
    return release(`no volume to clean up (${why})`);
  }
  if (!s.request) return { needs: "request" };
  if (s.request.kind !== "ready")
    return blocked(
      `cannot clean up a possible volume ${pvName}: ${"error" in s.request ? s.request.error : s.request.reason}`,
    );
  return {
    steps: [{ op: "create-volume", request: s.request.request, nodeSelected: false }],
    outcome: `asking the driver for volume ${pvName} to clean it up`,
    again: true,
  };
}
