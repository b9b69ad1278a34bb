// syncClaim: the claim half of the PersistentVolume controller, as a pure
// decision. Mirrors upstream's syncUnboundClaim / syncBoundClaim / bind,
// including the order of writes, so a crash between any two steps leaves a
// state the next sync completes.

import { claimClass, claimHasClass, defaultStorageClass, volumeClass } from "../kube/claim-class.ts";
import { podClaimNames } from "../kube/pod-claims.ts";
import type { PersistentVolume, PersistentVolumeClaim, Pod, StorageClass } from "../kube/types.ts";
import { annBindCompleted } from "../kube/well-known.ts";
import { claimPhase, message, reason, volumePhase } from "./constants.ts";
import { findBestMatchForClaim } from "./find-best-match.ts";
import {
  claimBoundToVolume,
  claimWithStatus,
  isProvisionedForClaim,
  volumeBoundToClaim,
  volumeWithPhase,
} from "./phase-updates.ts";
import { Planner as PlanBuilder, type Planner, type SyncPlan } from "./plan.ts";
import { provisionClaim } from "./provision-claim.ts";
import {
  claimRefKey,
  hasAnnotation,
  isBoundByController,
  isDelayBindingProvisioning,
  isVolumeBoundToClaim,
  volumeAttributesClassMismatch,
  volumeHasAccessModes,
  volumeIsLargeEnough,
  volumeModeMismatch,
} from "./volume-helpers.ts";

/** What a claim sync may look at, as read from the API for this sync. */
export interface ClaimSyncView {
  /** Unbound claims without volumeName: every PV. Otherwise: the PV the claim names, when it exists. */
  volumes: readonly PersistentVolume[];
  /** The claim's class when it exists; for claims without any class, every class (to find the default). */
  classes: readonly StorageClass[];
  /** Pods in the claim's namespace (for WaitForPodScheduled); may be empty when not needed. */
  pods: readonly Pod[];
  /** RFC 3339 time stamped on phase transitions. */
  now: string;
}

export function syncClaim(claim: PersistentVolumeClaim, view: ClaimSyncView): SyncPlan {
  const p = new PlanBuilder(view.now);
  if (!hasAnnotation(claim, annBindCompleted)) syncUnboundClaim(p, claim, view);
  else syncBoundClaim(p, claim, view);
  return p.plan();
}

function findVolume(view: ClaimSyncView, name: string): PersistentVolume | undefined {
  return view.volumes.find((v) => v.metadata.name === name);
}

function findClass(view: ClaimSyncView, name: string): StorageClass | undefined {
  return view.classes.find((c) => c.metadata.name === name);
}

/** Whether binding waits for the scheduler: the class exists and is WaitForFirstConsumer. */
export function isDelayBinding(claim: PersistentVolumeClaim, classes: readonly StorageClass[]): boolean {
  const name = claimClass(claim);
  if (name === "") return false;
  const cls = classes.find((c) => c.metadata.name === name);
  return cls?.volumeBindingMode === "WaitForFirstConsumer";
}

/** The four writes of a bind, in upstream's order; each is skipped when it would change nothing. */
export function bind(p: Planner, volume: PersistentVolume, claim: PersistentVolumeClaim): void {
  const provisionedForClaim = isProvisionedForClaim(volume, claim);
  let v = volumeBoundToClaim(volume, claim);
  if (v !== volume) p.write({ op: "update-volume", volume: v });
  const boundVolume = volumeWithPhase(v, volumePhase.bound, "", p.now);
  if (boundVolume !== v) p.write({ op: "update-volume-status", volume: boundVolume });
  v = boundVolume;
  let c = claimBoundToVolume(claim, v, provisionedForClaim);
  if (c !== claim) p.write({ op: "update-claim", claim: c });
  const boundClaim = claimWithStatus(c, claimPhase.bound, v);
  if (boundClaim !== c) p.write({ op: "update-claim-status", claim: boundClaim });
  c = boundClaim;
  p.decided(
    p.steps.length > 0 ? `bound to volume ${v.metadata.name}` : `already bound to volume ${v.metadata.name}`,
  );
}

