// Shape checks for the objects inside a review. kube-apiserver only ever
// sends well-typed objects, but the body is untrusted: every field a rule
// reads is checked here first, so the rules can trust their types and a
// malformed object is a clear 400 instead of a crash (or a silently wrong
// decision). Fields the rules do not read are left alone, unknown ones too.

import type { PersistentVolume, PersistentVolumeClaim, VolumeAttachment } from "../kube/types.ts";
import { AdmissionReviewError, describeJsonValue } from "./review.ts";

type Json = Record<string, unknown>;

function isRecord(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function fail(path: string, expected: string, value: unknown): never {
  throw new AdmissionReviewError(`${path} must be ${expected}, got ${describeJsonValue(value)}`);
}

function record(value: unknown, path: string): Json {
  if (!isRecord(value)) fail(path, "an object", value);
  return value;
}

function optionalRecord(from: Json, key: string, path: string, nullable = false): void {
  const value = from[key];
  if (value === undefined || (nullable && value === null)) return;
  if (!isRecord(value)) fail(`${path}.${key}`, nullable ? "an object or null" : "an object", value);
}

function optionalString(from: Json, key: string, path: string, nullable = false): void {
  const value = from[key];
  if (value === undefined || (nullable && value === null)) return;
  if (typeof value !== "string") fail(`${path}.${key}`, nullable ? "a string or null" : "a string", value);
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
  for (const key of ["name", "generateName", "namespace", "uid", "creationTimestamp", "deletionTimestamp"])
    optionalString(meta, key, at);
  optionalStringMap(meta, "annotations", at);
  optionalStringMap(meta, "labels", at);
  optionalStringList(meta, "finalizers", at);
}

/** A PersistentVolumeClaim as far as the claim rules read it. */
export function claimOf(value: unknown, path: string): PersistentVolumeClaim {
  const obj = record(value, path);
  checkTypeMeta(obj, path, ["v1"], "PersistentVolumeClaim");
  checkMetadata(obj, path);
  const spec = record(obj.spec, `${path}.spec`);
  const at = `${path}.spec`;
  optionalString(spec, "storageClassName", at, true);
  optionalString(spec, "volumeName", at);
  optionalString(spec, "volumeMode", at, true);
  optionalString(spec, "volumeAttributesClassName", at, true);
  optionalStringList(spec, "accessModes", at);
  optionalRecord(spec, "resources", at);
  if (isRecord(spec.resources)) {
    optionalStringMap(spec.resources, "requests", `${at}.resources`);
    optionalStringMap(spec.resources, "limits", `${at}.resources`);
  }
  optionalRecord(obj, "status", path, true);
  if (isRecord(obj.status)) {
    optionalString(obj.status, "phase", `${path}.status`);
    optionalStringMap(obj.status, "capacity", `${path}.status`);
  }
  return obj as unknown as PersistentVolumeClaim;
}

/** A PersistentVolume as far as the volume rules read it. */
export function volumeOf(value: unknown, path: string): PersistentVolume {
  const obj = record(value, path);
  checkTypeMeta(obj, path, ["v1"], "PersistentVolume");
  checkMetadata(obj, path);
  const spec = record(obj.spec, `${path}.spec`);
  optionalString(spec, "persistentVolumeReclaimPolicy", `${path}.spec`);
  return obj as unknown as PersistentVolume;
}

/** A VolumeAttachment as far as the attachment rules read it. */
export function attachmentOf(value: unknown, path: string): VolumeAttachment {
  const obj = record(value, path);
  checkTypeMeta(obj, path, ["storage.k8s.io/v1", "storage.k8s.io/v1beta1"], "VolumeAttachment");
  checkMetadata(obj, path);
  const spec = record(obj.spec, `${path}.spec`);
  const at = `${path}.spec`;
  optionalString(spec, "attacher", at);
  optionalString(spec, "nodeName", at);
  optionalRecord(spec, "source", at);
  if (isRecord(spec.source)) {
    optionalString(spec.source, "persistentVolumeName", `${at}.source`, true);
    optionalRecord(spec.source, "inlineVolumeSpec", `${at}.source`, true);
  }
  return obj as unknown as VolumeAttachment;
}
