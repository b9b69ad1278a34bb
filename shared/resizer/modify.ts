// The modification of a claim's VolumeAttributesClass (external-resizer's
// modify controller): pure rounds over the claim, its PV, the classes it
// names and the CSI answer the last round carried. The intent (status
// InProgress + target + ModifyingVolume), ControllerModifyVolume, the PV's
// class, then the claim's status cleared. Upstream's in-memory marks become
// what the claim shows: "uncertain" is InProgress without a final
// ModifyVolumeError, the slow set is the backoff annotations.
import { grpcCodeByName } from "../csi/grpc-codes.ts";
import { rfc3339 } from "../kube/time.ts";
import type { ModifyVolumeStatus, PersistentVolume, PersistentVolumeClaim } from "../kube/types.ts";
import { annControllerModifySecretName, annControllerModifySecretNamespace } from "../kube/well-known.ts";
import { notOurs } from "./bound-volume.ts";
import {
  backoffOf,
  clearedBackoff,
  conditionsOf,
  failureAnnotations,
  findCondition,
  isFinalCode,
  mergeConditions,
} from "./claim-status.ts";
import { codeName, condition, extraModifyMetadataKeys, code as grpc, reason } from "./constants.ts";
import { annotationsStep, type ResizerPlan, statusStep } from "./expand.ts";
import type { CsiFailure, ModifyState, ResizerStep } from "./steps.ts";

const none = (outcome: string): ResizerPlan => ({ steps: [], outcome });

/** The last final error the claim records: a new spec then becomes the target. */
function hadFinalError(claim: PersistentVolumeClaim): boolean {
  const error = findCondition(claim, condition.modifyVolumeError);
  if (!error) return false;
  const code = grpcCodeByName(error.reason);
  return isFinalCode(code);
}

export function planModification(s: ModifyState): ResizerPlan {
  const { claim, pv } = s;
  const skip = notOurs(claim, pv, s.driverName);
  if (skip !== undefined || !pv) return none(skip ?? "no volume");
  const carried = s.carried;
  if (carried?.kind === "modified") return finish(s, pv, carried.target);
  if (carried?.kind === "modify-failed") return fail(s, carried.target, carried.failure);
  if (carried?.kind === "modify-started") return call(s, pv, carried.target);

  const spec = claim.spec.volumeAttributesClassName ?? "";
  const current = claim.status?.currentVolumeAttributesClassName ?? "";
  const status: ModifyVolumeStatus | undefined = claim.status?.modifyVolumeStatus ?? undefined;

  const backoff = backoffOf(claim, "modify", s.now);
  if (
    status &&
    spec !== "" &&
    status.targetVolumeAttributesClassName === spec &&
    backoff.until &&
    backoff.target === spec
  )
    return none(`modification to ${spec} backing off until ${backoff.until}`);
  if (!status && spec === current) return none(`volume attributes class is ${JSON.stringify(current)}`);
  const inProgress = status?.status === "InProgress";
  if (spec === "" && !inProgress) {
    if (!findCondition(claim, condition.modifyingVolume)) return none("no volume attributes class requested");
    const conditions = conditionsOf(claim).filter((c) => c.type !== condition.modifyingVolume);
    return {
      steps: [
        // Conditional: a merge patch replaces the whole list (upstream's strategic merge does not).
        statusStep(claim, { conditions }),
        { op: "event", claim, type: "Normal", reason: reason.modifyCanceled, message: "Cancelled modify." },
      ],
      outcome: "modification cancelled",
    };
  }
  const uncertain = inProgress && !hadFinalError(claim);
  if (uncertain || spec === "") return call(s, pv, status?.targetVolumeAttributesClassName ?? "");

  if (!s.classes.has(spec)) {
    if (status?.status === "Pending") return none(`waiting for VolumeAttributesClass ${spec}`);
    return {
      steps: [statusStep(claim, { modifyVolumeStatus: { status: "Pending" } }), vacMissingEvent(s, spec)],
      outcome: `VolumeAttributesClass ${spec} does not exist`,
    };
  }
  const modifying = {
    type: condition.modifyingVolume,
    status: "True",
    lastProbeTime: rfc3339(s.now),
    message: `Modifying volume to ${JSON.stringify(spec)} is in progress.`,
  };
  const intent = statusStep(claim, {
    modifyVolumeStatus: { targetVolumeAttributesClassName: spec, status: "InProgress" },
    conditions: mergeConditions(conditionsOf(claim), [modifying]),
  });
  return {
    steps: [
      { ...intent, carry: { kind: "modify-started", target: spec } } as ResizerStep,
      {
        op: "event",
        claim,
        type: "Normal",
        reason: reason.modify,
        message: `external resizer is modifying volume ${claim.metadata.name} with vac ${spec}`,
      },
    ],
    outcome: `modification to ${spec} marked in progress`,
    again: true,
  };
}

