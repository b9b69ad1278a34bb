// AdmissionReview admission.k8s.io/v1 on the wire: parse one untrusted body
// into a checked request, and build the response kube-apiserver accepts.
//
// Anything that is not a well-formed review is an AdmissionReviewError (HTTP
// 400): kube-apiserver then applies the webhook's failurePolicy, and the
// message says what was wrong. A well-formed review always gets HTTP 200 with
// `allowed` true or false: a denial is an answer, not an error.
//
// Response rules kube-apiserver enforces: `uid` echoes the request's;
// `patch` (base64 JSON Patch) and `patchType: "JSONPatch"` come together or
// not at all.

import jsonpatch from "fast-json-patch";
import { parseJson } from "../events/json-body.ts";
import { isRecord } from "../is-record.ts";

export const ADMISSION_API_VERSION = "admission.k8s.io/v1";
export const ADMISSION_REVIEW_KIND = "AdmissionReview";

export type AdmissionOperation = "CREATE" | "UPDATE" | "DELETE" | "CONNECT";
const OPERATIONS: readonly string[] = ["CREATE", "UPDATE", "DELETE", "CONNECT"];

export interface GroupVersionKind {
  group: string;
  version: string;
  kind: string;
}

export interface GroupVersionResource {
  group: string;
  version: string;
  resource: string;
}

/** The parts of request the hooks read; everything else in the review is ignored. */
export interface AdmissionRequest {
  uid: string;
  kind: GroupVersionKind;
  resource: GroupVersionResource;
  /** "" for the main resource, "status" for status writes. */
  subResource: string;
  name: string;
  namespace: string;
  operation: AdmissionOperation;
  /** Set for CREATE and UPDATE (checked); null on DELETE. Shape checked per kind by the hook. */
  object: Record<string, unknown> | null;
  /** Set for UPDATE (checked) and DELETE; null on CREATE. */
  oldObject: Record<string, unknown> | null;
  dryRun: boolean;
}

export interface DenialStatus {
  /** HTTP status the API server passes on to the client (403, 422, 503, ...). */
  code: number;
  /** metav1.StatusReason: "Forbidden", "Invalid", "ServiceUnavailable". */
  reason: string;
  message: string;
}

export interface AdmissionResponse {
  uid: string;
  allowed: boolean;
  status?: DenialStatus;
  /** Base64 of a JSON Patch (RFC 6902) array. */
  patch?: string;
  patchType?: "JSONPatch";
  warnings?: string[];
}

export interface AdmissionReviewResponse {
  apiVersion: typeof ADMISSION_API_VERSION;
  kind: typeof ADMISSION_REVIEW_KIND;
  response: AdmissionResponse;
}

export type JsonPatchOperation = jsonpatch.Operation;

/** The review is malformed: answer HTTP 400 with this message. */
export class AdmissionReviewError extends Error {
  override name = "AdmissionReviewError";
  readonly status = 400;
}

/** Request UIDs are UUIDs; anything far longer is not from an API server. */
const MAX_UID_LENGTH = 256;
const utf8 = new TextDecoder("utf-8", { fatal: true });

/** "a string", "an array", "null": for messages about what arrived instead. */
export function describeJsonValue(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") return "an object";
  if (typeof value === "string") return "a string";
  if (typeof value === "number") return "a number";
  if (typeof value === "boolean") return "a boolean";
  return typeof value;
}

function fail(message: string): never {
  throw new AdmissionReviewError(message);
}

function stringField(from: Record<string, unknown>, key: string, path: string, optional: boolean): string {
  const value = from[key];
  if (value === undefined || value === null) {
    if (optional) return "";
    fail(`${path}.${key} is required`);
  }
  if (typeof value !== "string") fail(`${path}.${key} must be a string, got ${describeJsonValue(value)}`);
  return value;
}

/** request.<key> as {group, version, <last>}: the group may be empty, version and <last> may not. */
function groupVersionAnd<L extends "kind" | "resource">(
  request: Record<string, unknown>,
  key: string,
  last: L,
): { group: string; version: string } & Record<L, string> {
  const value = request[key];
  if (!isRecord(value)) fail(`request.${key} must be an object {group, version, ${last}}`);
  const path = `request.${key}`;
  const group = stringField(value, "group", path, true);
  const version = stringField(value, "version", path, false);
  const named = stringField(value, last, path, false);
  if (version === "" || named === "") fail(`${path}.version and ${path}.${last} must not be empty`);
  return { group, version, [last]: named } as { group: string; version: string } & Record<L, string>;
}

function objectField(request: Record<string, unknown>, key: string): Record<string, unknown> | null {
  const value = request[key];
  if (value === undefined || value === null) return null;
  if (!isRecord(value)) fail(`request.${key} must be a JSON object or null, got ${describeJsonValue(value)}`);
  return value;
}

