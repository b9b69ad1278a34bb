// The attach and detach protocols of one VolumeAttachment as pure rounds
// (upstream csi_handler.go syncAttach / syncDetach, in their order). Each
// round looks at the state the last step left and returns the next step:
// attach = PV finalizer → VA finalizer + node id → ControllerPublish →
// status attached (or take the publish back if the VA was released
// meanwhile) → backoff cleared; detach = ControllerUnpublish → VA finalizer
// off → status detached → the PV's own check. A failure is recorded as
// upstream does: backoff annotations, status error, then "retry later".
import type { Plan } from "../controller/plan.ts";
import type { CSIPersistentVolumeSource, VolumeAttachment } from "../kube/types.ts";
import type {
  AttacherStep,
  AttachmentRead,
  AttachmentState,
  Failure,
  Published,
  Stage,
} from "./attacher-steps.ts";
import { attachedVolumeName, resolveSource } from "./attachment-source.ts";
import { volumeError } from "./attachment-status.ts";
import { backoffKeysOn } from "./backoff.ts";
import { nodeIdFor } from "./node-id.ts";
import { addVolumeFinalizerPatch, prepareAttachmentPatch, releaseAttachmentPatch } from "./patches.ts";
import { buildPublishRequest, buildUnpublishRequest, volumeCapabilityFor } from "./publish-request.ts";

export type AttacherPlan = Plan<AttacherStep, never>;

/** Upstream's prefixes for failed writes before the publish. */
export const couldNotProtectVolume = "could not add PersistentVolume finalizer";
export const couldNotSaveAttachment = "could not save VolumeAttachment";

type Next = { read: AttachmentRead } | { fail: string } | { step: AttacherStep; outcome: string };

/**
 * The Secrets and node id a publish or unpublish sends, each read when the
 * state lacks it; `fallback` (detach) is the VA whose recorded node id
 * stands in for a CSINode that is gone.
 */
function secretsAndNode(
  s: AttachmentState,
  op: Failure["op"],
  csi: CSIPersistentVolumeSource,
  fallback: VolumeAttachment | undefined,
): { next: Next } | { secrets: Record<string, string> | undefined; nodeId: string } {
  const { nodeName } = s.va.spec;
  if (s.secrets === undefined) return { next: { read: { read: "secrets", op, csi } } };
  if (!s.secrets.ok) return { next: { fail: s.secrets.error } };
  if (s.csiNode === undefined) return { next: { read: { read: "csiNode", op, nodeName } } };
  const node = nodeIdFor(s.handler.driverName, nodeName, s.csiNode ?? undefined, fallback);
  if (!node.ok) return { next: { fail: node.error } };
  return { secrets: s.secrets.value, nodeId: node.nodeId };
}

/** Upstream csiAttach: everything is checked before the VA gets our finalizer, which blocks its deletion. */
function attachChain(s: AttachmentState, forced: boolean): Next {
  const { va, handler } = s;
  const op = "attach";
  if (s.pv === undefined) return { read: { read: "pv", op, name: attachedVolumeName(va) } };
  const source = resolveSource(va, s.pv ?? undefined, { forAttach: true });
  if (!source.ok) return { fail: source.error };
  const finalizer = handler.finalizer ?? "";
  // The PV must outlive every detach of it: our finalizer goes on before anything is published.
  const protect = source.pv ? addVolumeFinalizerPatch(source.pv, finalizer) : undefined;
  if (source.pv && protect) {
    const name = source.pv.metadata.name;
    const step: AttacherStep = { op: "add-volume-finalizer", name, patch: protect, resume: s };
    return { step, outcome: `adding the attacher finalizer to volume ${name}` };
  }
  const capability = volumeCapabilityFor(source.spec, source.csi, handler.publish);
  if (!capability.ok) return { fail: capability.error };
  const node = secretsAndNode(s, op, source.csi, undefined);
  if ("next" in node) return node.next;
  const patch = prepareAttachmentPatch(va, finalizer, node.nodeId);
  if (patch) {
    const step: AttacherStep = { op: "prepare-attachment", name: va.metadata.name, patch, resume: s };
    return { step, outcome: "adding the attacher finalizer and node id to the attachment" };
  }
  const { secrets } = node;
  const request = buildPublishRequest({
    csi: source.csi,
    capability: capability.value,
    nodeId: node.nodeId,
    secrets,
    publishReadonly: handler.publish.publishReadonly,
  });
  const published = { nodeId: node.nodeId, csi: source.csi, secrets };
  return {
    step: { op: "publish", request, published, forced, resume: s },
    outcome: `publishing to node ${node.nodeId}`,
  };
}

