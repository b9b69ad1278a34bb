// Classifies failures of Kubernetes API calls, whether they come back as an
// HTTP status (client-node's ApiException: numeric `code`, `body` that is the
// raw response text or an already parsed object, lower-cased `headers`) or as
// a network failure thrown by fetch (TypeError "fetch failed" whose `cause`
// chain carries a Node or undici error code).
//
// Everything takes `unknown` because callers catch arbitrary throwables.
import { isRecord } from "../is-record.ts";

/** The parts of a metav1.Status we care about. */
export interface ApiStatus {
  code?: number;
  reason?: string;
  message?: string;
  details?: { retryAfterSeconds?: number; name?: string; kind?: string };
}

/** Parses the metav1.Status carried by an API error, if any. */
export function apiStatusOf(err: unknown): ApiStatus | undefined {
  if (!isRecord(err)) return undefined;
  let body = err.body;
  if (typeof body === "string") {
    try {
      body = JSON.parse(body);
    } catch {
      return undefined;
    }
  }
  if (!isRecord(body)) return undefined;
  const status: ApiStatus = {};
  if (typeof body.code === "number") status.code = body.code;
  if (typeof body.reason === "string") status.reason = body.reason;
  if (typeof body.message === "string") status.message = body.message;
  if (isRecord(body.details)) {
    const d = body.details;
    status.details = {};
    if (typeof d.retryAfterSeconds === "number") status.details.retryAfterSeconds = d.retryAfterSeconds;
    if (typeof d.name === "string") status.details.name = d.name;
    if (typeof d.kind === "string") status.details.kind = d.kind;
  }
  return status;
}

function isHttpStatus(value: unknown): value is number {
  return typeof value === "number" && Number.isInteger(value) && value >= 100 && value <= 599;
}

/**
 * The HTTP status of an API error, or undefined for anything that never got
 * an HTTP answer. Node system errors also have `code`, but as a string, so the
 * numeric check keeps them apart.
 */
export function statusCodeOf(err: unknown): number | undefined {
  if (!isRecord(err)) return undefined;
  if (isHttpStatus(err.code)) return err.code;
  if (isHttpStatus(err.statusCode)) return err.statusCode;
  const status = apiStatusOf(err);
  return isHttpStatus(status?.code) ? status.code : undefined;
}

export function reasonOf(err: unknown): string | undefined {
  return apiStatusOf(err)?.reason;
}

export function isNotFound(err: unknown): boolean {
  return statusCodeOf(err) === 404;
}

/** A read (GET) that answers undefined for 404 instead of throwing. */
export async function getOptional<T>(read: () => Promise<T>): Promise<T | undefined> {
  try {
    return await read();
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/**
 * A resourceVersion precondition failed. A 409 without a readable Status
 * counts too: client-go does the same, since the server only sends other 409
 * reasons (AlreadyExists) with a proper Status body.
 */
export function isConflict(err: unknown): boolean {
  if (statusCodeOf(err) !== 409) return false;
  const reason = reasonOf(err);
  return reason === undefined || reason === "" || reason === "Conflict";
}

/** A 404 naming the namespace (details.kind "namespaces"): the write went to a namespace that does not exist. */
export function isNamespaceNotFound(err: unknown): boolean {
  return isNotFound(err) && apiStatusOf(err)?.details?.kind === "namespaces";
}

/**
 * A write lost to another writer: a stale resourceVersion (409 Conflict), or
 * the object deleted between the read and the write (404). Either way the
 * answer is to read again and decide on what is there now. A missing
 * namespace is no race: reading again would only find it missing again.
 */
export function lostToConcurrentWriter(err: unknown): boolean {
  return isConflict(err) || (isNotFound(err) && !isNamespaceNotFound(err));
}

export function isAlreadyExists(err: unknown): boolean {
  return statusCodeOf(err) === 409 && reasonOf(err) === "AlreadyExists";
}

const TRANSIENT_HTTP = new Set([429, 500, 502, 503, 504]);

// Connection-level failures worth retrying: the server (or the path to it) may
// be back a moment later. DNS "not found" is deliberately absent: that is
// configuration, not weather.
const TRANSIENT_NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "ETIMEDOUT",
  "EPIPE",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EAI_AGAIN",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
  "UND_ERR_SOCKET",
  "UND_ERR_CLOSED",
]);

const TRANSIENT_ERROR_NAMES = new Set(["TimeoutError", "ConnectTimeoutError", "HeadersTimeoutError"]);

/** Walks `cause` chains and AggregateError members (happy-eyeballs connects fail with several). */
function someInChain(err: unknown, test: (e: Record<string, unknown>) => boolean, depth = 0): boolean {
  if (!isRecord(err) || depth > 8) return false;
  if (test(err)) return true;
  if (Array.isArray(err.errors) && err.errors.some((e) => someInChain(e, test, depth + 1))) return true;
  return someInChain(err.cause, test, depth + 1);
}

/** The network error code (ECONNREFUSED, UND_ERR_SOCKET, ...) anywhere in the cause chain. */
export function networkErrorCodeOf(err: unknown): string | undefined {
  let found: string | undefined;
  someInChain(err, (e) => {
    if (typeof e.code === "string" && e.code !== "") {
      found = e.code;
      return true;
    }
    return false;
  });
  return found;
}

/**
 * Worth retrying later with the same input: overload, server trouble, or the
 * connection failing. A function answers these with 503 + Retry-After.
 */
export function isTransient(err: unknown): boolean {
  const status = statusCodeOf(err);
  if (status !== undefined) {
    if (TRANSIENT_HTTP.has(status)) return true;
    // Status reasons the apiserver uses for "try again" regardless of code.
    const reason = reasonOf(err);
    return reason === "ServerTimeout" || reason === "Timeout" || reason === "TooManyRequests";
  }
  return someInChain(
    err,
    (e) =>
      (typeof e.code === "string" && TRANSIENT_NETWORK_CODES.has(e.code)) ||
      (typeof e.name === "string" && TRANSIENT_ERROR_NAMES.has(e.name)),
  );
}

function headerOf(err: unknown, name: string): string | undefined {
  if (!isRecord(err) || !isRecord(err.headers)) return undefined;
  const headers = err.headers;
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === name && typeof value === "string") return value;
  }
  return undefined;
}

/**
 * How long the server asked us to wait: the Retry-After header (seconds or an
 * HTTP date) or the Status `details.retryAfterSeconds`. Undefined when neither.
 */
export function retryAfterSeconds(err: unknown, now: Date = new Date()): number | undefined {
  const header = headerOf(err, "retry-after")?.trim();
  if (header !== undefined && header !== "") {
    if (/^\d+$/.test(header)) return Number(header);
    const date = Date.parse(header);
    if (!Number.isNaN(date)) return Math.max(0, Math.ceil((date - now.getTime()) / 1000));
  }
  const fromBody = apiStatusOf(err)?.details?.retryAfterSeconds;
  return fromBody !== undefined && fromBody >= 0 ? fromBody : undefined;
}
