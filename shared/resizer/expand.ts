// The expansion of a claim (external-resizer's expandAndRecover with
// RecoverVolumeExpansionFailure, GA): pure rounds over the claim, its PV and
// the CSI answer the last round carried. In order: the intent in the claim's
// status (allocatedResources + ControllerResizeInProgress + Resizing), the
// ControllerExpandVolume call (or none, for a node-only driver), the PV's
// capacity, then the claim's final status. Failures record upstream's
// conditions and a backoff on the claim, and answer "retry later".
import type { Plan } from "../controller/plan.ts";
import { AccessModeError, csiAccessModeForVolume } from "../csi/access-modes.ts";
import type { ControllerExpandVolumeRequest, VolumeCapability } from "../csi/types.ts";
import { parseQuantityBytes } from "../kube/quantity.ts";
import { rfc3339 } from "../kube/time.ts";
import type { ClaimResourceStatus, PersistentVolume, PersistentVolumeClaim } from "../kube/types.ts";
import { annNodeExpansionNotRequired } from "../kube/well-known.ts";
import { claimId, notOurs } from "./bound-volume.ts";
import {
  backoffOf,
  clearedBackoff,
  compareSizes,
  conditionsOf,
  failureAnnotations,
  findCondition,
  isFinalCode,
  isInfeasibleCode,
  mergeResizeConditions,
} from "./claim-status.ts";
import { condition, fileSystemResizePendingMessage, code as grpc, reason } from "./constants.ts";
import type { CsiFailure, ExpandState, ResizerCarry, ResizerStep } from "./steps.ts";

export type ResizerPlan = Plan<ResizerStep, never>;

const none = (outcome: string): ResizerPlan => ({ steps: [], outcome });

function storageStatus(claim: PersistentVolumeClaim): ClaimResourceStatus | undefined {
  return claim.status?.allocatedResourceStatuses?.storage;
}

/**
 * The size to expand to (upstream expandAndRecover), or undefined when the
 * node has yet to finish. "A final error seen" is upstream's in-memory mark;
 * here it is the ControllerResizeError condition that every final error leaves.
 */
export function expansionTarget(
  claim: PersistentVolumeClaim,
  pv: PersistentVolume,
  controllerExpand: boolean,
) {
  const request = claim.spec.resources?.requests?.storage as string;
  const allocated = claim.status?.allocatedResources?.storage;
  const pvSize = pv.spec.capacity?.storage;
  const status = storageStatus(claim);
  const pvBelowRequest = (compareSizes(pvSize, request) ?? -1) < 0;
  if (pvBelowRequest) {
    switch (status) {
      case "NodeResizeInfeasible":
        return allocated ?? request;
      case "NodeResizePending":
      case "NodeResizeInProgress": {
        const target = allocated ?? request;
        return (compareSizes(pvSize, target) ?? -1) >= 0 ? undefined : target;
      }
      case "ControllerResizeInProgress":
        if (findCondition(claim, condition.controllerResizeError)) return request;
        return allocated ?? request;
      default:
        return request;
    }
  }
  switch (status) {
    case "NodeResizeInProgress":
    case "NodeResizePending":
      return undefined;
    case "NodeResizeInfeasible":
      return controllerExpand && allocated ? allocated : request;
    case "ControllerResizeInProgress":
    case "ControllerResizeInfeasible":
      return allocated ?? request;
    default:
      if (status === undefined && allocated !== undefined) return allocated;
      // An old API server: a claim waiting for the node's part is left to the kubelet.
      if (findCondition(claim, condition.fileSystemResizePending)) return undefined;
      return request;
  }
}

/** ControllerExpandVolume for `target` (secrets added by the executor), or the reason it cannot be built. */
export function expandRequest(
  pv: PersistentVolume,
  target: string,
  singleNodeMultiWriter: boolean,
): ControllerExpandVolumeRequest | { error: string } {
  const csi = pv.spec.csi;
  if (!csi) return { error: `volume ${pv.metadata.name} is not a CSI volume` };
  let mode: ReturnType<typeof csiAccessModeForVolume>;
  try {
    mode = csiAccessModeForVolume(pv.spec.accessModes ?? [], singleNodeMultiWriter);
  } catch (err) {
    if (err instanceof AccessModeError) return { error: err.message };
    throw err;
  }
  const capability: VolumeCapability =
    pv.spec.volumeMode === "Block"
      ? { block: {}, accessMode: { mode } }
      : {
          mount: { fsType: csi.fsType ?? "", mountFlags: [...(pv.spec.mountOptions ?? [])] },
          accessMode: { mode },
        };
  return {
    volumeId: csi.volumeHandle,
    capacityRange: { requiredBytes: parseQuantityBytes(target) },
    volumeCapability: capability,
  };
}

