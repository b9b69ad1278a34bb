// A JSON Patch whose `test` ops pin what a decision was made on: the API
// server applies it only if the stored object still agrees, atomically. A
// failed `test` (kube-apiserver answers 422) means the copy decided on was
// stale or not the truth: it is turned into a conflict, so the runtime reads
// the object afresh and decides again, as for a lost resourceVersion race.
import { statusCodeOf } from "./api-errors.ts";
import type { KubeJsonClient } from "./json-client.ts";
import type { ResourceDescriptor } from "./resources.ts";
import type { KubeObject } from "./types.ts";

export type JsonPatchOp =
  | { op: "test"; path: string; value: unknown }
  | { op: "add"; path: string; value: unknown }
  | { op: "replace"; path: string; value: unknown }
  | { op: "remove"; path: string };

/** A `test` failed: what the decision saw is not what is stored. Counts as a conflict. */
export class TestFailedError extends Error {
  override name = "TestFailedError";
  readonly code = 409;
  readonly body: { reason: string; code: number; message: string };
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.body = { reason: "Conflict", code: 409, message };
  }
}

export async function testedPatch<T extends KubeObject>(
  kube: KubeJsonClient,
  r: ResourceDescriptor,
  name: string,
  namespace: string | undefined,
  ops: readonly JsonPatchOp[],
): Promise<T> {
  try {
    return await kube.patch<T>(r, name, namespace, ops, "json");
  } catch (err) {
    if (statusCodeOf(err) !== 422) throw err;
    const detail = err instanceof Error ? err.message : String(err);
    throw new TestFailedError(`${r.kind} ${name} is not as decided on: ${detail}`, { cause: err });
  }
}

/**
 * Ops that make a finalizer change from `basis` (a copy that may be stale or
 * untrusted, such as an event's) safe: the same object (uid), at the same
 * revision, with the same finalizers, and every other field listed in
 * `alsoTest` as in the copy; then the new finalizer list. Undefined when the
 * copy lacks something to pin (no uid, revision or finalizer list, or a
 * listed field): decide on a fresh read instead.
 */
export function finalizerChangeOps(
  basis: KubeObject,
  finalizers: readonly string[],
  alsoTest: readonly string[] = [],
): JsonPatchOp[] | undefined {
  const { uid, resourceVersion } = basis.metadata;
  const current = basis.metadata.finalizers;
  if (!uid || !resourceVersion || current === undefined) return undefined;
  const ops: JsonPatchOp[] = [
    { op: "test", path: "/metadata/uid", value: uid },
    { op: "test", path: "/metadata/resourceVersion", value: resourceVersion },
    { op: "test", path: "/metadata/finalizers", value: current },
  ];
  for (const path of alsoTest) {
    const value = valueAt(basis, path);
    if (value === undefined) return undefined;
    ops.push({ op: "test", path, value });
  }
  ops.push({ op: "replace", path: "/metadata/finalizers", value: [...finalizers] });
  return ops;
}

/** The value at a JSON Pointer of plain keys ("/metadata/deletionTimestamp"); undefined if absent. */
function valueAt(o: unknown, pointer: string): unknown {
  let at: unknown = o;
  for (const key of pointer.split("/").slice(1)) {
    if (typeof at !== "object" || at === null) return undefined;
    at = (at as Record<string, unknown>)[key];
  }
  return at;
}
