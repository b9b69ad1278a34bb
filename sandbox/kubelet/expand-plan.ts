// The node half of volume expansion, pure: whether the kubelet calls
// NodeExpandVolume for a volume (at mount time, or online for a volume
// already published for a running pod), what it writes to the claim's status
// around the call, and how a failed call is recorded. The rules are
// upstream's NodeExpander (RecoverVolumeExpansionFailure GA): with the
// resizer's status fields present, only a claim whose storage status is
// NodeResizePending or NodeResizeInProgress is expanded here.
import { compareQuantities } from "../../shared/kube/quantity.ts";
import type {
  ClaimResourceStatus,
  PersistentVolumeClaim,
  PersistentVolumeClaimCondition,
} from "../../shared/kube/types.ts";

/** The claim conditions resize owns; a finished expansion removes all of them. */
export const resizeConditionTypes = [
  "Resizing",
  "FileSystemResizePending",
  "ControllerResizeError",
  "NodeResizeError",
] as const;

export type ExpansionPlan =
  | { kind: "none"; why: string }
  /** A read-only volume is not grown: upstream warns once on the pod and the claim and counts it done. */
  | { kind: "read-only"; newSize: string }
  | {
      kind: "expand";
      oldSize: string;
      /** capacity_range.required_bytes: the PV's capacity. */
      newSize: string;
      /** Patch NodeResizeInProgress (with the claim's resourceVersion) before the call. */
      markInProgress: boolean;
      /** On success, record the new size on the claim (capacity, statuses, conditions). */
      recordOnClaim: boolean;
      /** The recovery rules apply (resizer fields present): failures are written to the claim. */
      recovery: boolean;
      /** A final failure makes the expansion NodeResizeInfeasible whatever the code. */
      infeasibleOnFailure: boolean;
    };

/** What the kubelet knows of one volume when it decides. */
export interface ExpansionView {
  /** The node plugin advertises the EXPAND_VOLUME node capability. */
  nodeExpands: boolean;
  /** The pod mounts the volume read-only (or the PV says so). */
  readonly: boolean;
  /** The PV's spec.capacity.storage. */
  pvCapacity: string | undefined;
  claim: PersistentVolumeClaim;
  /** An earlier NodeExpandVolume of this volume on this node failed with a final error. */
  hadFinalError: boolean;
}

export interface OnlineExpansionView extends ExpansionView {
  /** The size the kubelet recorded for the mounted volume (the claim's capacity when mounted, then each expansion's). */
  recordedSize: string | undefined;
  /** The driver answered FailedPrecondition (no online expansion): not again until the volume is mounted anew. */
  inUseError: boolean;
}

/** -1, 0, 1; undefined when either side is missing or not a quantity (untrusted objects). */
function compare(a: string | undefined, b: string | undefined): -1 | 0 | 1 | undefined {
  if (a === undefined || b === undefined) return undefined;
  try {
    return compareQuantities(a, b);
  } catch {
    return undefined;
  }
}

function storageStatus(claim: PersistentVolumeClaim): ClaimResourceStatus | undefined {
  return claim.status?.allocatedResourceStatuses?.storage;
}

/** Upstream's checkForRecoveryFromExpansion: a resizer that writes neither field is an old one. */
function usesRecovery(claim: PersistentVolumeClaim): boolean {
  return storageStatus(claim) !== undefined || claim.status?.allocatedResources !== undefined;
}

/** Upstream's NodeExpander.runPreCheck (recovery) or the legacy path, once the sizes call for a resize. */
function nodeExpanderPlan(view: ExpansionView, oldSize: string, newSize: string): ExpansionPlan {
  if (view.readonly) return { kind: "read-only", newSize };
  const claim = view.claim;
  const claimCapacity = claim.status?.capacity?.storage;
  if (!usesRecovery(claim)) {
    // Upstream's legacy path skips the claim write when it already shows the size.
    const recordOnClaim =
      compare(claimCapacity, newSize) === -1 || compare(claimCapacity, newSize) === undefined;
    return {
      kind: "expand",
      oldSize,
      newSize,
      markInProgress: false,
      recordOnClaim,
      recovery: false,
      infeasibleOnFailure: false,
    };
  }
  const status = storageStatus(claim);
  // The request moved away from the size being expanded to after a final failure: let the resizer take over.
  const infeasibleOnFailure =
    view.hadFinalError && compare(claim.spec.resources?.requests?.storage, newSize) !== 0;
  const reached = compare(claimCapacity, newSize);
  if (status === undefined && (reached === 1 || reached === 0)) {
    // Another node already recorded this size (a shared volume): expand here, write nothing.
    return {
      kind: "expand",
      oldSize,
      newSize,
      markInProgress: false,
      recordOnClaim: false,
      recovery: true,
      infeasibleOnFailure,
    };
  }
  if (status === "NodeResizePending" || status === "NodeResizeInProgress") {
    return {
      kind: "expand",
      oldSize,
      newSize,
      markInProgress: true,
      recordOnClaim: true,
      recovery: true,
      infeasibleOnFailure,
    };
  }
  return { kind: "none", why: `node expansion not allowed with resize status ${status ?? "<none>"}` };
}

/** At mount time (upstream's expandVolumeDuringMount): the claim's capacity is below the PV's. */
export function mountTimeExpansion(view: ExpansionView): ExpansionPlan {
  if (!view.nodeExpands) return { kind: "none", why: "the node plugin has no EXPAND_VOLUME" };
  const claimCapacity = view.claim.status?.capacity?.storage;
  if (compare(claimCapacity, view.pvCapacity) !== -1)
    return { kind: "none", why: "the claim's capacity is not below the volume's" };
  return nodeExpanderPlan(view, claimCapacity!, view.pvCapacity!);
}

