// Kubernetes strategic merge patch (k8s.io/apimachinery strategicpatch) over
// the list strategies of the sandbox's types, including the order a merged
// list comes out in: the patch's elements in the patch's order, elements only
// the server had kept in their stored order, interleaved by where they stood
// before. An element new to the list therefore lands in front of it, not at
// its end. Inputs are never mutated.

import { isRecord } from "../../shared/is-record.ts";
import { type JsonObject, own, PatchError, setOwn } from "./patch-values.ts";

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

/** What identifies a list element: its merge key's value, or the primitive itself. */
type KeyOf = (item: unknown) => unknown;

function keyFunction(rule: ListRule): KeyOf {
  const mergeKey = rule.mergeKey;
  if (mergeKey === null) return (item) => item;
  return (item) => (isRecord(item) ? own(item, mergeKey) : undefined);
}

function indexOfKey(list: readonly unknown[], key: unknown, keyOf: KeyOf): number {
  return list.findIndex((candidate) => jsonEqual(keyOf(candidate), key));
}

/** A stable sort by position in `order`; elements `order` lacks keep their place after the rest. */
function sortByOrder(items: readonly unknown[], order: readonly unknown[], keyOf: KeyOf): unknown[] {
  const at = (item: unknown): number => {
    const i = indexOfKey(order, keyOf(item), keyOf);
    return i < 0 ? Number.MAX_SAFE_INTEGER : i;
  };
  return items
    .map((item, i) => ({ item, i, rank: at(item) }))
    .sort((a, b) => a.rank - b.rank || a.i - b.i)
    .map((e) => e.item);
}

/**
 * strategicpatch's normalizeElementOrder: `named` sorted by `namedOrder`,
 * `serverOnly` by `serverOrder`, then merged so that a server-only element
 * goes first only when both it and the next named element stood in
 * `serverOrder` and it stood earlier. A named element the server never had
 * therefore precedes the server's remaining elements.
 */
function interleave(
  named: readonly unknown[],
  serverOnly: readonly unknown[],
  namedOrder: readonly unknown[],
  serverOrder: readonly unknown[],
  keyOf: KeyOf,
): unknown[] {
  const right = sortByOrder(named, namedOrder, keyOf);
  const left = sortByOrder(serverOnly, serverOrder, keyOf);
  const result: unknown[] = [];
  let i = 0;
  let j = 0;
  while (i < left.length && j < right.length) {
    const li = indexOfKey(serverOrder, keyOf(left[i]), keyOf);
    const ri = indexOfKey(serverOrder, keyOf(right[j]), keyOf);
    result.push(li >= 0 && ri >= 0 && li < ri ? left[i++] : right[j++]);
  }
  return [...result, ...left.slice(i), ...right.slice(j)];
}

/** Splits `merged` into the elements `by` names and the rest, each in merged order. */
function partition(merged: readonly unknown[], by: readonly unknown[], keyOf: KeyOf): [unknown[], unknown[]] {
  const named: unknown[] = [];
  const rest: unknown[] = [];
  for (const item of merged) (indexOfKey(by, keyOf(item), keyOf) >= 0 ? named : rest).push(item);
  return [named, rest];
}

class StrategicMerger {
  readonly rules: ReadonlyMap<string, ListRule>;

  constructor(resourcePlural: string) {
    this.rules = listRulesFor(resourcePlural);
  }

