// Trying an operation again after a failure that may pass: how long to wait
// (exponential, capped, jittered) and the loop itself. Each caller says which
// errors are worth another attempt: lost write races (shared/kube), a CSI
// driver's transient answers (shared/csi), an unpublish that must not be
// dropped (the attacher).

import { setTimeout as delay } from "node:timers/promises";

export interface RetryOptions {
  /** Total attempts, at least 1. Default 5. */
  maxAttempts?: number;
  /** First backoff; doubles per attempt, jittered. Default 25 ms. */
  baseDelayMs?: number;
  /** Cap for one backoff. Default 1000 ms. */
  maxDelayMs?: number;
  sleep?: (ms: number) => Promise<void>;
  /** Source of jitter in [0, 1). Default Math.random. */
  random?: () => number;
}

/** The wait before attempt `attempt + 1`: between half and all of base·2^(attempt-1), capped. */
export function backoffDelayMs(attempt: number, options: RetryOptions = {}): number {
  const base = options.baseDelayMs ?? 25;
  const cap = options.maxDelayMs ?? 1000;
  const random = options.random ?? Math.random;
  const ceiling = Math.min(cap, base * 2 ** Math.max(0, attempt - 1));
  // Equal jitter: at least half the ceiling, so retries spread out but never collapse to zero.
  return ceiling / 2 + random() * (ceiling / 2);
}

/**
 * Runs `work` until it succeeds. An error `retryable` refuses is thrown at
 * once; when the attempts run out, the last error is thrown as it is (the
 * caller knows what to call it).
 */
export async function retrying<T>(
  work: (attempt: number) => Promise<T>,
  options: RetryOptions & { retryable: (err: unknown) => boolean },
): Promise<T> {
  const maxAttempts = Math.max(1, Math.floor(options.maxAttempts ?? 5));
  const sleep = options.sleep ?? ((ms: number) => delay(ms).then(() => undefined));
  for (let attempt = 1; ; attempt++) {
    try {
      return await work(attempt);
    } catch (err) {
      if (attempt >= maxAttempts || !options.retryable(err)) throw err;
    }
    await sleep(backoffDelayMs(attempt, options));
  }
}
