// The PATCH content types kube-apiserver accepts, applied to plain JSON objects. Inputs are
// never mutated and results never share structure with them.

import type { Operation } from "fast-json-patch";
// fast-json-patch is CommonJS without an "exports" map: Node's ESM loader cannot see its
// named exports, so only the default import works at runtime.
import jsonpatch from "fast-json-patch";

export class PatchError extends Error {
  readonly code: number;

  constructor(code: number, message: string) {
    super(message);
    this.name = "PatchError";
    this.code = code;
  }
}

export const JSON_PATCH = "application/json-patch+json";
export const MERGE_PATCH = "application/merge-patch+json";
export const STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json";
export const SUPPORTED_PATCH_TYPES: readonly string[] = [JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH];

type JsonObject = Record<string, unknown>;

function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function own(obj: JsonObject, key: string): unknown {
  return Object.hasOwn(obj, key) ? obj[key] : undefined;
}

function setOwn(obj: JsonObject, key: string, value: unknown): void {
  // JSON.parse yields "__proto__" as an ordinary key; plain assignment would instead
  // replace the object's prototype.
  if (key === "__proto__") {
    Object.defineProperty(obj, key, { value, writable: true, enumerable: true, configurable: true });
  } else {
    obj[key] = value;
  }
}

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
  if (!isObject(raw)) throw new PatchError(400, `json patch operation ${index} is not an object`);
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
  if (!isObject(patch)) return patch;
  const result = isObject(target) ? target : {};
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
// Kubernetes strategic merge patch

/** How a list merges: by a key field of its elements, or (key null) as a set of primitives. */
interface ListRule {
  readonly mergeKey: string | null;
}

const PRIMITIVE_SET: ListRule = { mergeKey: null };
const byKey = (mergeKey: string): ListRule => ({ mergeKey });

const COMMON_LIST_RULES: ReadonlyArray<readonly [string, ListRule]> = [
  ["metadata.finalizers", PRIMITIVE_SET],
  ["metadata.ownerReferences", byKey("uid")],
];

function podSpecListRules(prefix: string): Array<[string, ListRule]> {
  const rules: Array<[string, ListRule]> = [
    [`${prefix}.volumes`, byKey("name")],
    [`${prefix}.imagePullSecrets`, byKey("name")],
  ];
  for (const containers of ["containers", "initContainers", "ephemeralContainers"]) {
    const base = `${prefix}.${containers}`;
    rules.push(
      [base, byKey("name")],
      [`${base}.env`, byKey("name")],
      [`${base}.ports`, byKey("containerPort")],
      [`${base}.volumeMounts`, byKey("mountPath")],
      [`${base}.volumeDevices`, byKey("devicePath")],
    );
  }
  return rules;
}

// Lists not listed here are atomic and replaced whole, as upstream. Node spec.taints is
// deliberately absent: upstream declares it atomic, so a patch replaces all taints.
const RESOURCE_LIST_RULES: ReadonlyMap<string, ReadonlyArray<readonly [string, ListRule]>> = new Map([
  ["pods", [...podSpecListRules("spec"), ["status.conditions", byKey("type")] as const]],
  [
    "nodes",
    [
      ["status.conditions", byKey("type")],
      ["status.addresses", byKey("type")],
    ],
  ],
  ["persistentvolumeclaims", [["status.conditions", byKey("type")]]],
]);

function listRulesFor(resourcePlural: string): ReadonlyMap<string, ListRule> {
  return new Map([...COMMON_LIST_RULES, ...(RESOURCE_LIST_RULES.get(resourcePlural) ?? [])]);
}

const PATCH_DIRECTIVE = "$patch";
const RETAIN_KEYS = "$retainKeys";
const SET_ELEMENT_ORDER = "$setElementOrder/";
const DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList/";

function isDirectiveKey(key: string): boolean {
  return (
    key === PATCH_DIRECTIVE ||
    key === RETAIN_KEYS ||
    key.startsWith(SET_ELEMENT_ORDER) ||
    key.startsWith(DELETE_FROM_PRIMITIVE_LIST)
  );
}

