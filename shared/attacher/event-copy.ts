// The forwarded event's own copy of a VolumeAttachment, taken instead of a
// GET on a sync's first attempt (upstream decides on its informer's copy).
// The copy is untrusted and may be behind, so it is used only where being
// behind costs a conflict, never a wrong action:
// - a decision to do nothing (ignore, back off): any later change of the VA
//   brings an event of its own, delivered after this one;
// - an attach whose VA still lacks our finalizer: the finalizer PATCH carries
//   the copy's resourceVersion and comes before ControllerPublish, so a stale
//   copy fails there (409, or 404 when the VA is gone) and the retry reads live;
//   and the VA the PATCH returns (the stored truth) must have the copy's spec,
//   or nothing is published and the retry reads live (a copy that is not the
//   stored VA, whatever its resourceVersion, never picks the node).
// Everything else reads the VA live: an attach of a VA that holds our
// finalizer already would publish with no write first, a detach unpublishes,
// and the status-only writes re-read and apply without deciding again (to
// another VA of that name, if the copy is stale).
import { isRecord } from "../is-record.ts";
import type { VolumeAttachment } from "../kube/types.ts";
import type { AttachHandler } from "./handler.ts";

const nonEmpty = (v: unknown): v is string => typeof v === "string" && v !== "";
const absent = (v: unknown): boolean => v === undefined || v === null;

/**
 * The event's object when it is a well-formed VolumeAttachment named `name`
 * with a uid and a resourceVersion, sourced from a PV (an inline spec is
 * rare and deep: read live); undefined otherwise.
 */
export function attachmentFromEvent(name: string, object: unknown): VolumeAttachment | undefined {
  if (!isRecord(object)) return undefined;
  const { metadata, spec, status } = object;
  if (!isRecord(metadata) || metadata.name !== name) return undefined;
  if (!nonEmpty(metadata.uid) || !nonEmpty(metadata.resourceVersion)) return undefined;
  const { finalizers, annotations, deletionTimestamp } = metadata;
  if (!absent(finalizers) && !(Array.isArray(finalizers) && finalizers.every((f) => typeof f === "string")))
    return undefined;
  if (
    !absent(annotations) &&
    !(isRecord(annotations) && Object.values(annotations).every((a) => typeof a === "string"))
  )
    return undefined;
  if (!absent(deletionTimestamp) && typeof deletionTimestamp !== "string") return undefined;
  if (!isRecord(spec) || typeof spec.attacher !== "string" || typeof spec.nodeName !== "string")
    return undefined;
  const { source } = spec;
  if (!isRecord(source) || !nonEmpty(source.persistentVolumeName) || !absent(source.inlineVolumeSpec))
    return undefined;
  if (
    !absent(status) &&
    !(isRecord(status) && (absent(status.attached) || typeof status.attached === "boolean"))
  )
    return undefined;
  return object as unknown as VolumeAttachment;
}

/** Whether a decision taken on `va` from an event's copy is safe (see the top of this file). */
export function copyMayDecide(
  handler: AttachHandler,
  va: VolumeAttachment,
  ctx: { now: Date; force: boolean },
): boolean {
  const decision = handler.decideAttachment(va, { now: ctx.now, ...(ctx.force ? { force: true } : {}) });
  switch (decision.action) {
    case "ignore":
    case "backoff":
      return true;
    case "attach":
      return handler.finalizer !== undefined && !(va.metadata.finalizers ?? []).includes(handler.finalizer);
    case "mark-attached":
    case "mark-detached":
    case "detach":
      return false;
  }
}