  /**
   * Merges `patch` into `original` in place (both are private clones), in
   * upstream's order: $retainKeys, then lists with a $setElementOrder, then
   * every other key (a $deleteFromPrimitiveList among them).
   */
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
    const ordered = this.setElementOrders(original, patch, path);
    for (const [key, value] of Object.entries(patch)) {
      if (key.startsWith(DELETE_FROM_PRIMITIVE_LIST)) {
        this.deleteFromPrimitiveList(original, key, value, path);
      } else if (!isDirectiveKey(key) && !ordered.has(key)) {
        this.mergeField(original, key, value, childPath(path, key));
      }
    }
    return original;
  }

  mergeField(original: JsonObject, key: string, value: unknown, path: string): void {
    const current = own(original, key);
    if (value === null) {
      delete original[key];
    } else if (isRecord(value)) {
      const merged = this.mergeMap(isRecord(current) ? current : {}, value, path);
      if (merged === DELETED) delete original[key];
      else setOwn(original, key, merged);
    } else if (Array.isArray(value)) {
      setOwn(original, key, this.mergeList(Array.isArray(current) ? current : undefined, value, path));
    } else {
      setOwn(original, key, value);
    }
  }

  /** `$retainKeys`: keys of the original not listed are dropped before merging. */
  retainKeys(original: JsonObject, patch: JsonObject, path: string): void {
    if (!Object.hasOwn(patch, RETAIN_KEYS)) return;
    const retained = stringList(patch[RETAIN_KEYS], `$retainKeys in ${at(path)}`);
    // Upstream lets a null (a deletion) through and answers 400 for any other key not retained.
    for (const key of Object.keys(patch)) {
      if (!isDirectiveKey(key) && patch[key] !== null && !retained.includes(key)) {
        throw new PatchError(400, `patch key "${key}" in ${at(path)} is not listed in $retainKeys`);
      }
    }
    for (const key of Object.keys(original)) {
      if (!retained.includes(key)) delete original[key];
    }
  }

  /**
   * `$deleteFromPrimitiveList/<field>` removes the listed values from a merging
   * list. Upstream stores the list itself where the field is missing or is not
   * a merging list, so there it adds what it was asked to delete.
   */
  deleteFromPrimitiveList(original: JsonObject, key: string, value: unknown, path: string): void {
    const field = key.slice(DELETE_FROM_PRIMITIVE_LIST.length);
    const doomed = listValue(value, `${key} in ${at(path)}`);
    if (doomed.some((item) => typeof item === "object" && item !== null)) {
      throw new PatchError(400, `${key} in ${at(path)} may only list primitive values`);
    }
    const current = own(original, field);
    const merging = this.rules.get(childPath(path, field))?.mergeKey === null;
    if (Array.isArray(current) && merging) {
      setOwn(
        original,
        field,
        current.filter((item) => !doomed.includes(item)),
      );
    } else {
      setOwn(original, field, [...doomed]);
    }
  }

  /**
   * Lists with a `$setElementOrder/<field>`: merged, then the named elements
   * put in the requested order and the server's others interleaved by where
   * they stood. Returns the fields done, which the caller then skips.
   */
  setElementOrders(original: JsonObject, patch: JsonObject, path: string): Set<string> {
    const done = new Set<string>();
    for (const [key, value] of Object.entries(patch)) {
      if (!key.startsWith(SET_ELEMENT_ORDER)) continue;
      const field = key.slice(SET_ELEMENT_ORDER.length);
      const order = listValue(value, `${key} in ${at(path)}`);
      const fieldPath = childPath(path, field);
      const rule = this.rules.get(fieldPath);
      // Atomic lists come out exactly as patched, so there is nothing to order.
      if (rule === undefined) continue;
      if (rule.mergeKey !== null) {
        const mergeKey = rule.mergeKey;
        for (const item of order) {
          if (!isRecord(item) || !Object.hasOwn(item, mergeKey)) {
            throw new PatchError(
              400,
              `${key} in ${at(path)}: elements must be objects with the merge key "${mergeKey}"`,
            );
          }
        }
      }
      const before = own(original, field);
      const patched = own(patch, field);
      const stored = Array.isArray(before) ? before : undefined;
      let merged: unknown[];
      if (Array.isArray(patched)) merged = this.mergeList(stored, patched, fieldPath);
      else if (patched === undefined && stored !== undefined) merged = stored;
      else continue;
      const keyOf = keyFunction(rule);
      const [named, serverOnly] = partition(merged, order, keyOf);
      setOwn(original, field, interleave(named, serverOnly, order, stored ?? [], keyOf));
      done.add(field);
    }
    return done;
  }

  mergeList(original: unknown[] | undefined, patch: unknown[], path: string): unknown[] {
    // A `{"$patch": "replace"}` element turns the rest of the list into the new value.
    const replaceAt = patch.findIndex((item) => isRecord(item) && own(item, PATCH_DIRECTIVE) === "replace");
    const rule = this.rules.get(path);
    if (rule === undefined) return this.cleanList(patch, path);
    if (replaceAt >= 0) {
      return this.mergeList(
        undefined,
        patch.filter((_, index) => index !== replaceAt),
        path,
      );
    }
    if (rule.mergeKey === null) return this.mergePrimitiveSet(original, patch, path);
    return this.mergeKeyedList(original, patch, path, rule.mergeKey);
  }

  /** Atomic list: the patch value, with directives stripped from any maps inside. */
  cleanList(patch: unknown[], path: string): unknown[] {
    const cleaned: unknown[] = [];
    for (const item of patch) {
      if (isRecord(item)) {
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

  /**
   * A merging list of primitives: the union of both lists, each value once.
   * A list the object lacked is taken as patched, duplicates and all, as upstream.
   */
  mergePrimitiveSet(original: unknown[] | undefined, patch: unknown[], path: string): unknown[] {
    for (const item of patch) {
      if (typeof item === "object" && item !== null) {
        throw new PatchError(400, `${at(path)} is a list of primitive values; the patch contains an object`);
      }
    }
    if (original === undefined) return [...patch];
    if (original.length === 0 && patch.length === 0) return [];
    const merged = [...new Set([...original, ...patch])];
    const keyOf = keyFunction(PRIMITIVE_SET);
    const [named, serverOnly] = partition(merged, patch, keyOf);
    return interleave(named, serverOnly, patch, original, keyOf);
  }

  /**
   * A list of maps merging by `mergeKey`: `$patch: delete` elements first
   * remove every element with their key, then each other element merges into
   * the first element with its key or joins the list.
   */
  mergeKeyedList(
    original: unknown[] | undefined,
    patch: unknown[],
    path: string,
    mergeKey: string,
  ): unknown[] {
    const matches =
      (key: unknown) =>
      (candidate: unknown): boolean =>
        isRecord(candidate) && jsonEqual(own(candidate, mergeKey), key);
    let stored = [...(original ?? [])];
    const additions: JsonObject[] = [];
    for (const item of patch) {
      if (!isRecord(item) || !Object.hasOwn(item, mergeKey)) {
        throw new PatchError(400, `elements of ${at(path)} must be objects with the merge key "${mergeKey}"`);
      }
      if (own(item, PATCH_DIRECTIVE) === "delete") stored = stored.filter((c) => !matches(item[mergeKey])(c));
      else additions.push(item);
    }
    const merged = [...stored];
    for (const item of additions) {
      const index = merged.findIndex(matches(item[mergeKey]));
      const existing = index >= 0 ? merged[index] : undefined;
      const result = this.mergeMap(isRecord(existing) ? existing : {}, item, path);
      if (result === DELETED) continue;
      if (index >= 0) merged[index] = result;
      else merged.push(result);
    }
    if (original === undefined) return merged;
    const keyOf = keyFunction(byKey(mergeKey));
    const [named, serverOnly] = partition(merged, additions, keyOf);
    return interleave(named, serverOnly, additions, stored, keyOf);
  }
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
  if (!isRecord(patch)) throw new PatchError(400, "strategic merge patch must be a JSON object");
  const original: unknown = structuredClone(doc);
  const merger = new StrategicMerger(resourcePlural);
  const merged = merger.mergeMap(isRecord(original) ? original : {}, structuredClone(patch), "");
  return merged === DELETED ? {} : merged;
}
