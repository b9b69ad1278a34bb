// The Pod an event carries, checked before its volumes route anything: the
// claims it names become API paths and decide what is re-checked, so a copy
// of the wrong shape is refused (400) rather than guessed at.
import { EnvelopeError } from "../events/errors.ts";
import { checkName } from "../events/kube-object.ts";
import { isRecord } from "../is-record.ts";
import type { Pod } from "../kube/types.ts";

// Volume names are DNS labels.
const VOLUME_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

function optionalOf(value: unknown, type: "string" | "number", field: string): void {
  if (value !== undefined && value !== null && typeof value !== type)
    throw new EnvelopeError(`the event's Pod ${field} must be a ${type}`);
}

function checkVolume(volume: unknown, i: number): void {
  const where = `spec.volumes[${i}]`;
  if (!isRecord(volume)) throw new EnvelopeError(`the event's Pod ${where} must be an object`);
  if (typeof volume.name !== "string" || volume.name.length > 63 || !VOLUME_NAME.test(volume.name))
    throw new EnvelopeError(`the event's Pod ${where}.name must be a DNS label`);
  const claim = volume.persistentVolumeClaim;
  if (claim !== undefined && claim !== null) {
    if (!isRecord(claim))
      throw new EnvelopeError(`the event's Pod ${where}.persistentVolumeClaim must be an object`);
    checkName(claim.claimName, `the event's Pod ${where}.persistentVolumeClaim.claimName`);
  }
  const ephemeral = volume.ephemeral;
  if (ephemeral !== undefined && ephemeral !== null && !isRecord(ephemeral))
    throw new EnvelopeError(`the event's Pod ${where}.ephemeral must be an object`);
}

/** The event's object as a Pod; throws EnvelopeError (400) when a field the routing reads has another type. */
export function podFromEvent(object: Record<string, unknown>): Pod {
  const { metadata, spec, status } = object;
  if (!isRecord(metadata)) throw new EnvelopeError("the event's Pod metadata must be an object");
  optionalOf(metadata.uid, "string", "metadata.uid");
  optionalOf(metadata.deletionTimestamp, "string", "metadata.deletionTimestamp");
  optionalOf(metadata.deletionGracePeriodSeconds, "number", "metadata.deletionGracePeriodSeconds");
  if (!isRecord(spec)) throw new EnvelopeError("the event's Pod spec must be an object");
  optionalOf(spec.nodeName, "string", "spec.nodeName");
  if (spec.volumes !== undefined && spec.volumes !== null) {
    if (!Array.isArray(spec.volumes)) throw new EnvelopeError("the event's Pod spec.volumes must be a list");
    spec.volumes.forEach(checkVolume);
  }
  if (status !== undefined && status !== null) {
    if (!isRecord(status)) throw new EnvelopeError("the event's Pod status must be an object");
    optionalOf(status.phase, "string", "status.phase");
  }
  return object as unknown as Pod;
}