export function planExpansion(s: ExpandState): ResizerPlan {
  const { claim, pv } = s;
  const skip = notOurs(claim, pv, s.driverName);
  if (skip !== undefined || !pv) return none(skip ?? "no volume");
  const carried = s.carried;
  if (carried?.kind === "resized") return finish(s, pv, carried);
  if (carried?.kind === "expand-failed") return fail(s, pv, carried.target, carried.failure);

  const request = claim.spec.resources?.requests?.storage;
  const capacity = claim.status?.capacity?.storage ?? "0";
  const wanted = compareSizes(request, capacity);
  if (wanted === undefined) return none("claim request or capacity is not a valid quantity");
  if (wanted <= 0) return none("no expansion requested");
  const target = expansionTarget(claim, pv, s.abilities.controllerExpand);
  if (target === undefined) return none("waiting for the node to finish expanding");
  if (compareSizes(target, "0") === undefined) return none("allocated size is not a valid quantity");

  const backoff = backoffOf(claim, "expand", s.now);
  if (backoff.until !== undefined && backoff.target === target)
    return none(`expansion to ${target} backing off until ${backoff.until}`);

  const intent = intentSteps(s, target);
  if (intent.length > 0)
    return { steps: intent, outcome: `expansion to ${target} marked in progress`, again: true };

  if (s.inUseBy !== undefined) {
    const message = `Unable to expand ${claimId(claim)} because CSI driver ${s.driverName} only supports offline expansion and volume is currently in-use`;
    const { annotations, delaySeconds } = failureAnnotations(
      claim,
      "expand",
      target,
      s.now,
      s.retryInterval,
      { inUse: true },
    );
    return {
      steps: [
        annotationsStep(claim, annotations),
        { op: "event", claim, type: "Warning", reason: reason.resizeFailed, message },
        { op: "retry-later", message, delaySeconds },
      ],
      outcome: message,
    };
  }

  const resizing: ResizerStep = {
    op: "event",
    claim,
    type: "Normal",
    reason: reason.resizing,
    message: `External resizer is resizing volume ${pv.metadata.name}`,
  };
  if (!s.abilities.controllerExpand) {
    // A node-only driver: no controller call, the node does it all.
    const resized: ResizerCarry = { kind: "resized", target, capacity: target, nodeExpansionRequired: true };
    return {
      steps: [resizing, ...volumeSteps(pv, resized)],
      outcome: `volume set to ${target}`,
      again: true,
    };
  }
  const request2 = expandRequest(pv, target, s.abilities.singleNodeMultiWriter);
  if ("error" in request2)
    return fail(s, pv, target, { code: undefined, message: request2.error, details: request2.error });
  return {
    steps: [
      resizing,
      { op: "expand-volume", target, request: request2, secretRef: pv.spec.csi?.controllerExpandSecretRef },
    ],
    outcome: `expanding volume ${pv.metadata.name} to ${target}`,
    again: true,
  };
}

/** Upstream markControllerResizeInProgress; nothing when the claim already says it. */
function intentSteps(s: ExpandState, target: string): ResizerStep[] {
  const { claim } = s;
  const steps: ResizerStep[] = [];
  if (claim.metadata.annotations?.[annNodeExpansionNotRequired] !== undefined)
    steps.push(annotationsStep(claim, { [annNodeExpansionNotRequired]: null }));
  const sameTarget = compareSizes(claim.status?.allocatedResources?.storage, target) === 0;
  if (sameTarget && findCondition(claim, condition.resizing)?.status === "True" && steps.length === 0)
    return [];
  const resizing = { type: condition.resizing, status: "True", lastTransitionTime: rfc3339(s.now) };
  // Retrying the same size keeps the status (an Infeasible stays until success) and the error conditions.
  const status: Record<string, unknown> = {
    conditions: mergeResizeConditions(conditionsOf(claim), [resizing], sameTarget),
    allocatedResources: { storage: target },
  };
  if (!sameTarget) status.allocatedResourceStatuses = { storage: "ControllerResizeInProgress" };
  steps.push(statusStep(claim, status));
  return steps;
}

/** The PV's capacity, never lowered; then the next round writes the claim. */
function volumeSteps(
  pv: PersistentVolume,
  resized: Extract<ResizerCarry, { kind: "resized" }>,
): ResizerStep[] {
  return [
    {
      op: "patch-volume",
      name: pv.metadata.name,
      spec: { capacity: { storage: resized.capacity } },
      resourceVersion: pv.metadata.resourceVersion,
      carry: resized,
    },
  ];
}