function textOf(body: Uint8Array | string): string {
  if (typeof body === "string") return body;
  try {
    return utf8.decode(body);
  } catch {
    return fail("request body is not valid UTF-8");
  }
}

/** Parses and checks one AdmissionReview request body; throws AdmissionReviewError when malformed. */
export function parseAdmissionReview(body: Uint8Array | string): AdmissionRequest {
  const text = textOf(body);
  if (text.trim() === "") fail("request body is empty; expected an AdmissionReview (admission.k8s.io/v1)");
  let review: unknown;
  try {
    review = parseJson(text, "request body");
  } catch (err) {
    fail(err instanceof Error ? err.message : String(err));
  }
  if (!isRecord(review))
    fail(`request body is ${describeJsonValue(review)}; expected an AdmissionReview object`);
  if (review.apiVersion !== ADMISSION_API_VERSION) {
    const got = typeof review.apiVersion === "string" ? JSON.stringify(review.apiVersion) : "missing";
    fail(
      `apiVersion is ${got}; only ${ADMISSION_API_VERSION} is served (set admissionReviewVersions: ["v1"] in the webhook configuration)`,
    );
  }
  if (review.kind !== ADMISSION_REVIEW_KIND) {
    const got = typeof review.kind === "string" ? JSON.stringify(review.kind) : "missing";
    fail(`kind is ${got}; expected "${ADMISSION_REVIEW_KIND}"`);
  }
  const request = review.request;
  if (!isRecord(request)) fail("request is missing or not an object");

  const uid = request.uid;
  if (typeof uid !== "string" || uid === "") fail("request.uid must be a non-empty string");
  if (uid.length > MAX_UID_LENGTH) fail(`request.uid is longer than ${MAX_UID_LENGTH} characters`);

  const operation = request.operation;
  if (typeof operation !== "string" || !OPERATIONS.includes(operation)) {
    fail(
      `request.operation must be one of ${OPERATIONS.join(", ")}, got ${JSON.stringify(operation) ?? "nothing"}`,
    );
  }

  const dryRun = request.dryRun;
  if (dryRun !== undefined && dryRun !== null && typeof dryRun !== "boolean")
    fail(`request.dryRun must be a boolean, got ${describeJsonValue(dryRun)}`);

  const parsed: AdmissionRequest = {
    uid,
    kind: groupVersionAnd(request, "kind", "kind"),
    resource: groupVersionAnd(request, "resource", "resource"),
    subResource: stringField(request, "subResource", "request", true),
    name: stringField(request, "name", "request", true),
    namespace: stringField(request, "namespace", "request", true),
    operation: operation as AdmissionOperation,
    object: objectField(request, "object"),
    oldObject: objectField(request, "oldObject"),
    dryRun: dryRun === true,
  };
  if ((parsed.operation === "CREATE" || parsed.operation === "UPDATE") && parsed.object === null)
    fail(`request.object is required for ${parsed.operation}`);
  if (parsed.operation === "UPDATE" && parsed.oldObject === null)
    fail("request.oldObject is required for UPDATE");
  return parsed;
}

function withWarnings(response: AdmissionResponse, warnings: readonly string[]): AdmissionResponse {
  const unique = [...new Set(warnings)];
  return unique.length === 0 ? response : { ...response, warnings: unique };
}

/** Admit as is. */
export function allow(request: AdmissionRequest, warnings: readonly string[] = []): AdmissionResponse {
  return withWarnings({ uid: request.uid, allowed: true }, warnings);
}

/** Refuse with a status the API server passes on to the client. */
export function deny(
  request: AdmissionRequest,
  status: DenialStatus,
  warnings: readonly string[] = [],
): AdmissionResponse {
  return withWarnings({ uid: request.uid, allowed: false, status }, warnings);
}

/**
 * The JSON Patch that turns `original` into `mutated`. Both are plain JSON
 * (the review's object and a copy the hooks changed member by member), so
 * they are compared as they are: compare() skips subtrees the two share and
 * clones only the values it adds. A member set to undefined counts as absent,
 * as it would in JSON.
 */
export function jsonPatchOf(original: object, mutated: object): JsonPatchOperation[] {
  return jsonpatch.compare(original, mutated);
}

/** Admit with the changes from `original` to `mutated`; no patch fields at all when nothing changed. */
export function admitWithChanges(
  request: AdmissionRequest,
  original: object,
  mutated: object,
  warnings: readonly string[] = [],
): AdmissionResponse {
  const ops = jsonPatchOf(original, mutated);
  if (ops.length === 0) return allow(request, warnings);
  const patch = Buffer.from(JSON.stringify(ops), "utf8").toString("base64");
  return withWarnings({ uid: request.uid, allowed: true, patchType: "JSONPatch", patch }, warnings);
}

/** The whole body of the HTTP 200 answer. */
export function reviewResponse(response: AdmissionResponse): AdmissionReviewResponse {
  return { apiVersion: ADMISSION_API_VERSION, kind: ADMISSION_REVIEW_KIND, response };
}
