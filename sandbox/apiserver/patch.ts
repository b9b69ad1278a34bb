// The PATCH content types kube-apiserver accepts, applied to plain JSON objects: JSON
// patch, merge patch, and dispatch on Content-Type (strategic merge lives in
// strategic-merge.ts). Inputs are never mutated and results never share structure with them.

import type { Operation } from "fast-json-patch";
// fast-json-patch is CommonJS without an "exports" map: Node's ESM loader cannot see its
// named exports, so only the default import works at runtime.
import jsonpatch from "fast-json-patch";
import { isRecord } from "../../shared/is-record.ts";
import { type JsonObject, own, PatchError, setOwn } from "./patch-values.ts";
import { applyStrategicMergePatch } from "./strategic-merge.ts";

export { PatchError } from "./patch-values.ts";
export { applyStrategicMergePatch } from "./strategic-merge.ts";

export const JSON_PATCH = "application/json-patch+json";
export const MERGE_PATCH = "application/merge-patch+json";
export const STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json";
/** What the sandbox applies to built-in types. */
export const SUPPORTED_PATCH_TYPES: readonly string[] = [JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH];
/** Custom resources have no Go struct to read merge strategies from, so upstream refuses strategic merge on them. */
export const CUSTOM_RESOURCE_PATCH_TYPES: readonly string[] = [JSON_PATCH, MERGE_PATCH];

// ---------------------------------------------------------------------------
// RFC 6902 JSON patch

const POINTER = /^(\/([^~]|~[01])*)*$/;

function pointer(raw: JsonObject, name: "path" | "from", index: number): string {
  const value = raw[name];
  if (typeof value !== "string" || !POINTER.test(value)) {
    throw new PatchError(400, `json patch operation ${index}: "${name}" must be a JSON pointer string`);
  }
  return value;
}

/** Builds a typed operation from untrusted JSON; rejects the library's internal `_get`. */
function toOperation(raw: unknown, index: number): Operation {
  if (!isRecord(raw)) throw new PatchError(400, `json patch operation ${index} is not an object`);
  const { op } = raw;
  const path = pointer(raw, "path", index);
  switch (op) {
    case "add":
    case "replace":
    case "test":
      if (!Object.hasOwn(raw, "value")) {
        throw new PatchError(400, `json patch operation ${index} (${op}) is missing "value"`);
      }
      return { op, path, value: raw.value };
    case "remove":
      return { op, path };
    case "move":
    case "copy":
      return { op, path, from: pointer(raw, "from", index) };
    default:
      throw new PatchError(
        400,
        `json patch operation ${index}: unknown op ${JSON.stringify(op)} (expected add, remove, replace, move, copy or test)`,
      );
  }
}

function parseJsonPatch(ops: unknown): Operation[] {
  if (!Array.isArray(ops)) throw new PatchError(400, "json patch must be a JSON array of operations");
  // Cloned because the library inserts operation values into the document by reference.
  return structuredClone(ops).map((raw: unknown, index) => toOperation(raw, index));
}

function describeOperation(op: Operation): string {
  return "from" in op ? `${op.op} from "${op.from}" to "${op.path}"` : `${op.op} "${op.path}"`;
}

function applyOperation(doc: unknown, op: Operation, index: number): unknown {
  if (op.op === "move" && op.path.startsWith(`${op.from}/`)) {
    // The library would crash with a TypeError here; RFC 6902 calls it an error.
    throw new PatchError(422, `json patch operation ${index}: cannot move "${op.from}" into its own child`);
  }
  try {
    return jsonpatch.applyOperation(doc, op, true, true, true, index).newDocument;
  } catch (error) {
    if (error instanceof jsonpatch.JsonPatchError && error.name === "TEST_OPERATION_FAILED") {
      throw new PatchError(422, `json patch test operation ${index} failed: value at "${op.path}" differs`);
    }
    if (error instanceof jsonpatch.JsonPatchError || error instanceof TypeError) {
      // The library's message also dumps the whole document; keep only its first line.
      const reason = error.message.split("\n")[0];
      throw new PatchError(422, `json patch operation ${index} (${describeOperation(op)}) failed: ${reason}`);
    }
    throw error;
  }
}

/**
 * RFC 6902. A malformed patch is a 400; a well-formed one that does not apply (missing
 * path, failed `test`) is a 422, as kube-apiserver answers.
 */
export function applyJsonPatch(doc: unknown, ops: unknown): unknown {
  const operations = parseJsonPatch(ops);
  let result = structuredClone(doc);
  operations.forEach((op, index) => {
    result = applyOperation(result, op, index);
  });
  return result;
}

// ---------------------------------------------------------------------------
// RFC 7386 JSON merge patch

function mergeInto(target: unknown, patch: unknown): unknown {
  if (!isRecord(patch)) return patch;
  const result = isRecord(target) ? target : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else setOwn(result, key, mergeInto(own(result, key), value));
  }
  return result;
}

/** RFC 7386: null deletes, objects merge recursively, anything else replaces. */
export function applyMergePatch(doc: unknown, patch: unknown): unknown {
  return mergeInto(structuredClone(doc), structuredClone(patch));
}

// ---------------------------------------------------------------------------
// Dispatch on Content-Type

/**
 * The patch type a PATCH request's Content-Type names, checked as kube-apiserver
 * checks it: parameters after the first ";" dropped, then an exact,
 * case-sensitive match. kube-apiserver also accepts server-side apply
 * (application/apply-patch+yaml); the sandbox does not implement it, so it
 * answers 415 for it and names only the types it does apply.
 */
export function patchTypeOf(
  contentType: string,
  accepted: readonly string[] = SUPPORTED_PATCH_TYPES,
): string {
  const semicolon = contentType.indexOf(";");
  const mediaType = semicolon > 0 ? contentType.slice(0, semicolon) : contentType;
  if (!accepted.includes(mediaType)) {
    throw new PatchError(
      415,
      `the body of the request was in an unknown format - accepted media types include: ${accepted.join(", ")}`,
    );
  }
  return mediaType;
}

function requireObject(result: unknown): JsonObject {
  if (!isRecord(result)) throw new PatchError(422, "the patched document is not a JSON object");
  return result;
}

/** Applies a PATCH request body according to its Content-Type (see patchTypeOf). */
export function applyPatch(
  contentType: string,
  doc: JsonObject,
  patch: unknown,
  resourcePlural: string,
  accepted: readonly string[] = SUPPORTED_PATCH_TYPES,
): JsonObject {
  switch (patchTypeOf(contentType, accepted)) {
    case JSON_PATCH:
      return requireObject(applyJsonPatch(doc, patch));
    case MERGE_PATCH:
      // RFC 7386 would replace the document; kube-apiserver refuses non-object bodies.
      if (!isRecord(patch)) throw new PatchError(400, "merge patch must be a JSON object");
      return requireObject(applyMergePatch(doc, patch));
    default:
      return applyStrategicMergePatch(doc, patch, resourcePlural);
  }
}
