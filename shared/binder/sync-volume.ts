// syncVolume: the volume half of the PersistentVolume controller, as a pure
// decision: Available / Bound / Released transitions, unbinding volumes whose
// claim went elsewhere, and the reclaim policy once the claim is gone.
import type { PersistentVolume, PersistentVolumeClaim, Pod } from "../kube/types.ts";
import { annBoundByController, annDynamicallyProvisioned } from "../kube/well-known.ts";
import { annMigratedTo, message, reason, volumePhase } from "./constants.ts";
import { volumeWithPhase } from "./phase-updates.ts";
import { Planner, type SyncPlan } from "./plan.ts";
import { podUsesClaim } from "./sync-claim.ts";
import { hasAnnotation, isBoundByController, volumeModeMismatch } from "./volume-helpers.ts";

export interface VolumeSyncView {
  /** The claim the volume's claimRef names (by namespace/name), read fresh; undefined when it does not exist. */
  claim: PersistentVolumeClaim | undefined;
  /** Pods in the claim's namespace; needed only for the Recycle policy. */
  pods: readonly Pod[];
  now: string;
}

export function syncVolume(volume: PersistentVolume, view: VolumeSyncView): SyncPlan {
  const p = new Planner(view.now);
  decideVolume(p, volume, view);
  return p.plan();
}

function setPhase(p: Planner, volume: PersistentVolume, phase: string, text = ""): PersistentVolume {
  const next = volumeWithPhase(volume, phase, text, p.now);
  if (next !== volume) p.write({ op: "update-volume-status", volume: next });
  return next;
}

/** Phase change plus Event, only when the phase changes (so a Failed volume is announced once). */
function setPhaseWithEvent(
  p: Planner,
  volume: PersistentVolume,
  phase: string,
  type: "Normal" | "Warning",
  why: string,
  text: string,
): PersistentVolume {
  if (volume.status?.phase === phase) return volume;
  const next = setPhase(p, volume, phase, text);
  p.event(next, type, why, text);
  return next;
}

function decideVolume(p: Planner, volume: PersistentVolume, view: VolumeSyncView): void {
  const ref = volume.spec.claimRef;
  if (!ref) {
    // Observed: unused volume.
    setPhase(p, volume, volumePhase.available);
    p.decided("volume is available");
    return;
  }
  if (!ref.uid) {
    // Observed: pre-bound by a user to a claim that has not been bound yet; the claim sync does it.
    setPhase(p, volume, volumePhase.available);
    p.decided(`volume is pre-bound to claim ${ref.namespace}/${ref.name}`);
    return;
  }
  // A claim with the same name but another uid was deleted and re-created: the volume's claim is gone.
  const claim = view.claim && view.claim.metadata.uid === ref.uid ? view.claim : undefined;
  if (!claim) {
    // Observed: the bound claim is gone. Released (never over Failed), then the reclaim policy.
    let released = volume;
    if (volume.status?.phase !== volumePhase.released && volume.status?.phase !== volumePhase.failed) {
      released = setPhase(p, volume, volumePhase.released);
    }
    reclaimVolume(p, released, view);
    return;
  }
  const claimVolume = claim.spec.volumeName ?? "";
  if (claimVolume === "") {
    // Observed: the volume points at the claim, the claim does not point back yet.
    if (volumeModeMismatch(claim, volume)) {
      p.event(
        volume,
        "Warning",
        reason.volumeMismatch,
        message.volumeModeMismatchOnVolume(claim.metadata.name),
      );
      p.event(
        claim,
        "Warning",
        reason.volumeMismatch,
        message.volumeModeMismatchOnClaim(volume.metadata.name),
      );
      p.decided("volumeMode of volume and claim differ");
      return;
    }
    // The claim sync finishes the binding (a provisioner saved only the PV).
    p.followUp({
      kind: "claim",
      namespace: claim.metadata.namespace ?? "",
      name: claim.metadata.name,
      candidate: volume.metadata.name,
    });
    p.decided(`claim ${claim.metadata.namespace}/${claim.metadata.name} is not bound yet; syncing it`);
    return;
  }
  if (claimVolume === volume.metadata.name) {
    // Observed: properly bound.
    setPhase(p, volume, volumePhase.bound);
    p.decided("volume is bound");
    return;
  }
  // Observed: the claim is bound to another volume.
  if (
    hasAnnotation(volume, annDynamicallyProvisioned) &&
    volume.spec.persistentVolumeReclaimPolicy === "Delete"
  ) {
    // Provisioned for this claim but no longer needed: release and reclaim.
    let released = volume;
    if (volume.status?.phase !== volumePhase.released && volume.status?.phase !== volumePhase.failed) {
      released = setPhase(p, volume, volumePhase.released);
    }
    reclaimVolume(p, released, view);
    return;
  }
  unbindVolume(p, volume);
}