function vacMissingEvent(s: ModifyState, name: string): ResizerStep {
  return {
    op: "event",
    claim: s.claim,
    type: "Warning",
    reason: reason.modifyFailed,
    message: `VAC ${JSON.stringify(name)} does not exist.`,
  };
}

/** ControllerModifyVolume with the class's parameters (secrets: the PV's modify annotations, else the expand ref). */
function call(s: ModifyState, pv: PersistentVolume, target: string): ResizerPlan {
  const vac = s.classes.get(target);
  if (!vac) {
    const message = `VolumeAttributesClass ${JSON.stringify(target)} does not exist`;
    return {
      steps: [vacMissingEvent(s, target), { op: "retry-later", message, delaySeconds: 1 }],
      outcome: message,
    };
  }
  const mutableParameters: Record<string, string> = { ...(vac.parameters ?? {}) };
  if (s.extraModifyMetadata) {
    mutableParameters[extraModifyMetadataKeys.pvcName] = s.claim.metadata.name;
    mutableParameters[extraModifyMetadataKeys.pvcNamespace] = s.claim.metadata.namespace ?? "";
    mutableParameters[extraModifyMetadataKeys.pvName] = pv.metadata.name;
  }
  const a = pv.metadata.annotations ?? {};
  const name = a[annControllerModifySecretName];
  const namespace = a[annControllerModifySecretNamespace];
  const secretRef = name && namespace ? { name, namespace } : pv.spec.csi?.controllerExpandSecretRef;
  return {
    steps: [
      {
        op: "modify-volume",
        target,
        volumeId: pv.spec.csi?.volumeHandle ?? "",
        mutableParameters,
        secretRef,
      },
    ],
    outcome: `modifying volume ${pv.metadata.name} to ${target}`,
    again: true,
  };
}

/** Upstream markControllerModifyVolumeCompleted: the PV's class first, then the claim. */
function finish(s: ModifyState, pv: PersistentVolume, target: string): ResizerPlan {
  const { claim } = s;
  if (pv.spec.volumeAttributesClassName !== target)
    return {
      steps: [
        {
          op: "patch-volume",
          name: pv.metadata.name,
          spec: { volumeAttributesClassName: target },
          resourceVersion: pv.metadata.resourceVersion,
          carry: { kind: "modified", target },
        },
      ],
      outcome: `volume ${pv.metadata.name} now has class ${target}`,
      again: true,
    };
  const cleared = clearedBackoff(claim, "modify");
  const conditions = conditionsOf(claim).filter(
    (c) => c.type !== condition.modifyVolumeError && c.type !== condition.modifyingVolume,
  );
  return {
    steps: [
      ...(Object.keys(cleared).length > 0 ? [annotationsStep(claim, cleared)] : []),
      // Conditional, as the cancel above: a stale list would bring back conditions others removed.
      statusStep(claim, { modifyVolumeStatus: null, currentVolumeAttributesClassName: target, conditions }),
      {
        op: "event",
        claim,
        type: "Normal",
        reason: reason.modifySuccess,
        message: `external resizer modified volume ${claim.metadata.name} with vac ${target} successfully`,
      },
    ],
    outcome: `modified to ${target}`,
  };
}

/** Upstream's error path: ModifyingVolume + ModifyVolumeError, Infeasible for InvalidArgument, Warning, retry later. */
function fail(s: ModifyState, target: string, failure: CsiFailure): ResizerPlan {
  const { claim } = s;
  const final = isFinalCode(failure.code);
  const { annotations, delaySeconds } = failureAnnotations(claim, "modify", target, s.now, s.retryInterval, {
    slow: failure.code === grpc.invalidArgument,
  });
  const steps: ResizerStep[] = [];
  let message = failure.message;
  // Not a gRPC status: upstream writes nothing and retries.
  if (failure.code !== undefined) {
    const now = rfc3339(s.now);
    const modifying = {
      type: condition.modifyingVolume,
      status: "True",
      lastProbeTime: now,
      message: final
        ? `Modifying volume to ${JSON.stringify(target)} failed. Waiting for retry.`
        : `Modifying volume to ${JSON.stringify(target)} is still in progress.`,
    };
    const error = {
      type: condition.modifyVolumeError,
      status: "True",
      reason: codeName(failure.code),
      message: failure.details,
      lastProbeTime: now,
    };
    const infeasible = final && failure.code === grpc.invalidArgument;
    steps.push(
      statusStep(claim, {
        modifyVolumeStatus: {
          targetVolumeAttributesClassName: target,
          status: infeasible ? "Infeasible" : "InProgress",
        },
        conditions: mergeConditions(conditionsOf(claim), [modifying, error]),
      }),
    );
    if (!final) message += `. Still modifying to VAC ${target}`;
  }
  steps.push(
    annotationsStep(claim, annotations),
    { op: "event", claim, type: "Warning", reason: reason.modifyFailed, message },
    { op: "retry-later", message, delaySeconds },
  );
  return { steps, outcome: message, error: message };
}
