// Shape checks for the objects inside a review. kube-apiserver only ever
// sends well-typed objects, but the body is untrusted: every field a rule
// reads is checked here first, so the rules can trust their types and a
// malformed object is a clear 400 instead of a crash (or a silently wrong
// decision). Fields the rules do not read are left alone, unknown ones too.
//
// null is "unset", as Go's decoder reads it: kube-apiserver serializes some
// unset fields as null (metadata.creationTimestamp of every object it has
// not stored yet). The checked object is a copy without null members, so
// the rules see unset fields as absent; a patch computed against that copy
// applies to the original too (it only adds where the copy has nothing,
// which replaces a null).

import { isRecord } from "../is-record.ts";
import type { PersistentVolume, PersistentVolumeClaim, VolumeAttachment } from "../kube/types.ts";
import { AdmissionReviewError, describeJsonValue } from "./review.ts";

type Json = Record<string, unknown>;

function fail(path: string, expected: string, value: unknown): never {
  throw new AdmissionReviewError(`${path} must be ${expected}, got ${describeJsonValue(value)}`);
}

function record(value: unknown, path: string): Json {
  if (!isRecord(value)) fail(path, "an object", value);
  return value;
}

/** An optional object member; `check` reads it, at its own path, when it is there. */
function optionalRecord(
  from: Json,
  key: string,
  path: string,
  check?: (value: Json, path: string) => void,
): void {
  const value = from[key];
  if (value === undefined) return;
  if (!isRecord(value)) fail(`${path}.${key}`, "an object or null", value);
  check?.(value, `${path}.${key}`);
}

function optionalString(from: Json, key: string, path: string): void {
  const value = from[key];
  if (value === undefined) return;
  if (typeof value !== "string") fail(`${path}.${key}`, "a string or null", value);
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/i;

/** A metav1.Time: RFC 3339, as Go's time.Parse(time.RFC3339) reads it. */
function optionalTimestamp(from: Json, key: string, path: string): void {
  const value = from[key];
  if (value === undefined) return;
  if (typeof value !== "string" || !RFC3339.test(value) || Number.isNaN(Date.parse(value)))
    fail(`${path}.${key}`, "an RFC 3339 timestamp (or null)", value);
}

/** The value without null object members, at any depth; subtrees without any are shared, not copied. */
export function withoutNullMembers(value: unknown): unknown {
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    value.forEach((item, i) => {
      const next = withoutNullMembers(item);
      if (next !== item) {
        copy ??= [...value];
        copy[i] = next;
      }
    });
    return copy ?? value;
  }
  if (!isRecord(value)) return value;
  let copy: Json | undefined;
  for (const [key, item] of Object.entries(value)) {
    const next = item === null ? undefined : withoutNullMembers(item);
    if (next === item) continue;
    copy ??= { ...value };
    if (next === undefined) delete copy[key];
    else copy[key] = next;
  }
  return copy ?? value;
}

function optionalStringMap(from: Json, key: string, path: string): void {
  const value = from[key];
  if (value === undefined) return;
  const map = record(value, `${path}.${key}`);
  for (const [k, v] of Object.entries(map)) {
    if (typeof v !== "string") fail(`${path}.${key}[${k}]`, "a string", v);
  }
}

function optionalStringList(from: Json, key: string, path: string): void {
  const value = from[key];
  if (value === undefined) return;
  if (!Array.isArray(value)) fail(`${path}.${key}`, "an array of strings", value);
  value.forEach((v: unknown, i) => {
    if (typeof v !== "string") fail(`${path}.${key}[${i}]`, "a string", v);
  });
}

/** The object is of the kind this endpoint serves, when it says what it is. */
function checkTypeMeta(obj: Json, path: string, apiVersions: readonly string[], kind: string): void {
  if (obj.kind !== undefined && obj.kind !== kind) {
    const got = typeof obj.kind === "string" ? `a ${obj.kind}` : describeJsonValue(obj.kind);
    throw new AdmissionReviewError(`${path} is ${got}; this endpoint takes ${kind} objects`);
  }
  if (obj.apiVersion !== undefined && !apiVersions.includes(obj.apiVersion as string)) {
    throw new AdmissionReviewError(
      `${path}.apiVersion is ${JSON.stringify(obj.apiVersion)}; expected ${apiVersions.join(" or ")}`,
    );
  }
}

function checkMetadata(obj: Json, path: string): void {
  const meta = record(obj.metadata, `${path}.metadata`);
  const at = `${path}.metadata`;
  for (const key of ["name", "generateName", "namespace", "uid"]) optionalString(meta, key, at);
  optionalTimestamp(meta, "creationTimestamp", at);
  optionalTimestamp(meta, "deletionTimestamp", at);
  optionalStringMap(meta, "annotations", at);
  optionalStringMap(meta, "labels", at);
  optionalStringList(meta, "finalizers", at);
}

/** What every object a rule reads must be: its kind, sound metadata, and a spec object (at: the spec's path). */
function objectWithSpec(
  received: unknown,
  path: string,
  apiVersions: readonly string[],
  kind: string,
): { obj: Json; spec: Json; at: string } {
  const obj = record(withoutNullMembers(received), path);
  checkTypeMeta(obj, path, apiVersions, kind);
  checkMetadata(obj, path);
  const at = `${path}.spec`;
  return { obj, spec: record(obj.spec, at), at };
}

/** A PersistentVolumeClaim as far as the claim rules read it. */
export function claimOf(received: unknown, path: string): PersistentVolumeClaim {
  const { obj, spec, at } = objectWithSpec(received, path, ["v1"], "PersistentVolumeClaim");
  optionalString(spec, "storageClassName", at);
  optionalString(spec, "volumeName", at);
  optionalString(spec, "volumeMode", at);
  optionalString(spec, "volumeAttributesClassName", at);
  optionalStringList(spec, "accessModes", at);
  optionalRecord(spec, "resources", at, (resources, at) => {
    optionalStringMap(resources, "requests", at);
    optionalStringMap(resources, "limits", at);
  });
  optionalRecord(obj, "status", path, (status, at) => {
    optionalString(status, "phase", at);
    optionalStringMap(status, "capacity", at);
  });
  return obj as unknown as PersistentVolumeClaim;
}

/** A PersistentVolume as far as the volume rules read it. */
export function volumeOf(received: unknown, path: string): PersistentVolume {
  const { obj, spec, at } = objectWithSpec(received, path, ["v1"], "PersistentVolume");
  optionalString(spec, "persistentVolumeReclaimPolicy", at);
  return obj as unknown as PersistentVolume;
}

/** A VolumeAttachment as far as the attachment rules read it. */
export function attachmentOf(received: unknown, path: string): VolumeAttachment {
  const { obj, spec, at } = objectWithSpec(
    received,
    path,
    ["storage.k8s.io/v1", "storage.k8s.io/v1beta1"],
    "VolumeAttachment",
  );
  optionalString(spec, "attacher", at);
  optionalString(spec, "nodeName", at);
  optionalRecord(spec, "source", at, (source, at) => {
    optionalString(source, "persistentVolumeName", at);
    optionalRecord(source, "inlineVolumeSpec", at);
  });
  return obj as unknown as VolumeAttachment;
}
