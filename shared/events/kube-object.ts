// Validates the identity of Kubernetes objects and references taken from
// event bodies. Only the fields that route an event (apiVersion, kind, name,
// namespace) and the ones functions compare (uid, resourceVersion) are
// checked; the rest of the object is passed through for the function to read.

import { isRecord } from "../is-record.ts";
import { describeType, quote } from "./describe.ts";
import { EnvelopeError } from "./errors.ts";
import type { KubeObjectLike, ObjectReference } from "./types.ts";

// Names: DNS-subdomain shaped (what PVs, PVCs, VolumeAttachments, StorageClasses
// and nodes use), loosened to admit upper case, "_" and ":" so events about
// kinds with laxer rules (RBAC's "system:..." names) are ignored rather than
// refused. "/", "%", whitespace and control characters never pass, so a name
// is always safe to put into an API path.
const NAME = /^[A-Za-z0-9]([A-Za-z0-9._:-]*[A-Za-z0-9])?$/;
const MAX_NAME_LENGTH = 253;
// Namespaces are always DNS labels.
const NAMESPACE = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/;
const MAX_NAMESPACE_LENGTH = 63;
// "v1", "storage.k8s.io/v1", "snapshot.storage.k8s.io/v1beta1".
const API_VERSION = /^([a-z0-9]([a-z0-9.-]*[a-z0-9])?\/)?[a-z0-9]+$/;
// Kinds are CamelCase Go type names.
const KIND = /^[A-Za-z][A-Za-z0-9]*$/;
const MAX_KIND_LENGTH = 253;
const MAX_API_VERSION_LENGTH = 317; // 253-character group, "/", version
const MAX_UID_LENGTH = 128;
const MAX_RESOURCE_VERSION_LENGTH = 256;

function requireString(value: unknown, field: string): string {
  if (typeof value !== "string" || value === "") {
    throw new EnvelopeError(`${field} must be a non-empty string, got ${describeType(value)}`);
  }
  return value;
}

function checkSyntax(
  value: string,
  field: string,
  pattern: RegExp,
  maxLength: number,
  example: string,
): string {
  if (value.length > maxLength) {
    throw new EnvelopeError(`${field} is ${value.length} characters long; the limit is ${maxLength}`);
  }
  if (!pattern.test(value))
    throw new EnvelopeError(`${field} ${quote(value)} is not valid (expected ${example})`);
  return value;
}

export function checkApiVersion(value: unknown, field: string): string {
  return checkSyntax(
    requireString(value, field),
    field,
    API_VERSION,
    MAX_API_VERSION_LENGTH,
    'an API version like "v1" or "storage.k8s.io/v1"',
  );
}

export function checkKind(value: unknown, field: string): string {
  return checkSyntax(
    requireString(value, field),
    field,
    KIND,
    MAX_KIND_LENGTH,
    'a kind like "PersistentVolumeClaim"',
  );
}

export function checkName(value: unknown, field: string): string {
  return checkSyntax(
    requireString(value, field),
    field,
    NAME,
    MAX_NAME_LENGTH,
    "a Kubernetes object name: letters, digits, '-', '.', starting and ending with a letter or digit",
  );
}

/** Namespaces: absent, null and "" all mean cluster-scoped (undefined). */
export function checkNamespace(value: unknown, field: string): string | undefined {
  if (value === undefined || value === null || value === "") return undefined;
  if (typeof value !== "string")
    throw new EnvelopeError(`${field} must be a string, got ${describeType(value)}`);
  return checkSyntax(value, field, NAMESPACE, MAX_NAMESPACE_LENGTH, "a DNS label: a-z, 0-9 and '-'");
}

function checkOptionalString(value: unknown, field: string, maxLength: number): void {
  if (value === undefined) return;
  if (typeof value !== "string")
    throw new EnvelopeError(`${field} must be a string, got ${describeType(value)}`);
  if (value.length > maxLength) {
    throw new EnvelopeError(`${field} is ${value.length} characters long; the limit is ${maxLength}`);
  }
}

/** `where` names the value in messages, e.g. "CloudEvent data" or "watch event object". */
export function validateKubeObject(value: unknown, where: string): KubeObjectLike {
  if (!isRecord(value)) {
    throw new EnvelopeError(
      `${where} must be a Kubernetes object (a JSON object), got ${describeType(value)}`,
    );
  }
  checkApiVersion(value.apiVersion, `${where}.apiVersion`);
  checkKind(value.kind, `${where}.kind`);
  const metadata = value.metadata;
  if (!isRecord(metadata)) {
    throw new EnvelopeError(`${where}.metadata must be an object, got ${describeType(metadata)}`);
  }
  checkName(metadata.name, `${where}.metadata.name`);
  if (metadata.namespace === null) {
    // KubeObjectLike promises a string or nothing; the API server never sends null.
    throw new EnvelopeError(`${where}.metadata.namespace must be a string, got null`);
  }
  checkNamespace(metadata.namespace, `${where}.metadata.namespace`);
  checkOptionalString(metadata.uid, `${where}.metadata.uid`, MAX_UID_LENGTH);
  checkOptionalString(
    metadata.resourceVersion,
    `${where}.metadata.resourceVersion`,
    MAX_RESOURCE_VERSION_LENGTH,
  );
  // The checks above proved exactly the fields KubeObjectLike promises; the
  // object is freshly parsed and ours, so it is handed on without a copy.
  return value as KubeObjectLike;
}

export function referenceOf(object: KubeObjectLike): ObjectReference {
  const ref: ObjectReference = {
    apiVersion: object.apiVersion,
    kind: object.kind,
    name: object.metadata.name,
  };
  const namespace = checkNamespace(object.metadata.namespace, "metadata.namespace");
  if (namespace !== undefined) ref.namespace = namespace;
  return ref;
}

/** An ObjectReference as ApiServerSource Reference mode sends it: {apiVersion, kind, name, namespace}. */
export function validateObjectReference(value: unknown, where: string): ObjectReference {
  if (!isRecord(value)) {
    throw new EnvelopeError(
      `${where} must be an object reference {apiVersion, kind, name, namespace}, got ${describeType(value)}`,
    );
  }
  const ref: ObjectReference = {
    apiVersion: checkApiVersion(value.apiVersion, `${where}.apiVersion`),
    kind: checkKind(value.kind, `${where}.kind`),
    name: checkName(value.name, `${where}.name`),
  };
  const namespace = checkNamespace(value.namespace, `${where}.namespace`);
  if (namespace !== undefined) ref.namespace = namespace;
  return ref;
}
