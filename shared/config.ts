// Strict parsers for numbers and switches in the environment, shared by every
// entry point (functions, forwarder, Lambda). Strict on purpose: a typo in a
// setting must stop the process at start with a message naming the variable
// and what it held, not run with a silently different value. Unset or blank
// means "use the fallback".

import type { ApiRate } from "./kube/rate-limiter.ts";
import { type RetryInterval, upstreamRetryInterval } from "./kube/retry-interval.ts";

/** process.env or a test's plain object. */
export type Env = Readonly<Record<string, string | undefined>>;

/** The trimmed value, or undefined when unset or blank (environment values often carry a newline). */
function setting(env: Env, key: string): string | undefined {
  const raw = env[key]?.trim();
  return raw === undefined || raw === "" ? undefined : raw;
}

/** An inclusive range an integer setting must fall in. */
export interface IntegerRange {
  min: number;
  max: number;
}

/**
 * A whole number in decimal (a sign allowed), or the fallback when unset.
 * With a range, values outside it are refused and the message names the range.
 */
export function integerFromEnv(env: Env, key: string, fallback: number, range?: IntegerRange): number {
  const raw = setting(env, key);
  if (raw === undefined) return fallback;
  // `+ 0` turns "-0" into 0, so a range starting at 0 does not let a negative zero through.
  const value = Number(raw) + 0;
  const integer = /^-?\d+$/.test(raw) && Number.isSafeInteger(value);
  if (range === undefined) {
    if (!integer) throw new Error(`${key} must be an integer, got ${JSON.stringify(raw)}`);
  } else if (!integer || value < range.min || value > range.max) {
    throw new Error(
      `${key} must be an integer from ${range.min} to ${range.max}, got ${JSON.stringify(raw)}`,
    );
  }
  return value;
}

/** A whole number above zero (timeouts, sizes), or the fallback when unset. */
export function positiveIntegerFromEnv(env: Env, key: string, fallback: number): number {
  const raw = setting(env, key);
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(value) || value <= 0)
    throw new Error(`${key} must be a positive integer, got ${JSON.stringify(raw)}`);
  return value;
}

/** true/1 or false/0 in any case, or the fallback when unset; anything else ("yes", "on") is refused. */
export function booleanFromEnv(env: Env, key: string, fallback: boolean): boolean {
  const raw = setting(env, key);
  if (raw === undefined) return fallback;
  const lower = raw.toLowerCase();
  if (lower === "true" || lower === "1") return true;
  if (lower === "false" || lower === "0") return false;
  throw new Error(`${key} must be true or false, got ${JSON.stringify(raw)}`);
}

/** A CSI driver name as CSIDriver and StorageClass.provisioner accept it. */
const DRIVER_NAME = /^[a-zA-Z0-9]([-a-zA-Z0-9_.]{0,61}[a-zA-Z0-9])?$/;

/** A comma-separated list of CSI driver names (blanks skipped); a malformed name stops the process. */
export function driverNamesFromEnv(env: Env, key: string): Set<string> {
  const names = (env[key] ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "");
  for (const name of names) {
    if (!DRIVER_NAME.test(name))
      throw new Error(`${key}: ${JSON.stringify(name)} is not a valid provisioner (CSI driver) name`);
  }
  return new Set(names);
}

/** A decimal number (no exponent, no hex), or the fallback when unset; outside the range is refused. */
export function decimalFromEnv(env: Env, key: string, fallback: number, range: IntegerRange): number {
  const raw = setting(env, key);
  if (raw === undefined) return fallback;
  const value = Number(raw) + 0;
  if (!/^\d+(\.\d+)?$/.test(raw) || !Number.isFinite(value) || value < range.min || value > range.max)
    throw new Error(`${key} must be a number from ${range.min} to ${range.max}, got ${JSON.stringify(raw)}`);
  return value;
}

/** The knobs every controller function reads the same way: upstream's sidecar flags, as environment variables. */
export interface ControllerKnobs {
  /** WORKERS (--worker-threads / --workers): keys synced at once in one process; undefined: no cap. */
  workers: number | undefined;
  /** RETRY_INTERVAL_START_SECONDS / RETRY_INTERVAL_MAX_SECONDS (--retry-interval-start / -max). */
  retryInterval: RetryInterval;
  /** KUBE_API_QPS / KUBE_API_BURST (--kube-api-qps / -burst); undefined: no cap (our default). */
  kubeApiRate: ApiRate | undefined;
}

/** What a function's upstream defaults to where it differs between functions. */
export interface KnobDefaults {
  /** The upstream component's worker count; undefined: no cap (kube-controller-manager's loops have no flag). */
  workers?: number;
}

/** Upstream's --kube-api-burst default, used when only KUBE_API_QPS is set. */
export const defaultKubeApiBurst = 10;

const dayInSeconds = 24 * 3600;

/** WORKERS, or the function's upstream default; undefined: no cap. */
export function workersFromEnv(env: Env, fallback: number | undefined): number | undefined {
  if (setting(env, "WORKERS") === undefined) return fallback;
  return integerFromEnv(env, "WORKERS", 1, { min: 1, max: 10_000 });
}

/** RETRY_INTERVAL_START_SECONDS / RETRY_INTERVAL_MAX_SECONDS, upstream's 1 s and 5 min by default. */
export function retryIntervalFromEnv(env: Env): RetryInterval {
  const startSeconds = integerFromEnv(
    env,
    "RETRY_INTERVAL_START_SECONDS",
    upstreamRetryInterval.startSeconds,
    {
      min: 1,
      max: dayInSeconds,
    },
  );
  const maxSeconds = integerFromEnv(env, "RETRY_INTERVAL_MAX_SECONDS", upstreamRetryInterval.maxSeconds, {
    min: 1,
    max: 7 * dayInSeconds,
  });
  if (maxSeconds < startSeconds)
    throw new Error(
      `RETRY_INTERVAL_MAX_SECONDS (${maxSeconds}) must not be less than RETRY_INTERVAL_START_SECONDS (${startSeconds})`,
    );
  return { startSeconds, maxSeconds };
}

/** KUBE_API_QPS / KUBE_API_BURST; unset or 0 QPS: no cap. */
export function kubeApiRateFromEnv(env: Env): ApiRate | undefined {
  const qps = decimalFromEnv(env, "KUBE_API_QPS", 0, { min: 0, max: 1_000_000 });
  const burstSet = setting(env, "KUBE_API_BURST") !== undefined;
  const burst = integerFromEnv(env, "KUBE_API_BURST", defaultKubeApiBurst, { min: 1, max: 1_000_000 });
  if (qps === 0 && burstSet)
    throw new Error("KUBE_API_BURST needs KUBE_API_QPS above 0 (KUBE_API_QPS unset or 0 means no cap)");
  return qps > 0 ? { qps, burst } : undefined;
}

/** The shared knobs from the environment; a bad value stops the process at start, naming the variable. */
export function controllerKnobsFromEnv(env: Env, defaults: KnobDefaults = {}): ControllerKnobs {
  return {
    workers: workersFromEnv(env, defaults.workers),
    retryInterval: retryIntervalFromEnv(env),
    kubeApiRate: kubeApiRateFromEnv(env),
  };
}