/** Marker returned when a map patch carries `$patch: delete`. */
const DELETED = Symbol("deleted");

function childPath(path: string, key: string): string {
  return path === "" ? key : `${path}.${key}`;
}

function at(path: string): string {
  return path === "" ? "the object" : `"${path}"`;
}

function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  return JSON.stringify(a) === JSON.stringify(b);
}

function stringList(value: unknown, what: string): string[] {
  if (!Array.isArray(value) || !value.every((item) => typeof item === "string")) {
    throw new PatchError(400, `${what} must be a list of strings`);
  }
  return value;
}

function listValue(value: unknown, what: string): unknown[] {
  if (!Array.isArray(value)) throw new PatchError(400, `${what} must be a list`);
  return value;
}

class StrategicMerger {
  readonly rules: ReadonlyMap<string, ListRule>;

  constructor(resourcePlural: string) {
    this.rules = listRulesFor(resourcePlural);
  }

  /** Merges `patch` into `original` in place (both are private clones). */
  mergeMap(original: JsonObject, patch: JsonObject, path: string): JsonObject | typeof DELETED {
    const directive = own(patch, PATCH_DIRECTIVE);
    if (directive === "delete") return DELETED;
    if (directive === "replace") {
      const rest = { ...patch };
      delete rest[PATCH_DIRECTIVE];
      return this.mergeMap({}, rest, path);
    }
    if (directive !== undefined && directive !== "merge") {
      throw new PatchError(400, `unknown $patch directive ${JSON.stringify(directive)} in ${at(path)}`);
    }
    this.retainKeys(original, patch, path);
    this.deleteFromPrimitiveLists(original, patch, path);
    const orders = this.elementOrders(original, patch, path);
    for (const [key, value] of Object.entries(patch)) {
      if (!isDirectiveKey(key)) this.mergeField(original, key, value, childPath(path, key));
    }
    for (const order of orders) this.applyOrder(original, order);
    return original;
  }

  mergeField(original: JsonObject, key: string, value: unknown, path: string): void {
    const current = own(original, key);
    if (value === null) {
      delete original[key];
    } else if (isObject(value)) {
      const merged = this.mergeMap(isObject(current) ? current : {}, value, path);
      if (merged === DELETED) delete original[key];
      else setOwn(original, key, merged);
    } else if (Array.isArray(value)) {
      setOwn(original, key, this.mergeList(Array.isArray(current) ? current : [], value, path));
    } else {
      setOwn(original, key, value);
    }
  }

  /** `$retainKeys`: keys of the original not listed are dropped before merging. */
  retainKeys(original: JsonObject, patch: JsonObject, path: string): void {
    if (!Object.hasOwn(patch, RETAIN_KEYS)) return;
    const retained = stringList(patch[RETAIN_KEYS], `$retainKeys in ${at(path)}`);
    for (const key of Object.keys(patch)) {
      if (!isDirectiveKey(key) && !retained.includes(key)) {
        throw new PatchError(422, `patch key "${key}" in ${at(path)} is not listed in $retainKeys`);
      }
    }
    for (const key of Object.keys(original)) {
      if (!retained.includes(key)) delete original[key];
    }
  }

  deleteFromPrimitiveLists(original: JsonObject, patch: JsonObject, path: string): void {
    for (const [key, value] of Object.entries(patch)) {
      if (!key.startsWith(DELETE_FROM_PRIMITIVE_LIST)) continue;
      const field = key.slice(DELETE_FROM_PRIMITIVE_LIST.length);
      const doomed = listValue(value, `${key} in ${at(path)}`);
      if (doomed.some((item) => typeof item === "object" && item !== null)) {
        throw new PatchError(400, `${key} in ${at(path)} may only list primitive values`);
      }
      const current = own(original, field);
      if (Array.isArray(current)) {
        setOwn(
          original,
          field,
          current.filter((item) => !doomed.includes(item)),
        );
      }
    }
  }

