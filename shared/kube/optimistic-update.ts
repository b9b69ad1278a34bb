// Read → decide → conditional write, the only way this project changes an
// object. The write carries the resourceVersion that was read, so the API
// server rejects it with 409 Conflict if anyone wrote in between; then we read
// again and decide again (never re-send the stale decision). Conflicts are
// bounded: a hot object turns into an error the caller reports as "retry later".

import { setTimeout as delay } from "node:timers/promises";
import { isDeepStrictEqual } from "node:util";
import { backoffDelayMs, type RetryOptions, retrying } from "../retry.ts";
import { apiStatusOf, isConflict, lostToConcurrentWriter } from "./api-errors.ts";
import type { KubeJsonClient } from "./json-client.ts";
import type { ResourceDescriptor } from "./resources.ts";
import type { KubeObject } from "./types.ts";

/**
 * What updateWithRetry needs of an object: a kind and name for messages and the
 * resourceVersion for the precondition. The plain-JSON KubeObject fits (and so
 * would client-node's model classes).
 */
export interface VersionedObject {
  kind?: string;
  metadata?: { name?: string; resourceVersion?: string };
}

/** Returns the desired object, or undefined for "nothing to change". May edit its argument (a private copy) in place. */
export type Mutate<T> = (current: T) => T | undefined;

export interface UpdateWithRetryOptions<T> extends RetryOptions {
  read: () => Promise<T>;
  mutate: Mutate<T>;
  write: (desired: T) => Promise<T>;
}

export interface UpdateResult<T> {
  /** What the server returned from the write, or the object as read when nothing changed. */
  object: T;
  written: boolean;
  attempts: number;
}

/**
 * Every attempt lost a resourceVersion race. Carries `code` 409 and the last
 * Status `body`, so `isConflict` and `statusCodeOf` classify it like the
 * server's own answer.
 */
export class ConflictRetriesExhaustedError extends Error {
  override name = "ConflictRetriesExhaustedError";
  readonly code = 409;
  readonly body: unknown;
  readonly attempts: number;
  constructor(attempts: number, lastError: unknown) {
    const message = apiStatusOf(lastError)?.message ?? "resourceVersion conflict";
    super(`gave up after ${attempts} conflicting attempts: ${message}`, { cause: lastError });
    this.attempts = attempts;
    this.body = (lastError as { body?: unknown } | null)?.body ?? { reason: "Conflict", code: 409 };
  }
}

/** A write without a resourceVersion is a blind overwrite; refuse rather than break invariant 2. */
export class UnconditionalWriteError extends Error {
  override name = "UnconditionalWriteError";
}

// Compare what would go over the wire: mutate may leave keys set to undefined
// (and a client-node model would carry class instances and Date fields); the
// JSON form ignores those differences.
function wireForm(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value));
}

export interface LostRaceRetryOptions extends RetryOptions {
  /** Which errors mean "another writer moved first". Default: lostToConcurrentWriter (409 or 404). */
  lostRace?: (err: unknown) => boolean;
}

/**
 * Runs a whole read → decide → write pass again, on fresh state, while its
 * writes lose to another writer; gives up with ConflictRetriesExhaustedError.
 * The controllers' syncs use it so a lost race is never answered as an error.
 */
export async function retryWhileLosingRaces<T>(
  work: (attempt: number) => Promise<T>,
  options: LostRaceRetryOptions = {},
): Promise<T> {
  const maxAttempts = Math.max(1, Math.floor(options.maxAttempts ?? 5));
  const lostRace = options.lostRace ?? lostToConcurrentWriter;
  try {
    return await retrying(work, { baseDelayMs: 40, ...options, maxAttempts, retryable: lostRace });
  } catch (err) {
    // Only a lost race can be the last error of all attempts; anything else came through at once.
    if (lostRace(err)) throw new ConflictRetriesExhaustedError(maxAttempts, err);
    throw err;
  }
}

export async function updateWithRetry<T extends VersionedObject>(
  options: UpdateWithRetryOptions<T>,
): Promise<UpdateResult<T>> {
  const maxAttempts = Math.max(1, Math.floor(options.maxAttempts ?? 5));
  const sleep = options.sleep ?? ((ms: number) => delay(ms).then(() => undefined));
  let lastConflict: unknown;
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    if (attempt > 1) await sleep(backoffDelayMs(attempt - 1, options));
    const current = await options.read();
    const resourceVersion = current.metadata?.resourceVersion;
    const desired = options.mutate(structuredClone(current));
    if (desired === undefined || isDeepStrictEqual(wireForm(desired), wireForm(current))) {
      return { object: current, written: false, attempts: attempt };
    }
    if (!resourceVersion) {
      throw new UnconditionalWriteError(
        `refusing to write ${current.kind ?? "object"} ${current.metadata?.name ?? ""}: the read copy has no resourceVersion`,
      );
    }
    // The precondition is what was read, whatever mutate did to metadata.
    desired.metadata = { ...desired.metadata, resourceVersion };
    try {
      const object = await options.write(desired);
      return { object, written: true, attempts: attempt };
    } catch (err) {
      if (!isConflict(err)) throw err;
      lastConflict = err;
    }
  }
  throw new ConflictRetriesExhaustedError(maxAttempts, lastConflict);
}

// The one wrapper the controllers use: read and write plain JSON through
// KubeJsonClient, so fields this code does not know (a newer API server's)
// survive the round trip. Spec writes go to the main resource, status writes to
// the /status subresource (the server ignores status on the one and everything
// but status on the other).

export interface ObjectKey {
  name: string;
  /** Required for namespaced kinds, absent for cluster-scoped ones. */
  namespace?: string;
}

export interface UpdateObjectOptions extends RetryOptions {
  /** Write to /status instead of the main resource. */
  subresource?: "status";
}

export function updateObject<T extends KubeObject = KubeObject>(
  kube: KubeJsonClient,
  r: ResourceDescriptor,
  key: ObjectKey,
  mutate: Mutate<T>,
  options: UpdateObjectOptions = {},
): Promise<UpdateResult<T>> {
  const { subresource, ...retry } = options;
  return updateWithRetry<T>({
    ...retry,
    read: () => kube.get<T>(r, key.name, key.namespace),
    mutate,
    write: (desired) => {
      // The write goes where the read came from; a renamed object is a bug in mutate.
      const { name, namespace } = desired.metadata;
      if (name !== key.name || namespace !== key.namespace) {
        throw new TypeError(
          `mutate changed the identity of ${r.kind} ${key.namespace ? `${key.namespace}/` : ""}${key.name} ` +
            `to ${namespace ? `${namespace}/` : ""}${name}`,
        );
      }
      return kube.replace<T>(r, desired, subresource ? { subresource } : {});
    },
  });
}