/** Upstream csiDetach: the node id recorded at attach stands in for a CSINode that is gone. */
function detachChain(s: AttachmentState, forced: boolean): Next {
  const { va } = s;
  const op = "detach";
  if (s.pv === undefined) return { read: { read: "pv", op, name: attachedVolumeName(va) } };
  const source = resolveSource(va, s.pv ?? undefined, { forAttach: false });
  if (!source.ok) return { fail: source.error };
  const node = secretsAndNode(s, op, source.csi, va);
  if ("next" in node) return node.next;
  const { nodeId, secrets } = node;
  const request = buildUnpublishRequest({ csi: source.csi, nodeId, secrets });
  const resume: AttachmentState = { ...s, stage: { at: "unpublished", nodeId, forced } };
  return { step: { op: "unpublish", request, nodeId, resume }, outcome: `unpublishing from node ${nodeId}` };
}

type StartDecision =
  | { plan: AttacherPlan }
  | { chain: (s: AttachmentState, forced: boolean) => Next; forced: boolean; op: Failure["op"] };

function decideStart(s: AttachmentState): StartDecision {
  const { va } = s;
  const decision = s.handler.decideAttachment(va, { now: s.now, ...(s.force ? { force: true } : {}) });
  const name = va.metadata.name;
  switch (decision.action) {
    case "ignore":
      return { plan: { steps: [], outcome: decision.reason } };
    case "backoff":
      return { plan: { steps: [], outcome: `backing off until ${decision.until}` } };
    case "mark-attached":
      return {
        plan: {
          steps: [{ op: "mark-attached", name }],
          outcome: "marked attached (the driver does not publish volumes)",
        },
      };
    case "mark-detached":
      return {
        plan: { steps: [{ op: "write-detached", name }], outcome: `marked detached: ${decision.reason}` },
      };
    case "attach":
      return { chain: attachChain, forced: decision.forced, op: "attach" };
    case "detach":
      return { chain: detachChain, forced: decision.forced, op: "detach" };
  }
}

/** The read the next decision needs first, if any; the loader makes it and asks again. */
export function nextAttachmentRead(s: AttachmentState): AttachmentRead | undefined {
  if (s.stage.at === "taken-back" && !s.stage.successorChecked)
    return { read: "successor", name: s.va.metadata.name };
  if (s.stage.at !== "start") return undefined;
  const start = decideStart(s);
  if ("plan" in start) return undefined;
  const next = start.chain(s, start.forced);
  return "read" in next ? next.read : undefined;
}

/** A released attachment's successor: a new VA of this name is attached again, forced (its publish was taken back). */
export function afterTakeBack(
  s: AttachmentState,
  successor: VolumeAttachment | undefined,
  now: Date,
): AttachmentState {
  if (s.stage.at !== "taken-back") return s;
  if (successor && successor.metadata.uid !== s.va.metadata.uid) {
    const prefix = `${s.prefix}${takenBackOutcome(s.stage.published)}; the new attachment: `;
    return {
      kind: "attachment",
      handler: s.handler,
      now,
      force: true,
      va: successor,
      stage: { at: "start" },
      prefix,
    };
  }
  return { ...s, stage: { ...s.stage, successorChecked: true } };
}

function takenBackOutcome(published: Published): string {
  return `published to node ${published.nodeId} after the attachment was released; unpublished again`;
}

/** Observed: another VA of this name (deleted and created again), or ours without our finalizer: released. */
export function releasedMeanwhile(
  current: VolumeAttachment,
  uid: string | undefined,
  finalizer: string | undefined,
): boolean {
  return (
    current.metadata.uid !== uid ||
    (finalizer !== undefined && !(current.metadata.finalizers ?? []).includes(finalizer))
  );
}

/** The state after a step failed (or a read for it did): the failure is recorded next. */
export function failedWith(s: AttachmentState, failure: Failure): AttachmentState {
  return { ...s, stage: { at: "failed", failure } };
}

/** Progress of recording a failure. */
export function withFailureProgress(
  s: AttachmentState,
  progress: { delaySeconds?: number; saveError?: string },
): AttachmentState {
  if (s.stage.at !== "failed") return s;
  const stage: Stage = { ...s.stage, ...progress };
  return { ...s, stage };
}

export function withPublished(s: AttachmentState, published: Published, forced: boolean): AttachmentState {
  return { ...s, stage: { at: "published", published, forced } };
}

export function withStatusWritten(
  s: AttachmentState,
  current: VolumeAttachment | undefined,
): AttachmentState {
  if (s.stage.at !== "published") return s;
  const { published, forced } = s.stage;
  return { ...s, stage: { at: "status-written", published, forced, current } };
}

export function withVolumeSynced(
  s: AttachmentState,
  detached: string,
  volume: string,
  volumeOutcome: string,
): AttachmentState {
  return { ...s, stage: { at: "volume-synced", detached, volume, volumeOutcome } };
}