  /** Collects `$setElementOrder/<field>` with the field's keys before the merge. */
  elementOrders(original: JsonObject, patch: JsonObject, path: string): ElementOrder[] {
    const orders: ElementOrder[] = [];
    for (const [key, value] of Object.entries(patch)) {
      if (!key.startsWith(SET_ELEMENT_ORDER)) continue;
      const field = key.slice(SET_ELEMENT_ORDER.length);
      const order = listValue(value, `${key} in ${at(path)}`);
      const rule = this.rules.get(childPath(path, field));
      // Atomic lists come out exactly as patched, so there is nothing to order.
      if (rule === undefined) continue;
      const before = own(original, field);
      orders.push({
        field,
        rule,
        keys: order.map((item) => orderKey(item, rule, `${key} in ${at(path)}`)),
        serverKeys: Array.isArray(before) ? before.map((item) => elementKey(item, rule)) : [],
      });
    }
    return orders;
  }

  applyOrder(original: JsonObject, order: ElementOrder): void {
    const merged = own(original, order.field);
    if (!Array.isArray(merged)) return;
    setOwn(original, order.field, orderElements(merged, order));
  }

  mergeList(original: unknown[], patch: unknown[], path: string): unknown[] {
    // A `{"$patch": "replace"}` element turns the rest of the list into the new value.
    const replaceAt = patch.findIndex((item) => isObject(item) && own(item, PATCH_DIRECTIVE) === "replace");
    const rule = this.rules.get(path);
    if (replaceAt >= 0 || rule === undefined) {
      const rest = replaceAt >= 0 ? patch.filter((_, index) => index !== replaceAt) : patch;
      return rule === undefined ? this.cleanList(rest, path) : this.mergeList([], rest, path);
    }
    if (rule.mergeKey === null) return this.mergePrimitiveSet(original, patch, path);
    return this.mergeKeyedList(original, patch, path, rule.mergeKey);
  }

  /** Atomic list: the patch value, with directives stripped from any maps inside. */
  cleanList(patch: unknown[], path: string): unknown[] {
    const cleaned: unknown[] = [];
    for (const item of patch) {
      if (isObject(item)) {
        const merged = this.mergeMap({}, item, path);
        if (merged !== DELETED) cleaned.push(merged);
      } else if (Array.isArray(item)) {
        cleaned.push(this.cleanList(item, path));
      } else {
        cleaned.push(item);
      }
    }
    return cleaned;
  }

  /** Union keeping the original order and appending new values. */
  mergePrimitiveSet(original: unknown[], patch: unknown[], path: string): unknown[] {
    const result = [...original];
    for (const item of patch) {
      if (typeof item === "object" && item !== null) {
        throw new PatchError(400, `${at(path)} is a list of primitive values; the patch contains an object`);
      }
      if (!result.includes(item)) result.push(item);
    }
    return result;
  }

  mergeKeyedList(original: unknown[], patch: unknown[], path: string, mergeKey: string): unknown[] {
    let result = [...original];
    for (const item of patch) {
      if (!isObject(item) || !Object.hasOwn(item, mergeKey)) {
        throw new PatchError(400, `elements of ${at(path)} must be objects with the merge key "${mergeKey}"`);
      }
      const key = item[mergeKey];
      const matches = (candidate: unknown): boolean =>
        isObject(candidate) && jsonEqual(own(candidate, mergeKey), key);
      const index = result.findIndex(matches);
      const existing = index >= 0 ? result[index] : undefined;
      const merged = this.mergeMap(isObject(existing) ? existing : {}, item, path);
      if (merged === DELETED) {
        // Deleting removes every element with the key, duplicates included.
        result = result.filter((candidate) => !matches(candidate));
      } else if (index >= 0) {
        result[index] = merged;
      } else {
        result.push(merged);
      }
    }
    return result;
  }
}

interface ElementOrder {
  readonly field: string;
  readonly rule: ListRule;
  /** Keys in the order the client wants. */
  readonly keys: readonly unknown[];
  /** Keys of the list as stored before this patch. */
  readonly serverKeys: readonly unknown[];
}

