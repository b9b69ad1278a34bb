// The claim an event carries, when it has the shape claimNeedsNothing reads.
// The copy is untrusted input: anything unexpected means "do not judge from
// the copy", and the controller reads the claim as usual.
import type { PersistentVolumeClaim } from "../../kube/types.ts";

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function optional(value: unknown, is: (v: unknown) => boolean): boolean {
  return value === undefined || value === null || is(value);
}

const isString = (v: unknown): boolean => typeof v === "string";
const isStringArray = (v: unknown): boolean => Array.isArray(v) && v.every(isString);
const isStringMap = (v: unknown): boolean => isRecord(v) && Object.values(v).every(isString);

export function claimFromEvent(
  object: Record<string, unknown> | undefined,
): PersistentVolumeClaim | undefined {
  if (!object || (object.kind !== undefined && object.kind !== "PersistentVolumeClaim")) return undefined;
  const { metadata, spec } = object;
  if (!isRecord(metadata) || !isRecord(spec)) return undefined;
  if (typeof metadata.name !== "string") return undefined;
  if (!optional(metadata.finalizers, isStringArray)) return undefined;
  if (!optional(metadata.annotations, isStringMap)) return undefined;
  if (!optional(metadata.deletionTimestamp, isString)) return undefined;
  if (!optional(spec.volumeName, isString)) return undefined;
  return object as unknown as PersistentVolumeClaim;
}