/** Controller-bound volumes lose their claimRef; user pre-bound ones keep it, minus the uid. */
function unbindVolume(p: Planner, volume: PersistentVolume): void {
  let next: PersistentVolume;
  if (isBoundByController(volume)) {
    const annotations = { ...volume.metadata.annotations };
    delete annotations[annBoundByController];
    const metadata: PersistentVolume["metadata"] = { ...volume.metadata, annotations };
    // No annotations read better than an empty map, as upstream leaves it.
    if (Object.keys(annotations).length === 0) delete metadata.annotations;
    const spec = { ...volume.spec };
    delete spec.claimRef;
    next = { ...volume, metadata, spec };
    p.decided("unbound volume whose claim is bound elsewhere");
  } else {
    const ref = { ...volume.spec.claimRef };
    delete ref.uid;
    next = { ...volume, spec: { ...volume.spec, claimRef: ref } };
    p.decided("cleared the binding of a user pre-bound volume whose claim is bound elsewhere");
  }
  p.write({ op: "update-volume", volume: next });
  setPhase(p, next, volumePhase.available);
}

function reclaimVolume(p: Planner, volume: PersistentVolume, view: VolumeSyncView): void {
  if (volume.metadata.annotations?.[annMigratedTo]) {
    p.decided("volume is migrated to CSI; the external provisioner reclaims it");
    return;
  }
  const policy = volume.spec.persistentVolumeReclaimPolicy;
  switch (policy) {
    case "Retain":
      p.decided("volume is released; reclaim policy Retain keeps it");
      return;
    case "Recycle":
      recycleVolume(p, volume, view);
      return;
    case "Delete":
      deleteVolume(p, volume);
      return;
    default:
      setPhaseWithEvent(
        p,
        volume,
        volumePhase.failed,
        "Warning",
        reason.volumeUnknownReclaimPolicy,
        message.unknownReclaimPolicy,
      );
      p.decided(`unknown reclaim policy ${String(policy)}`);
  }
}

function recycleVolume(p: Planner, volume: PersistentVolume, view: VolumeSyncView): void {
  const ref = volume.spec.claimRef;
  const users = view.pods
    .filter(
      (pod) =>
        pod.metadata.namespace === ref?.namespace &&
        pod.status?.phase !== "Succeeded" &&
        pod.status?.phase !== "Failed" &&
        podUsesClaim(pod, ref?.name ?? ""),
    )
    .map((pod) => pod.metadata.name);
  if (users.length > 0) {
    p.event(volume, "Normal", reason.volumeFailedRecycle, message.volumeUsedByPods(users));
    p.decided("recycle waits: volume is used by pods");
    return;
  }
  // No recycler plugin exists for any volume here (CSI volumes never have one).
  setPhaseWithEvent(p, volume, volumePhase.failed, "Warning", reason.volumeFailedRecycle, message.noRecycler);
  p.decided("no recycler plugin for the volume");
}

function deleteVolume(p: Planner, volume: PersistentVolume): void {
  const provisioner = volume.metadata.annotations?.[annDynamicallyProvisioned];
  // An external provisioner deletes what it provisioned; and since HonorPVReclaimPolicy (GA in 1.33)
  // kube-controller-manager leaves a CSI volume without provisioned-by, static, to its driver's
  // external-provisioner too. Either stays Released for its deleter.
  const external = provisioner ? !provisioner.startsWith("kubernetes.io/") : Boolean(volume.spec.csi);
  if (external) {
    p.decided("volume is released; waiting for the external deleter");
    return;
  }
  // No in-tree deleter plugin exists here.
  setPhaseWithEvent(
    p,
    volume,
    volumePhase.failed,
    "Warning",
    reason.volumeFailedDelete,
    message.noDeleter(volume.metadata.name),
  );
  p.decided("no deleter for the volume");
}