function elementKey(item: unknown, rule: ListRule): unknown {
  if (rule.mergeKey === null) return item;
  return isObject(item) ? own(item, rule.mergeKey) : undefined;
}

function orderKey(item: unknown, rule: ListRule, what: string): unknown {
  if (rule.mergeKey === null) return item;
  if (!isObject(item) || !Object.hasOwn(item, rule.mergeKey)) {
    throw new PatchError(400, `${what}: elements must be objects with the merge key "${rule.mergeKey}"`);
  }
  return item[rule.mergeKey];
}

function indexOfKey(keys: readonly unknown[], key: unknown): number {
  return keys.findIndex((candidate) => jsonEqual(candidate, key));
}

/**
 * Elements named in `$setElementOrder` take the requested order; elements only the server
 * knows keep their place relative to them, judged by the order stored before the patch.
 */
function orderElements(merged: readonly unknown[], order: ElementOrder): unknown[] {
  const keyOf = (item: unknown): unknown => elementKey(item, order.rule);
  const requested = merged
    .filter((item) => indexOfKey(order.keys, keyOf(item)) >= 0)
    .sort((a, b) => indexOfKey(order.keys, keyOf(a)) - indexOfKey(order.keys, keyOf(b)));
  const serverOnly = merged.filter((item) => indexOfKey(order.keys, keyOf(item)) < 0);
  const result: unknown[] = [];
  let r = 0;
  let s = 0;
  while (r < requested.length && s < serverOnly.length) {
    const requestedAt = indexOfKey(order.serverKeys, keyOf(requested[r]));
    const serverAt = indexOfKey(order.serverKeys, keyOf(serverOnly[s]));
    const serverFirst = requestedAt >= 0 && serverAt >= 0 && serverAt < requestedAt;
    result.push(serverFirst ? serverOnly[s++] : requested[r++]);
  }
  return [...result, ...requested.slice(r), ...serverOnly.slice(s)];
}

/**
 * Kubernetes strategic merge patch over the list strategies our objects use (see
 * RESOURCE_LIST_RULES); other lists are replaced. Directives never reach the result.
 */
export function applyStrategicMergePatch(
  doc: JsonObject,
  patch: unknown,
  resourcePlural: string,
): JsonObject {
  if (!isObject(patch)) throw new PatchError(400, "strategic merge patch must be a JSON object");
  const original: unknown = structuredClone(doc);
  const merger = new StrategicMerger(resourcePlural);
  const merged = merger.mergeMap(isObject(original) ? original : {}, structuredClone(patch), "");
  return merged === DELETED ? {} : merged;
}

// ---------------------------------------------------------------------------
// Dispatch on Content-Type

function mediaType(contentType: string): string {
  return (contentType.split(";")[0] ?? "").trim().toLowerCase();
}

function requireObject(result: unknown): JsonObject {
  if (!isObject(result)) throw new PatchError(422, "the patched document is not a JSON object");
  return result;
}

/** Applies a PATCH request body according to its Content-Type (parameters are ignored). */
export function applyPatch(
  contentType: string,
  doc: JsonObject,
  patch: unknown,
  resourcePlural: string,
): JsonObject {
  switch (mediaType(contentType)) {
    case JSON_PATCH:
      return requireObject(applyJsonPatch(doc, patch));
    case MERGE_PATCH:
      // RFC 7386 would replace the document; kube-apiserver refuses non-object bodies.
      if (!isObject(patch)) throw new PatchError(400, "merge patch must be a JSON object");
      return requireObject(applyMergePatch(doc, patch));
    case STRATEGIC_MERGE_PATCH:
      return applyStrategicMergePatch(doc, patch, resourcePlural);
    default:
      throw new PatchError(
        415,
        `the body of the request was in an unknown format - accepted media types include: ${SUPPORTED_PATCH_TYPES.join(", ")}`,
      );
  }
}
