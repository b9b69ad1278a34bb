// Turns whatever a function threw into the HTTP answer its sender acts on.
//
// The status code is a retry instruction, not just a description: Knative
// ApiServerSource (and most CloudEvent senders) redeliver on 429/502/503/504
// and transport errors but drop the event on 500. So:
//
//   - bad input (an error carrying `status` 400..499, e.g. EnvelopeError,
//     read-body.ts's 413/415) -> that 4xx, `{error: message}`: resending the
//     same bytes cannot help.
//   - transient trouble -> 503 + Retry-After, so the event is redelivered:
//     RetryLaterError, Kubernetes API 429/5xx/timeouts/connection failures,
//     a resourceVersion conflict that survived the bounded retries, and CSI
//     gRPC UNAVAILABLE / DEADLINE_EXCEEDED / RESOURCE_EXHAUSTED / ABORTED.
//     An API server 500 becomes our 503 on purpose: it is the server's
//     trouble (etcd hiccup, restart), and passing 500 on would drop the event.
//   - anything else -> 500 `{error: "internal error"}`: a bug or a
//     misconfiguration (RBAC 403, 422 from a bad write) that a retry will not
//     fix. Detail goes to the log, never into the body. Lost events are
//     repaired by the periodic resync.
//
// Errors from the Kubernetes API carry a numeric `code`, never `status`, so
// an API 404/403/422 that escapes a handler is not mistaken for bad input.

import { ApiException } from "@kubernetes/client-node";
import { isRecord } from "../is-record.ts";
import { isConflict, isTransient, retryAfterSeconds } from "../kube/api-errors.ts";
import { ConflictRetriesExhaustedError } from "../kube/optimistic-update.ts";

/** Retry-After when nothing better is known: short, senders back off on their own. */
export const DEFAULT_RETRY_AFTER_SECONDS = 1;
/** Upper bound, so a server asking for minutes does not park the event for long. */
export const MAX_RETRY_AFTER_SECONDS = 60;

/** Throw to answer 503 + Retry-After: "not now, send this event again". */
export class RetryLaterError extends Error {
  override name = "RetryLaterError";
  readonly reason: string;
  readonly retryAfterSeconds: number | undefined;
  constructor(reason: string, retryAfterSeconds?: number, options?: { cause?: unknown }) {
    super(reason, options);
    this.reason = reason;
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/** Throw to reject the request's input with a 4xx and a message meant for the sender. */
export class BadRequestError extends Error {
  override name = "BadRequestError";
  readonly status: number;
  constructor(message: string, status = 400) {
    super(message);
    this.status = status >= 400 && status <= 499 ? status : 400;
  }
}

type ErrorClass = "bad_request" | "transient" | "internal";

interface ErrorAnswer {
  class: ErrorClass;
  status: number;
  body: { error: string };
  /** Set for 503 answers; sent as the Retry-After header. */
  retryAfterSeconds?: number;
}

// CSI (gRPC) status codes after which the same call may succeed: DEADLINE_EXCEEDED 4,
// RESOURCE_EXHAUSTED 8, ABORTED 10 (CSI: "operation pending for volume"), UNAVAILABLE 14.
const TRANSIENT_GRPC_CODES = new Set([4, 8, 10, 14]);

/** A grpc-js ServiceError: numeric `code` 0..16 with `details` and `metadata`. */
function isTransientGrpcError(err: unknown): boolean {
  return (
    isRecord(err) &&
    typeof err.code === "number" &&
    TRANSIENT_GRPC_CODES.has(err.code) &&
    typeof err.details === "string" &&
    isRecord(err.metadata)
  );
}

function clientStatusOf(err: unknown): number | undefined {
  if (!isRecord(err) || err instanceof ApiException) return undefined;
  const status = err.status ?? err.statusCode;
  return typeof status === "number" && Number.isInteger(status) && status >= 400 && status <= 499
    ? status
    : undefined;
}

function clampRetryAfter(seconds: number | undefined): number {
  if (seconds === undefined || !Number.isFinite(seconds)) return DEFAULT_RETRY_AFTER_SECONDS;
  return Math.min(MAX_RETRY_AFTER_SECONDS, Math.max(DEFAULT_RETRY_AFTER_SECONDS, Math.ceil(seconds)));
}

function retry(message: string, seconds: number | undefined): ErrorAnswer {
  const retryAfter = clampRetryAfter(seconds);
  return { class: "transient", status: 503, body: { error: message }, retryAfterSeconds: retryAfter };
}

export function classifyError(err: unknown): ErrorAnswer {
  if (err instanceof RetryLaterError) return retry(err.reason, err.retryAfterSeconds);
  if (err instanceof ConflictRetriesExhaustedError || (err instanceof ApiException && isConflict(err))) {
    return retry("conflicting concurrent updates, retry later", undefined);
  }
  const clientStatus = clientStatusOf(err);
  if (clientStatus !== undefined) {
    const message = err instanceof Error && err.message !== "" ? err.message : "bad request";
    return { class: "bad_request", status: clientStatus, body: { error: message } };
  }
  if (isTransientGrpcError(err))
    return retry("storage driver temporarily unavailable, retry later", undefined);
  if (isTransient(err)) return retry("upstream temporarily unavailable, retry later", retryAfterSeconds(err));
  return { class: "internal", status: 500, body: { error: "internal error" } };
}
