// Read → decide → conditional write, the only way this project changes an
// object. The write carries the resourceVersion that was read, so the API
// server rejects it with 409 Conflict if anyone wrote in between; then we read
// again and decide again (never re-send the stale decision). Conflicts are
// bounded: a hot object turns into an error the caller reports as "retry later".

import { setTimeout as delay } from "node:timers/promises";
import { isDeepStrictEqual } from "node:util";
import type {
  CoreV1Api,
  KubernetesObject,
  StorageV1Api,
  V1PersistentVolume,
  V1PersistentVolumeClaim,
  V1VolumeAttachment,
} from "@kubernetes/client-node";
import { apiStatusOf, isConflict } from "./api-errors.ts";

/** Returns the desired object, or undefined for "nothing to change". May edit its argument (a private copy) in place. */
export type Mutate<T> = (current: T) => T | undefined;

export interface RetryOptions {
  /** Total attempts (reads + writes pairs), at least 1. Default 5. */
  maxAttempts?: number;
  /** First backoff after a conflict; doubles per attempt, jittered. Default 25 ms. */
  baseDelayMs?: number;
  /** Cap for one backoff. Default 1000 ms. */
  maxDelayMs?: number;
  sleep?: (ms: number) => Promise<void>;
  /** Source of jitter in [0, 1). Default Math.random. */
  random?: () => number;
}

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

// Compare what would go over the wire: client-node reads give class instances
// with Date fields, mutate may return plain objects; JSON form ignores both
// differences (and keys set to undefined).
function wireForm(value: unknown): unknown {
  return JSON.parse(JSON.stringify(value));
}

export function backoffDelayMs(attempt: number, options: RetryOptions = {}): number {
  const base = options.baseDelayMs ?? 25;
  const cap = options.maxDelayMs ?? 1000;
  const random = options.random ?? Math.random;
  const ceiling = Math.min(cap, base * 2 ** Math.max(0, attempt - 1));
  // Equal jitter: at least half the ceiling, so retries spread out but never collapse to zero.
  return ceiling / 2 + random() * (ceiling / 2);
}

export async function updateWithRetry<T extends KubernetesObject>(
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

// Thin typed wrappers for the objects the controllers write. Spec writes go to
// the main resource, status writes to the /status subresource (the server
// ignores status on the one and everything but status on the other).

export interface ObjectKey {
  namespace: string;
  name: string;
}

export function updatePersistentVolumeClaim(
  core: CoreV1Api,
  key: ObjectKey,
  mutate: Mutate<V1PersistentVolumeClaim>,
  options: RetryOptions = {},
): Promise<UpdateResult<V1PersistentVolumeClaim>> {
  return updateWithRetry({
    ...options,
    read: () => core.readNamespacedPersistentVolumeClaim(key),
    mutate,
    write: (body) => core.replaceNamespacedPersistentVolumeClaim({ ...key, body }),
  });
}

export function updatePersistentVolumeClaimStatus(
  core: CoreV1Api,
  key: ObjectKey,
  mutate: Mutate<V1PersistentVolumeClaim>,
  options: RetryOptions = {},
): Promise<UpdateResult<V1PersistentVolumeClaim>> {
  return updateWithRetry({
    ...options,
    read: () => core.readNamespacedPersistentVolumeClaim(key),
    mutate,
    write: (body) => core.replaceNamespacedPersistentVolumeClaimStatus({ ...key, body }),
  });
}

export function updatePersistentVolume(
  core: CoreV1Api,
  name: string,
  mutate: Mutate<V1PersistentVolume>,
  options: RetryOptions = {},
): Promise<UpdateResult<V1PersistentVolume>> {
  return updateWithRetry({
    ...options,
    read: () => core.readPersistentVolume({ name }),
    mutate,
    write: (body) => core.replacePersistentVolume({ name, body }),
  });
}

export function updatePersistentVolumeStatus(
  core: CoreV1Api,
  name: string,
  mutate: Mutate<V1PersistentVolume>,
  options: RetryOptions = {},
): Promise<UpdateResult<V1PersistentVolume>> {
  return updateWithRetry({
    ...options,
    read: () => core.readPersistentVolume({ name }),
    mutate,
    write: (body) => core.replacePersistentVolumeStatus({ name, body }),
  });
}

export function updateVolumeAttachment(
  storage: StorageV1Api,
  name: string,
  mutate: Mutate<V1VolumeAttachment>,
  options: RetryOptions = {},
): Promise<UpdateResult<V1VolumeAttachment>> {
  return updateWithRetry({
    ...options,
    read: () => storage.readVolumeAttachment({ name }),
    mutate,
    write: (body) => storage.replaceVolumeAttachment({ name, body }),
  });
}

export function updateVolumeAttachmentStatus(
  storage: StorageV1Api,
  name: string,
  mutate: Mutate<V1VolumeAttachment>,
  options: RetryOptions = {},
): Promise<UpdateResult<V1VolumeAttachment>> {
  return updateWithRetry({
    ...options,
    read: () => storage.readVolumeAttachment({ name }),
    mutate,
    write: (body) => storage.replaceVolumeAttachmentStatus({ name, body }),
  });
}
