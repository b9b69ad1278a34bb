// The forwarder's configuration from the environment (what `npm run
// forwarder` and a container read). Every variable is checked up front: a
// typo should stop the process at start, not surface as odd delivery later.

import { booleanFromEnv, type Env, integerFromEnv } from "../config.ts";
import {
  DEFAULT_CONCURRENCY,
  DEFAULT_MAX_BATCH,
  DEFAULT_MAX_QUEUE,
  DEFAULT_REQUEST_TIMEOUT_MS,
  DEFAULT_SHUTDOWN_GRACE_MS,
} from "./forwarder.ts";
import { DEFAULT_RETRY, type RetryOptions } from "./retry-policy.ts";
import { parseRoutes, type Route } from "./routes.ts";

export interface ForwarderEnvConfig {
  routes: Route[];
  concurrency: number;
  maxBatch: number;
  maxQueue: number;
  authToken?: string;
  requestTimeoutMs: number;
  retry: RetryOptions;
  replayExisting: boolean;
  shutdownGraceMs: number;
  /** Port of /healthz, /readyz, /metrics; 0 picks a free one. */
  port: number;
  /** Listen address; undefined = all interfaces. */
  host?: string;
}

export class ForwarderConfigError extends Error {
  override name = "ForwarderConfigError";
}

/** Reads FORWARDER_* plus PORT, HOST and SHUTDOWN_GRACE_MS (KUBECONFIG is loadKubeConfig's). */
export function forwarderConfigFromEnv(env: Env = process.env): ForwarderEnvConfig {
  const routesText = env.FORWARDER_ROUTES?.trim();
  if (!routesText) {
    throw new ForwarderConfigError(
      "FORWARDER_ROUTES is not set; give the function URLs and their kinds, e.g. " +
        "http://127.0.0.1:8081=PersistentVolumeClaim,PersistentVolume;http://127.0.0.1:8082=Pod,Node",
    );
  }
  const int = (name: string, fallback: number, min: number, max: number) =>
    setting(() => integerFromEnv(env, name, fallback, { min, max }));
  const config: ForwarderEnvConfig = {
    routes: parseRoutes(routesText),
    concurrency: int("FORWARDER_CONCURRENCY", DEFAULT_CONCURRENCY, 1, 1024),
    maxBatch: int("FORWARDER_MAX_BATCH", DEFAULT_MAX_BATCH, 1, 1000),
    maxQueue: int("FORWARDER_MAX_QUEUE", DEFAULT_MAX_QUEUE, 1, 10_000_000),
    requestTimeoutMs: int("FORWARDER_TIMEOUT_MS", DEFAULT_REQUEST_TIMEOUT_MS, 1, 3_600_000),
    retry: {
      baseMs: int("FORWARDER_RETRY_BASE_MS", DEFAULT_RETRY.baseMs, 1, 3_600_000),
      maxMs: int("FORWARDER_RETRY_MAX_MS", DEFAULT_RETRY.maxMs, 1, 3_600_000),
      maxAttempts: int("FORWARDER_MAX_ATTEMPTS", DEFAULT_RETRY.maxAttempts, 0, 1_000_000),
      maxServerErrorAttempts: int(
        "FORWARDER_MAX_SERVER_ERROR_ATTEMPTS",
        DEFAULT_RETRY.maxServerErrorAttempts,
        1,
        1_000_000,
      ),
      maxRetryAfterMs: DEFAULT_RETRY.maxRetryAfterMs,
    },
    replayExisting: setting(() => booleanFromEnv(env, "FORWARDER_REPLAY_EXISTING", true)),
    shutdownGraceMs: int("SHUTDOWN_GRACE_MS", DEFAULT_SHUTDOWN_GRACE_MS, 0, 3_600_000),
    port: int("PORT", 0, 0, 65535),
  };
  const token = env.FORWARDER_AUTH_TOKEN?.trim();
  if (token) config.authToken = token;
  const host = env.HOST?.trim();
  if (host) config.host = host;
  return config;
}

/**
 * Runs a shared parser (shared/config.ts) with its message, thrown as this
 * module's error class so callers can still tell a configuration error.
 */
function setting<T>(read: () => T): T {
  try {
    return read();
  } catch (err) {
    throw new ForwarderConfigError(err instanceof Error ? err.message : String(err));
  }
}
