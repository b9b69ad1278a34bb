// The per-attachment retry backoff, kept on the VolumeAttachment so it
// outlives any process: upstream's work queue backs off 1 s doubling to 5 min
// per object, forever. Without it, every attachError write (itself a watch
// event) would trigger the next ControllerPublish at once: a hot loop. The
// annotations are written before the error goes to status, so the event of
// either write already finds the attachment backing off.

import { retryDelaySeconds as delayAfter, type RetryInterval } from "../kube/retry-interval.ts";
import { rfc3339 } from "../kube/time.ts";
import type { VolumeAttachment } from "../kube/types.ts";
import {
  annAttachFailures,
  annAttachRetryAfter,
  annDetachFailures,
  annDetachRetryAfter,
  backoffAnnotations,
  retryIntervalMaxSeconds,
  retryIntervalStartSeconds,
} from "./constants.ts";

export type Operation = "attach" | "detach";

function keysOf(op: Operation): { failures: string; retryAfter: string } {
  return op === "attach"
    ? { failures: annAttachFailures, retryAfter: annAttachRetryAfter }
    : { failures: annDetachFailures, retryAfter: annDetachRetryAfter };
}

/** Upstream's defaults; RETRY_INTERVAL_START_SECONDS / RETRY_INTERVAL_MAX_SECONDS change them. */
const defaultInterval: RetryInterval = {
  startSeconds: retryIntervalStartSeconds,
  maxSeconds: retryIntervalMaxSeconds,
};

export function retryDelaySeconds(failures: number, interval: RetryInterval = defaultInterval): number {
  return delayAfter(failures, interval);
}

/** Consecutive failures of this operation recorded so far. */
function failuresSoFar(va: VolumeAttachment, op: Operation): number {
  const n = Number(va.metadata.annotations?.[keysOf(op).failures] ?? "0");
  return Number.isSafeInteger(n) && n > 0 ? n : 0;
}

/** The moment before which the operation is not retried, or undefined when it may run now. */
export function backoffUntil(va: VolumeAttachment, op: Operation, now: Date): string | undefined {
  const until = va.metadata.annotations?.[keysOf(op).retryAfter];
  if (until === undefined) return undefined;
  const at = Date.parse(until);
  return Number.isFinite(at) && at > now.getTime() ? until : undefined;
}

/** The VA with one more failure recorded, and how long to wait before the next try. */
export function withFailure(
  va: VolumeAttachment,
  op: Operation,
  now: Date,
  interval: RetryInterval = defaultInterval,
): { va: VolumeAttachment; delaySeconds: number } {
  const keys = keysOf(op);
  const failures = failuresSoFar(va, op) + 1;
  const delaySeconds = retryDelaySeconds(failures, interval);
  // Rounded up to the whole second the annotation can hold, so the wait is never shorter.
  const retryAfter = rfc3339(new Date(Math.ceil((now.getTime() + delaySeconds * 1000) / 1000) * 1000));
  const annotations = {
    ...va.metadata.annotations,
    [keys.failures]: String(failures),
    [keys.retryAfter]: retryAfter,
  };
  return { va: { ...va, metadata: { ...va.metadata, annotations } }, delaySeconds };
}

/** Backoff annotations present on the VA (of either operation). */
export function backoffKeysOn(va: VolumeAttachment): string[] {
  const a = va.metadata.annotations ?? {};
  return backoffAnnotations.filter((k) => a[k] !== undefined);
}

/** The VA without any backoff: the operation succeeded. */
export function withoutBackoff(va: VolumeAttachment): VolumeAttachment {
  const keys = backoffKeysOn(va);
  if (keys.length === 0) return va;
  const annotations = { ...va.metadata.annotations };
  for (const k of keys) delete annotations[k];
  return { ...va, metadata: { ...va.metadata, annotations } };
}
