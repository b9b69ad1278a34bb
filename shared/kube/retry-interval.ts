// The per-object retry backoff the CSI sidecars share (--retry-interval-start,
// --retry-interval-max): the first retry after `start`, doubling per failure,
// never more than `max`, retried forever. Ours is written into the object
// (a retry-after annotation), so it is vocabulary every controller reads the same.

export interface RetryInterval {
  /** --retry-interval-start, seconds (upstream 1 s). */
  startSeconds: number;
  /** --retry-interval-max, seconds (upstream 5 m). */
  maxSeconds: number;
}

export const upstreamRetryInterval: RetryInterval = { startSeconds: 1, maxSeconds: 300 };

/** The wait after `failures` consecutive failures (1 = the first): start·2^(failures-1), capped at max. */
export function retryDelaySeconds(failures: number, interval: RetryInterval = upstreamRetryInterval): number {
  return Math.min(interval.maxSeconds, interval.startSeconds * 2 ** Math.max(0, failures - 1));
}
