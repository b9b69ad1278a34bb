// The claim or volume an event carries, when it has the shape that the
// controllers' event-copy checks read (the provisioner's claimNeedsNothing /
// volumeNeedsNothing, the binder's boundClaimNeedsNothing). The copy is
// untrusted input: anything unexpected means "do not judge from the copy",
// and the controller reads the object as usual.

import { isRecord } from "../is-record.ts";
import type { PersistentVolume, PersistentVolumeClaim } from "./types.ts";

type Fields = Record<string, unknown>;

function optional(value: unknown, is: (v: unknown) => boolean): boolean {
  return value === undefined || value === null || is(value);
}

const isString = (v: unknown): boolean => typeof v === "string";
const isStringArray = (v: unknown): boolean => Array.isArray(v) && v.every(isString);
const isStringMap = (v: unknown): boolean => isRecord(v) && Object.values(v).every(isString);

/** metadata and spec are objects, and the metadata fields both deciders read have their API types. */
function hasObjectShape(
  object: Fields | undefined,
  kind: string,
): object is Fields & { metadata: Fields; spec: Fields } {
  if (!object || (object.kind !== undefined && object.kind !== kind)) return false;
  const { metadata, spec } = object;
  if (!isRecord(metadata) || !isRecord(spec) || typeof metadata.name !== "string") return false;
  return (
    optional(metadata.finalizers, isStringArray) &&
    optional(metadata.annotations, isStringMap) &&
    optional(metadata.deletionTimestamp, isString)
  );
}

export function claimFromEvent(object: Fields | undefined): PersistentVolumeClaim | undefined {
  if (!hasObjectShape(object, "PersistentVolumeClaim")) return undefined;
  const { metadata, spec, status } = object;
  if (!optional(spec.volumeName, isString) || !optional(spec.accessModes, isStringArray)) return undefined;
  if (!optional(metadata.uid, isString) || !optional(metadata.resourceVersion, isString)) return undefined;
  const statusOk = (s: unknown): boolean =>
    isRecord(s) &&
    optional(s.phase, isString) &&
    optional(s.accessModes, isStringArray) &&
    optional(s.capacity, isStringMap);
  if (!optional(status, statusOk)) return undefined;
  return object as unknown as PersistentVolumeClaim;
}

export function volumeFromEvent(object: Fields | undefined): PersistentVolume | undefined {
  if (!hasObjectShape(object, "PersistentVolume")) return undefined;
  const { spec, status } = object;
  if (!optional(spec.persistentVolumeReclaimPolicy, isString)) return undefined;
  if (!optional(spec.csi, (csi) => isRecord(csi) && optional(csi.driver, isString))) return undefined;
  if (!optional(status, (s) => isRecord(s) && optional(s.phase, isString))) return undefined;
  return object as unknown as PersistentVolume;
}