function markClaimPending(p: Planner, claim: PersistentVolumeClaim): void {
  const pending = claimWithStatus(claim, claimPhase.pending, undefined);
  if (pending !== claim) p.write({ op: "update-claim-status", claim: pending });
}

/** Status change plus an Event, only when the phase actually changes (Lost is announced once). */
function markClaimPhaseWithEvent(
  p: Planner,
  claim: PersistentVolumeClaim,
  phase: string,
  type: "Normal" | "Warning",
  why: string,
  text: string,
): void {
  if (claim.status?.phase === phase) return;
  p.write({ op: "update-claim-status", claim: claimWithStatus(claim, phase, undefined) });
  p.event(claim, type, why, text);
}

function syncUnboundClaim(p: Planner, claim: PersistentVolumeClaim, view: ClaimSyncView): void {
  const volumeName = claim.spec.volumeName ?? "";
  if (volumeName === "") {
    // The user did not ask for a particular volume.
    const delayBinding = isDelayBinding(claim, view.classes);
    const match = findBestMatchForClaim(view.volumes, claim, delayBinding);
    if (match.error) {
      p.fail(match.error);
      return;
    }
    if (match.volume) {
      // Observed: claim Pending, a volume matches (Available or pre-bound to it).
      bind(p, match.volume, claim);
      return;
    }
    // Observed: no volume matches. A claim with no class at all gets the default class, then syncs again.
    if (!claimHasClass(claim)) {
      const def = defaultStorageClass(view.classes);
      if (def) {
        p.write({
          op: "update-claim",
          claim: { ...claim, spec: { ...claim.spec, storageClassName: def.metadata.name } },
        });
        p.followUp({ kind: "claim", namespace: claim.metadata.namespace ?? "", name: claim.metadata.name });
        p.decided(`assigned default StorageClass ${def.metadata.name}`);
        return;
      }
    }
    if (delayBinding && !isDelayBindingProvisioning(claim)) {
      // Observed: WaitForFirstConsumer and the scheduler has not picked a node.
      emitWaitingForConsumer(p, claim, view.pods);
      p.decided("waiting for first consumer");
    } else if (claimClass(claim) !== "") {
      // Observed: a class is named: hand the claim to its provisioner; the claim stays as it is.
      provisionClaim(p, claim, findClass(view, claimClass(claim)));
      return;
    } else {
      p.event(claim, "Normal", reason.failedBinding, message.noVolumeNoClass);
      p.decided("no volume available and no class set");
    }
    markClaimPending(p, claim);
    return;
  }

  // The user (or an earlier sync) named a volume.
  const volume = findVolume(view, volumeName);
  if (!volume) {
    // Observed: the named volume does not exist (yet): stay Pending and retry later.
    markClaimPending(p, claim);
    p.decided(`waiting for requested volume ${volumeName} to exist`);
    return;
  }
  if (!volume.spec.claimRef) {
    // Observed: the named volume is unclaimed: bind if it satisfies the claim.
    const why = whyVolumeCannotSatisfyClaim(volume, claim);
    if (why) {
      p.event(
        claim,
        "Warning",
        reason.volumeMismatch,
        message.cannotBindRequested(volume.metadata.name, why),
      );
      markClaimPending(p, claim);
      p.decided(`requested volume ${volume.metadata.name} does not satisfy the claim: ${why}`);
      return;
    }
    bind(p, volume, claim);
    return;
  }
  if (isVolumeBoundToClaim(volume, claim)) {
    // Observed: the volume already points at this claim: finish the binding.
    bind(p, volume, claim);
    return;
  }
  // Observed: the named volume belongs to another claim.
  p.event(claim, "Warning", reason.failedBinding, message.alreadyBoundElsewhere(volume.metadata.name));
  if (!isBoundByController(claim)) {
    markClaimPending(p, claim);
    p.decided(`requested volume ${volume.metadata.name} is bound to another claim`);
    return;
  }
  // Only possible if someone removed bind-completed from a claim we bound: do not guess, report.
  p.fail(
    `invalid binding of claim "${claim.metadata.namespace}/${claim.metadata.name}" to volume "${volumeName}": volume already claimed by "${claimRefKey(volume.spec.claimRef)}"`,
  );
}