/** Upstream saveAttachError / saveDetachError: backoff annotations first, so the status write's event finds it backing off. */
function planFailure(s: AttachmentState): AttacherPlan {
  if (s.stage.at !== "failed") throw new TypeError("planFailure needs a failed stage");
  const { failure, backoffSaved, errorSaved, saveError, delaySeconds } = s.stage;
  const name = s.va.metadata.name;
  const operation = failure.op;
  const outcome = `failed to ${operation}: ${failure.message}`;
  if (saveError !== undefined || errorSaved) {
    const unsaved = saveError !== undefined ? ` (and saving the error failed: ${saveError})` : "";
    const message = `${outcome}${unsaved}`;
    return { steps: [{ op: "retry-later", message, delaySeconds, cause: failure.cause }], outcome: message };
  }
  const { at } = failure;
  if (!backoffSaved) {
    const resume: AttachmentState = { ...s, stage: { ...s.stage, backoffSaved: true } };
    return { steps: [{ op: "save-backoff", name, operation, now: at, resume }], outcome, again: true };
  }
  const error = volumeError(failure.message, at, operation === "attach" ? failure.grpcCode : undefined);
  const resume: AttachmentState = { ...s, stage: { ...s.stage, errorSaved: true } };
  return { steps: [{ op: "save-error", name, operation, error, resume }], outcome, again: true };
}

function planChain(s: AttachmentState, next: Next, op: Failure["op"]): AttacherPlan {
  if ("step" in next) return { steps: [next.step], outcome: next.outcome, again: true };
  if ("fail" in next) return planFailure(failedWith(s, { op, message: next.fail, at: s.now }));
  throw new TypeError(`the ${next.read.read} read was not made before deciding`);
}

/** Pure: the next round of one attachment's sync. */
export function planAttachment(s: AttachmentState): AttacherPlan {
  const { stage, va, handler } = s;
  const name = va.metadata.name;
  switch (stage.at) {
    case "start": {
      const start = decideStart(s);
      if ("plan" in start) return start.plan;
      return planChain(s, start.chain(s, start.forced), start.op);
    }
    case "failed":
      return planFailure(s);
    case "published": {
      const { publishContext, nodeId } = stage.published;
      const uid = va.metadata.uid;
      const step: AttacherStep = {
        op: "write-attached",
        name,
        uid,
        finalizer: handler.finalizer,
        publishContext,
        resume: s,
      };
      return { steps: [step], outcome: `recording the attachment to node ${nodeId}`, again: true };
    }
    case "status-written": {
      const { published, forced, current } = stage;
      if (!current || releasedMeanwhile(current, va.metadata.uid, handler.finalizer)) {
        // Nothing else will ever unpublish this publish. A release that had not happened yet
        // conflicted with the status write, so that sync detaches again.
        const request = buildUnpublishRequest(published);
        const failure = `volume ${published.csi.volumeHandle} was published to node ${published.nodeId} after VolumeAttachment ${name} was released, and unpublishing it failed`;
        const resume: AttachmentState = { ...s, stage: { at: "taken-back", published } };
        const outcome = `taking back the publish to node ${published.nodeId}`;
        return { steps: [{ op: "take-back", request, failure, resume }], outcome, again: true };
      }
      const why = forced ? " (the driver did not list it as published)" : "";
      const outcome = `attached to node ${published.nodeId}${why}`;
      // The failures that led here are history; the next failure starts the backoff over.
      if (backoffKeysOn(current).length > 0) return { steps: [{ op: "clear-backoff", name }], outcome };
      return { steps: [], outcome };
    }
    case "taken-back":
      return { steps: [], outcome: takenBackOutcome(stage.published) };
    case "unpublished": {
      const detached = `detached from node ${stage.nodeId}${stage.forced ? " (the driver still listed it as published)" : ""}`;
      // Upstream markAsDetached: the finalizer goes first. A deleted VA without it counts as
      // detached; the other order (status, then finalizer) would unpublish twice after a crash.
      const patch = releaseAttachmentPatch(va, handler.finalizer ?? "");
      const steps: AttacherStep[] = [
        ...(patch ? [{ op: "release-attachment" as const, name, patch }] : []),
        { op: "write-detached", name },
      ];
      // The PV waited for this detach to be deleted: let it go now rather than on the next event.
      const pv = s.pv;
      if (!pv?.metadata.deletionTimestamp) return { steps, outcome: detached };
      steps.push({ op: "sync-volume", name: pv.metadata.name, detached, resume: s });
      return { steps, outcome: detached, again: true };
    }
    case "volume-synced":
      return { steps: [], outcome: `${stage.detached}; volume ${stage.volume}: ${stage.volumeOutcome}` };
  }
}