/** For a volume published for a running pod (the reconciler's resize check): the PV grew past the recorded size. */
export function onlineExpansion(view: OnlineExpansionView): ExpansionPlan {
  if (!view.nodeExpands) return { kind: "none", why: "the node plugin has no EXPAND_VOLUME" };
  if (view.inUseError) return { kind: "none", why: "the driver cannot expand the volume while it is in use" };
  if (compare(view.recordedSize, view.pvCapacity) !== -1)
    return { kind: "none", why: "the volume is not larger than the size recorded at mount" };
  return nodeExpanderPlan(view, view.recordedSize!, view.pvCapacity!);
}

// ---- claim status patches (strategic merge on persistentvolumeclaims/status) ----

type Patch = Record<string, unknown>;

/** NodeResizeInProgress, conditional on the claim's resourceVersion. */
export function inProgressPatch(claim: PersistentVolumeClaim): Patch {
  return {
    metadata: { resourceVersion: claim.metadata.resourceVersion },
    status: { allocatedResourceStatuses: { storage: "NodeResizeInProgress" } },
  };
}

function removeResizeConditions(claim: PersistentVolumeClaim): Record<string, unknown>[] {
  const present = new Set((claim.status?.conditions ?? []).map((c) => c.type));
  return resizeConditionTypes.filter((t) => present.has(t)).map((type) => ({ type, $patch: "delete" }));
}

/** Done: capacity = new size, the storage status and every resize condition gone; conditional. */
export function finishedPatch(claim: PersistentVolumeClaim, newSize: string): Patch {
  const statuses = claim.status?.allocatedResourceStatuses ?? {};
  const others = Object.keys(statuses).filter((k) => k !== "storage");
  const status: Patch = { capacity: { storage: newSize } };
  if ("storage" in statuses)
    status.allocatedResourceStatuses = others.length === 0 ? null : { storage: null };
  const conditions = removeResizeConditions(claim);
  if (conditions.length > 0) status.conditions = conditions;
  return { metadata: { resourceVersion: claim.metadata.resourceVersion }, status };
}

/**
 * A final failure: NodeResizeError "failed to expand pvc with <err>" (an
 * existing True one is kept as it is, as upstream merges conditions), and
 * NodeResizeInfeasible when infeasible. Unconditional, as upstream writes it.
 */
export function failurePatch(
  claim: PersistentVolumeClaim,
  error: string,
  infeasible: boolean,
  now: string,
): Patch | undefined {
  const status: Patch = {};
  if (infeasible && storageStatus(claim) !== "NodeResizeInfeasible")
    status.allocatedResourceStatuses = { storage: "NodeResizeInfeasible" };
  const existing = (claim.status?.conditions ?? []).find((c) => c.type === "NodeResizeError");
  if (existing?.status !== "True") {
    const condition: PersistentVolumeClaimCondition = {
      type: "NodeResizeError",
      status: "True",
      lastTransitionTime: now,
      message: `failed to expand pvc with ${error}`,
    };
    status.conditions = [condition];
  }
  return Object.keys(status).length > 0 ? { status } : undefined;
}

// ---- failures ----

/** gRPC codes after which the driver may still be working (csi_client's isFinalError). */
const transientCodes = new Set([
  "Canceled",
  "DeadlineExceeded",
  "Unavailable",
  "ResourceExhausted",
  "Aborted",
]);
/** Codes upstream's CSI expander reads as infeasible. */
const infeasibleCodes = new Set(["InvalidArgument", "OutOfRange", "NotFound"]);

export interface ExpansionFailure {
  /** The error text upstream builds (Expander.NodeExpand ...). */
  error: string;
  /** The claim status patch to write, if any. */
  patch: Patch | undefined;
  /** A final error: remembered for the volume (hadFinalError). */
  final: boolean;
  /** FailedPrecondition: not retried while mounted, and a mount goes on without it. */
  inUse: boolean;
}

/**
 * How a failed NodeExpandVolume is recorded. `code` is the gRPC code name
 * (Go spelling), undefined for an error that is not a gRPC status.
 */
export function expansionFailure(
  plan: Extract<ExpansionPlan, { kind: "expand" }>,
  claim: PersistentVolumeClaim,
  code: string | undefined,
  message: string,
  now: string,
): ExpansionFailure {
  const inUse = code === "FailedPrecondition";
  const infeasible = code !== undefined && infeasibleCodes.has(code);
  const error = infeasible
    ? `Expander.NodeExpand failed to expand the volume ${message}`
    : `Expander.NodeExpand failed to expand the volume: ${message}`;
  const final = code !== undefined && !transientCodes.has(code);
  const patch =
    plan.recovery && final
      ? failurePatch(claim, error, infeasible || plan.infeasibleOnFailure, now)
      : undefined;
  return { error, patch, final, inUse };
}

// ---- Events ----

/** Normal FileSystemResizeSuccessful, on the pod and on the claim. */
export function expandedMessage(pvName: string, nodeName: string): string {
  return `MountVolume.NodeExpandVolume succeeded for volume "${pvName}" ${nodeName}`;
}

/** Warning FileSystemResizeFailed, on the pod and on the claim. */
export function readOnlyMessage(pvName: string): string {
  return `MountVolume.NodeExpandVolume failed for volume "${pvName}" requested read-only file system`;
}

/** Warning FailedMount for a failed expansion at mount time. */
export function mountExpansionFailedMessage(pvName: string, error: string): string {
  return `MountVolume.Setup failed while expanding volume for volume "${pvName}" : ${error}`;
}

/** Warning VolumeResizeFailed on the pod for a failed online expansion. */
export function onlineExpansionFailedMessage(pvName: string, error: string): string {
  return `NodeExpandVolume.NodeExpandVolume failed for volume "${pvName}" : ${error}`;
}