/**
 * checkVolumeSatisfyClaim: an unclaimed volume the claim names must fit it
 * (the selector is not checked). A volume whose claimRef already points at
 * the claim is bound without it, as upstream does.
 */
export function whyVolumeCannotSatisfyClaim(
  volume: PersistentVolume,
  claim: PersistentVolumeClaim,
): string | undefined {
  if (volume.metadata.deletionTimestamp) return `the volume is marked for deletion "${volume.metadata.name}"`;
  if (!volumeIsLargeEnough(volume, claim)) return "requested PV is too small";
  if (volumeClass(volume) !== claimClass(claim)) return "storageClassName does not match";
  if (volumeAttributesClassMismatch(claim, volume)) return "volumeAttributesClassName does not match";
  if (volumeModeMismatch(claim, volume)) return "incompatible volumeMode";
  if (!volumeHasAccessModes(volume, claim)) return "incompatible accessMode";
  return undefined;
}

function syncBoundClaim(p: Planner, claim: PersistentVolumeClaim, view: ClaimSyncView): void {
  const volumeName = claim.spec.volumeName ?? "";
  if (volumeName === "") {
    // Observed: bound before, but the claim no longer names a volume.
    markClaimPhaseWithEvent(p, claim, claimPhase.lost, "Warning", reason.claimLost, message.lostReference);
    p.decided("claim lost its volume reference");
    return;
  }
  const volume = findVolume(view, volumeName);
  if (!volume) {
    // Observed: the volume is gone.
    markClaimPhaseWithEvent(p, claim, claimPhase.lost, "Warning", reason.claimLost, message.lostVolume);
    p.decided(`volume ${volumeName} is gone`);
    return;
  }
  const ref = volume.spec.claimRef;
  if (!ref || ref.uid === claim.metadata.uid) {
    // Observed: the volume came unbound, or all is well: (re)bind, which writes only what differs.
    bind(p, volume, claim);
    return;
  }
  // Observed: the volume is bound to a different claim.
  markClaimPhaseWithEvent(p, claim, claimPhase.lost, "Warning", reason.claimMisbound, message.misbound);
  p.decided(`volume ${volumeName} is bound to another claim`);
}

/** Pods that use the claim, are not terminated, and have no node yet. */
export function unscheduledPodsUsingClaim(claim: PersistentVolumeClaim, pods: readonly Pod[]): string[] {
  const names: string[] = [];
  for (const pod of pods) {
    if (pod.metadata.namespace !== claim.metadata.namespace) continue;
    const phase = pod.status?.phase;
    if (phase === "Succeeded" || phase === "Failed") continue;
    if (pod.spec.nodeName) continue;
    if (podUsesClaim(pod, claim.metadata.name)) names.push(pod.metadata.name);
  }
  return names;
}

export function podUsesClaim(pod: Pod, claimName: string): boolean {
  return podClaimNames(pod).includes(claimName);
}

function emitWaitingForConsumer(p: Planner, claim: PersistentVolumeClaim, pods: readonly Pod[]): void {
  const waiting = unscheduledPodsUsingClaim(claim, pods);
  if (waiting.length === 0) {
    p.event(claim, "Normal", reason.waitForFirstConsumer, message.waitForFirstConsumer);
  } else if (waiting.length === 1) {
    p.event(claim, "Normal", reason.waitForPodScheduled, message.waitForPod(waiting[0]!));
  } else {
    p.event(claim, "Normal", reason.waitForPodScheduled, message.waitForPods(waiting));
  }
}