function finish(
  s: ExpandState,
  pv: PersistentVolume,
  resized: Extract<ResizerCarry, { kind: "resized" }>,
): ResizerPlan {
  const { claim } = s;
  if ((compareSizes(pv.spec.capacity?.storage, resized.capacity) ?? -1) < 0)
    return {
      steps: volumeSteps(pv, resized),
      outcome: `volume capacity set to ${resized.capacity}`,
      again: true,
    };
  // Another sync of the claim may have recorded this very expansion already, and the kubelet moved on
  // (NodeResizeInProgress, or done): writing NodeResizePending again would undo its progress.
  const status = storageStatus(claim);
  const sameTarget = compareSizes(claim.status?.allocatedResources?.storage, resized.target) === 0;
  const recorded =
    ((status === "NodeResizePending" || status === "NodeResizeInProgress") && sameTarget) ||
    (status === undefined && (compareSizes(claim.status?.capacity?.storage, resized.target) ?? -1) >= 0);
  if (recorded) return none(`expansion to ${resized.target} already recorded on the claim`);
  const annotations: Record<string, string | null> = { ...clearedBackoff(claim, "expand") };
  const present = claim.metadata.annotations?.[annNodeExpansionNotRequired];
  if (resized.nodeExpansionRequired) {
    if (present !== undefined) annotations[annNodeExpansionNotRequired] = null;
  } else if (present !== "true") annotations[annNodeExpansionNotRequired] = "true";
  const steps: ResizerStep[] =
    Object.keys(annotations).length > 0 ? [annotationsStep(claim, annotations)] : [];
  if (resized.nodeExpansionRequired) {
    const pending = {
      type: condition.fileSystemResizePending,
      status: "True",
      lastTransitionTime: rfc3339(s.now),
      message: fileSystemResizePendingMessage,
    };
    steps.push(
      statusStep(claim, {
        conditions: mergeResizeConditions(conditionsOf(claim), [pending], true),
        allocatedResourceStatuses: { storage: "NodeResizePending" },
      }),
      {
        op: "event",
        claim,
        type: "Normal",
        reason: reason.fileSystemResizeRequired,
        message: "Require file system resize of volume on node",
      },
    );
    return {
      steps,
      outcome: `volume expanded to ${resized.capacity}; waiting for the node to expand the file system`,
    };
  }
  steps.push(
    statusStep(claim, {
      capacity: { storage: resized.capacity },
      conditions: mergeResizeConditions(conditionsOf(claim), [], false),
      allocatedResourceStatuses: { storage: null },
    }),
    { op: "event", claim, type: "Normal", reason: reason.resizeSuccess, message: "Resize volume succeeded" },
  );
  return { steps, outcome: `expanded to ${resized.capacity}` };
}

/** Upstream callResizeOnPlugin's error path: conditions for a final error, backoff, Warning, retry later. */
function fail(s: ExpandState, pv: PersistentVolume, target: string, failure: CsiFailure): ResizerPlan {
  const { claim } = s;
  const message = `resize volume "${pv.metadata.name}" by resizer "${s.driverName}" failed: ${failure.message}`;
  const infeasible = isInfeasibleCode(failure.code);
  const steps: ResizerStep[] = [];
  if (isFinalCode(failure.code)) {
    const error = {
      type: condition.controllerResizeError,
      status: "True",
      lastTransitionTime: rfc3339(s.now),
      message: `failed to expand pvc with ${failure.message}`,
    };
    const status: Record<string, unknown> = {
      conditions: mergeResizeConditions(conditionsOf(claim), [error], true),
    };
    if (infeasible) status.allocatedResourceStatuses = { storage: "ControllerResizeInfeasible" };
    // Upstream's write here has no RV, but its strategic merge touches only this condition; our
    // merge patch replaces the list, so it must not land on a claim changed since the read.
    steps.push(statusStep(claim, status));
  }
  const { annotations, delaySeconds } = failureAnnotations(claim, "expand", target, s.now, s.retryInterval, {
    slow: infeasible,
    inUse: failure.code === grpc.failedPrecondition,
  });
  steps.push(
    annotationsStep(claim, annotations),
    { op: "event", claim, type: "Warning", reason: reason.resizeFailed, message },
    { op: "retry-later", message, delaySeconds },
  );
  return { steps, outcome: message, error: message };
}

export function statusStep(claim: PersistentVolumeClaim, status: Record<string, unknown>): ResizerStep {
  return {
    op: "patch-claim-status",
    namespace: claim.metadata.namespace ?? "",
    name: claim.metadata.name,
    status,
    resourceVersion: claim.metadata.resourceVersion,
  };
}

export function annotationsStep(
  claim: PersistentVolumeClaim,
  annotations: Record<string, string | null>,
): ResizerStep {
  return {
    op: "patch-claim-annotations",
    namespace: claim.metadata.namespace ?? "",
    name: claim.metadata.name,
    annotations,
    resourceVersion: claim.metadata.resourceVersion,
  };
}
