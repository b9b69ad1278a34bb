// "Why is my PVC Pending?": every volume with the exact reason the binder
// passes it over, and what the binder is waiting for. Built from the same
// checks and the same decision the sync makes, so it cannot drift from them.

import { claimClass } from "../kube/claim-class.ts";
import type { PersistentVolumeClaim } from "../kube/types.ts";
import { annSelectedNode, annStorageProvisioner } from "../kube/well-known.ts";
import { claimSelectorError, judgeVolumeForClaim, type SkipReason } from "./find-best-match.ts";
import { type ClaimSyncView, isDelayBinding, syncClaim, whyVolumeCannotSatisfyClaim } from "./sync-claim.ts";
import { volumeHasAccessModes } from "./volume-helpers.ts";

export interface VolumeExplanation {
  name: string;
  verdict: "would bind" | "candidate" | "pre-bound to this claim" | "not chosen";
  reason?: SkipReason | "larger than the chosen volume";
  detail?: string;
}

export interface ClaimExplanation {
  claim: string;
  phase: string;
  storageClass: string;
  volumeName?: string;
  delayedBinding: boolean;
  selectedNode?: string;
  provisioner?: string;
  /** What the binder would do on its next sync, in words. */
  decision: string;
  /** What has to happen before the claim can be bound, in words. */
  waitingFor: string;
  volumes: VolumeExplanation[];
}

export function explainClaim(claim: PersistentVolumeClaim, view: ClaimSyncView): ClaimExplanation {
  const delayBinding = isDelayBinding(claim, view.classes);
  const plan = syncClaim(claim, view);
  const bindTarget = plan.steps.find((s) => s.op === "update-claim" && s.claim.spec.volumeName);
  const chosen = bindTarget?.op === "update-claim" ? bindTarget.claim.spec.volumeName : undefined;
  const selectorError = claimSelectorError(claim);
  const volumes: VolumeExplanation[] = [];
  for (const v of view.volumes) {
    const name = v.metadata.name;
    if (name === chosen) {
      volumes.push({ name, verdict: "would bind" });
      continue;
    }
    if (claim.spec.volumeName) {
      // A claim that names a volume only ever considers that one.
      if (name !== claim.spec.volumeName) continue;
      const why = whyVolumeCannotSatisfyClaim(v, claim);
      volumes.push(why ? { name, verdict: "not chosen", detail: why } : { name, verdict: "candidate" });
      continue;
    }
    if (!volumeHasAccessModes(v, claim)) {
      volumes.push({
        name,
        verdict: "not chosen",
        reason: "access-modes",
        detail: `offers ${JSON.stringify(v.spec.accessModes ?? [])}, the claim asks for ${JSON.stringify(claim.spec.accessModes ?? [])}`,
      });
      continue;
    }
    if (selectorError) {
      volumes.push({ name, verdict: "not chosen", reason: "selector", detail: selectorError });
      continue;
    }
    const verdict = judgeVolumeForClaim(v, claim, delayBinding);
    if (verdict.kind === "skipped") {
      volumes.push({ name, verdict: "not chosen", reason: verdict.reason, detail: verdict.detail });
    } else if (verdict.kind === "pre-bound") {
      volumes.push({ name, verdict: "pre-bound to this claim" });
    } else {
      volumes.push({
        name,
        verdict: "candidate",
        ...(chosen ? { reason: "larger than the chosen volume" as const } : {}),
      });
    }
  }
  const selectedNode = claim.metadata.annotations?.[annSelectedNode];
  const provisioner =
    claim.metadata.annotations?.[annStorageProvisioner] ??
    view.classes.find((c) => c.metadata.name === claimClass(claim))?.provisioner;
  return {
    claim: `${claim.metadata.namespace}/${claim.metadata.name}`,
    phase: claim.status?.phase ?? "Pending",
    storageClass: claimClass(claim),
    ...(claim.spec.volumeName ? { volumeName: claim.spec.volumeName } : {}),
    delayedBinding: delayBinding,
    ...(selectedNode ? { selectedNode } : {}),
    ...(provisioner ? { provisioner } : {}),
    decision: plan.error ? `error: ${plan.error}` : plan.outcome,
    waitingFor: waitingFor(claim, view, plan.outcome, chosen, delayBinding, provisioner),
    volumes,
  };
}

function waitingFor(
  claim: PersistentVolumeClaim,
  view: ClaimSyncView,
  outcome: string,
  chosen: string | undefined,
  delayBinding: boolean,
  provisioner: string | undefined,
): string {
  if (claim.status?.phase === "Bound" && !chosen) return "nothing: the claim is bound";
  if (claim.status?.phase === "Lost")
    return "nothing the binder can do: the claim is Lost (its volume is gone or bound elsewhere)";
  if (chosen) return `nothing: the next sync binds it to volume ${chosen}`;
  if (claim.spec.volumeName) {
    const exists = view.volumes.some((v) => v.metadata.name === claim.spec.volumeName);
    return exists
      ? `the requested volume ${claim.spec.volumeName} to become usable by this claim (see its entry)`
      : `the requested volume ${claim.spec.volumeName} to be created`;
  }
  const cls = claimClass(claim);
  if (delayBinding && !claim.metadata.annotations?.[annSelectedNode]) {
    return "a pod that uses this claim to be scheduled (the class is WaitForFirstConsumer)";
  }
  if (cls !== "") {
    if (!view.classes.some((c) => c.metadata.name === cls)) return `StorageClass "${cls}" to be created`;
    return `the provisioner '${provisioner ?? "unknown"}' to create a volume, or an administrator to create a matching PersistentVolume`;
  }
  return outcome.startsWith("assigned default")
    ? "the next sync, after the default StorageClass was assigned"
    : "an administrator to create a matching PersistentVolume (the claim has no class, so nothing provisions one)";
}
