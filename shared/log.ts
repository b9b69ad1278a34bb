// Structured logging for every function and tool: JSON lines on stderr,
// because stdout carries exactly one machine-read line (the ready JSON) and
// nothing else may ever be printed there.
//
// Secrets are scrubbed before a line is written: Authorization headers,
// tokens and passwords, CSI `secrets` maps, StorageClass parameters named
// `csi.storage.k8s.io/*secret*`, and the `data` / `stringData` of Secret
// objects. pino's path-based `redact` cannot say "the data of objects whose
// kind is Secret" or "keys matching a pattern", so a recursive scrubber
// handles logged objects. pino never runs formatters on child bindings, so
// the usual credential keys are also redacted by path (which does cover them).

import { EventEmitter } from "node:events";
import type { DestinationStream, Logger } from "pino";
import { pino } from "pino";

export type { DestinationStream, Logger } from "pino";

export const REDACTED = "[Redacted]";

export interface LoggerOptions {
  /** Added to every line as `function`. */
  name?: string;
  /** Defaults to `LOG_LEVEL`, then "info". */
  level?: string;
  /** Defaults to stderr (synchronous, so nothing is lost on process.exit). */
  destination?: DestinationStream;
}

// Path-based redaction: the only kind pino applies to child bindings too.
// Exact paths only: a wildcard path ("*.token") makes pino run its redactor
// over every value of every child's bindings, and a child is made per event
// (a burst of allocations; see bench/README.md). Logged
// objects do not need the paths: scrub() covers them at any depth. Our
// bindings are flat (function, cache, request and event identity).
const BINDING_REDACT_PATHS = [
  "authorization",
  "token",
  "bearerToken",
  "password",
  "secrets",
  "headers.authorization",
  "req.headers.authorization",
];

const LEVELS = new Set(["fatal", "error", "warn", "info", "debug", "trace", "silent"]);

export function createLogger(options: LoggerOptions = {}): Logger {
  const requested = (options.level ?? process.env.LOG_LEVEL ?? "info").trim().toLowerCase();
  const level = LEVELS.has(requested) ? requested : "info";
  const logger = pino(
    {
      level,
      redact: { paths: BINDING_REDACT_PATHS, censor: REDACTED },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: {
        // Level names read better than numbers for operators grepping logs.
        level: (label) => ({ level: label }),
        log: (object) => scrub(object) as Record<string, unknown>,
      },
      serializers: {
        // Serialized errors carry their enumerable fields (bodies, headers): scrub those too.
        err: (err: unknown) => (err instanceof Error ? scrub(pino.stdSerializers.err(err)) : err),
        // Someone logging a raw IncomingMessage gets method/url/headers, scrubbed.
        req: (req: unknown) =>
          req instanceof EventEmitter ? scrub(pino.stdSerializers.req(req as never)) : req,
      },
    },
    options.destination ?? pino.destination({ dest: 2, sync: true }),
  );
  if (!LEVELS.has(requested)) logger.warn({ LOG_LEVEL: requested }, "unknown log level, using info");
  return options.name === undefined ? logger : logger.child({ function: options.name });
}

/** What identifies the event a log line is about. Undefined fields are left out. */
export interface EventLogFields {
  requestId?: string;
  eventId?: string;
  /** "namespace/name" or "name" for cluster-scoped objects. */
  objectKey?: string;
  resourceVersion?: string;
}

export function requestLogger(base: Logger, fields: EventLogFields): Logger {
  const bindings: Record<string, string> = {};
  for (const [key, value] of Object.entries(fields)) {
    if (typeof value === "string" && value !== "") bindings[key] = value;
  }
  return base.child(bindings);
}

// Exact key names (lower-cased) whose values are credentials wherever they appear.
const SECRET_KEYS = new Set([
  "authorization",
  "proxy-authorization",
  "cookie",
  "set-cookie",
  "x-api-key",
  "apikey",
  "api_key",
  "secrets", // CSI request field: map of secret values
  "client-key-data",
  "clientkeydata",
  "privatekey",
  "private_key",
  "private-key",
]);

// Suffixes: bearerToken, accessToken, id_token, password, clientSecret, ...
const SECRET_SUFFIX = /(token|password|passwd|secret)$/i;
// StorageClass parameters such as csi.storage.k8s.io/provisioner-secret-name.
const CSI_SECRET_PARAMETER = /^csi\.storage\.k8s\.io\/.*secret/i;

export function isSecretKey(key: string): boolean {
  return SECRET_KEYS.has(key.toLowerCase()) || SECRET_SUFFIX.test(key) || CSI_SECRET_PARAMETER.test(key);
}

const MAX_DEPTH = 12;

/**
 * A copy of `value` with credentials replaced by "[Redacted]". Walks plain
 * objects, arrays and data classes (client-node models); leaves alone what
 * pino serializes itself (Errors, Buffers, Dates) and live objects such as
 * sockets and streams, which are not data and can be huge.
 */
export function scrub(value: unknown): unknown {
  return scrubValue(value, 0, new WeakSet());
}

function isWalkable(value: object): boolean {
  return !(
    value instanceof Error ||
    value instanceof Date ||
    value instanceof RegExp ||
    value instanceof EventEmitter ||
    value instanceof Map ||
    value instanceof Set ||
    value instanceof Promise ||
    ArrayBuffer.isView(value) ||
    value instanceof ArrayBuffer
  );
}

function scrubValue(value: unknown, depth: number, ancestors: WeakSet<object>, isSecret = false): unknown {
  if (typeof value !== "object" || value === null || !isWalkable(value)) return value;
  if (ancestors.has(value)) return "[Circular]";
  if (depth >= MAX_DEPTH) return "[Truncated]";
  ancestors.add(value);
  try {
    if (Array.isArray(value)) return value.map((item) => scrubValue(item, depth + 1, ancestors));
    const source = value as Record<string, unknown>;
    const kind = isSecret ? "Secret" : typeof source.kind === "string" ? source.kind : undefined;
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(source)) {
      if (isSecretKey(key)) out[key] = REDACTED;
      else if (kind === "Secret" && (key === "data" || key === "stringData")) out[key] = REDACTED;
      else if (kind === "SecretList" && key === "items" && Array.isArray(item)) {
        // List items carry no kind of their own.
        out[key] = item.map((secret) => scrubValue(secret, depth + 1, ancestors, true));
      } else out[key] = scrubValue(item, depth + 1, ancestors);
    }
    return out;
  } finally {
    ancestors.delete(value);
  }
}
