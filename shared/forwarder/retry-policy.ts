// What an HTTP answer (or a transport error) means for a delivery, and how
// long to wait before the next attempt.
//
// Deviations from ApiServerSource, on purpose:
// - 500 is retried, but only a few times (maxServerErrorAttempts). Our own
//   functions answer 503 for "try later" and 500 for an unexpected failure
//   (DESIGN.md), which is likely a bug that retrying will not fix, while
//   serverless platforms (Lambda function URLs, the Knative activator) also
//   answer 500/502 for a cold start gone wrong or a crashed instance, which a
//   retry does fix. A handful of attempts covers the second without letting
//   the first hold an object's ordering slot for ever.
// - 429, 502, 503, 504 and transport errors are retried until delivered (or
//   maxAttempts, 0 = no limit): at-least-once while the forwarder runs.
//   ApiServerSource gives up after 5 retries.
// - 404 and 413 are not retried (ApiServerSource retries them because a
//   Knative route may not be programmed yet); for a plain URL they are
//   permanent. Every other 4xx and 3xx (redirects are not followed) is
//   logged and dropped: sending the same event again gets the same answer.
import { backoffDelayMs } from "../retry.ts";

export interface RetryOptions {
  /** First backoff, ms. Default 100. */
  baseMs: number;
  /** Backoff ceiling, ms. Default 30 s. */
  maxMs: number;
  /** Attempts per delivery for transient failures; 0 = until delivered. Default 0. */
  maxAttempts: number;
  /** Attempts per delivery that may end in a non-transient 5xx (500, 501, ...). Default 5. */
  maxServerErrorAttempts: number;
  /** Longest Retry-After honoured, ms; longer ones are cut to this. Default 5 min. */
  maxRetryAfterMs: number;
}

export const DEFAULT_RETRY: RetryOptions = {
  baseMs: 100,
  maxMs: 30_000,
  maxAttempts: 0,
  maxServerErrorAttempts: 5,
  maxRetryAfterMs: 300_000,
};

/**
 * delivered: 2xx. transient: try again until delivered. server-error: try
 * again a few times. rejected: the receiver refused this event; do not retry.
 */
export type StatusClass = "delivered" | "transient" | "server-error" | "rejected";

const TRANSIENT_STATUS = new Set([429, 502, 503, 504]);

export function classifyStatus(status: number): StatusClass {
  if (status >= 200 && status < 300) return "delivered";
  if (TRANSIENT_STATUS.has(status)) return "transient";
  if (status >= 500 && status < 600) return "server-error";
  return "rejected";
}

/**
 * Backoff before attempt `attempt + 1` after `attempt` failed attempts:
 * exponential from baseMs, capped at maxMs, with "equal jitter" (half fixed,
 * half random) so concurrent retries spread out but never retry sooner than
 * half the nominal delay. A Retry-After is a floor: the receiver said when it
 * expects to be ready.
 */
export function retryDelayMs(
  attempt: number,
  options: RetryOptions,
  retryAfterMs?: number,
  random: () => number = Math.random,
): number {
  const jittered = backoffDelayMs(attempt, {
    baseDelayMs: options.baseMs,
    maxDelayMs: options.maxMs,
    random,
  });
  if (retryAfterMs === undefined) return Math.round(jittered);
  return Math.round(Math.max(jittered, Math.min(retryAfterMs, options.maxRetryAfterMs)));
}

/** Retry-After as delta-seconds or an HTTP-date, in ms from `now`; undefined when absent or invalid. */
export function parseRetryAfter(
  value: string | string[] | undefined,
  now: number = Date.now(),
): number | undefined {
  const raw = (Array.isArray(value) ? value[0] : value)?.trim();
  if (raw === undefined || raw === "") return undefined;
  if (/^\d+$/.test(raw)) return Number(raw) * 1000;
  // HTTP-dates start with the day name; Date.parse alone would take "-1" as a year.
  if (!/^[A-Za-z]{3}/.test(raw)) return undefined;
  const date = Date.parse(raw);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - now);
}
