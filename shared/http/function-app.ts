// The HTTP shell every function shares: it owns the wire (body limits, status
// codes, JSON errors, request ids, logs, metrics, probes) so a function only
// supplies "parse the envelope" and "handle one event".
//
//   POST /         parse the body into events, handle them in order, 200 {function, results}
//                  (only for functions with events; admission has none, so POST / is a 404 there)
//   POST /resync   a full pass (404 when the function has none)
//   GET  /healthz  200 while the process lives
//   GET  /readyz   200 when spec.ready() says so (503 while shutting down)
//   GET  /metrics  Prometheus text
//   anything else  the function's own routes, else 405 (known path) / 404, JSON
//
// Every route but the probes requires the caller identity AUTH_MODE asks for
// (shared/http/auth.ts): 401/403 before any body is read.
//
// Hardening, for every function: bodies are bounded (MAX_BODY_BYTES, 413) and
// read raw, so the envelope parser judges the content type and
// answers a clear 4xx; answers are JSON with `nosniff` and `no-store`, never
// a stack trace (errors.ts says "internal error" and logs the detail, and the
// log scrubs credentials); request ids from headers are sanitised.

import { AsyncLocalStorage } from "node:async_hooks";
import { randomUUID } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import type { Express, NextFunction, Request, RequestHandler, Response } from "express";
import express from "express";
import type { EventLogFields, Logger } from "../log.ts";
import { createLogger, requestLogger } from "../log.ts";
import type { Registry } from "../metrics.ts";
import { outcomeOfStatus, processMetrics, requestMetrics } from "../metrics.ts";
import { type AuthPolicy, authorize, authPolicyFromEnv } from "./auth.ts";
import { classifyError } from "./errors.ts";
import { readRequestBody } from "./read-body.ts";
import { type FunctionRoutes, RouteTable } from "./route-table.ts";

export interface RequestContext {
  log: Logger;
  requestId: string;
  /** Aborted when the client disconnects before the answer; pass it to long calls. */
  signal: AbortSignal;
}

export interface FunctionSpec<E> {
  /** "binder": used in logs, metrics labels and answers. */
  name: string;
  /**
   * Throws an error with `status` 400..499 (e.g. EnvelopeError) on bad input. May return [].
   * Omit both parseEvents and handleEvent for a function that takes no events
   * (admission: it answers on its own routes); POST / is then not served.
   */
  parseEvents?(headers: IncomingHttpHeaders, body: Buffer): E[];
  /** Returns a summary that goes into the 200 body. */
  handleEvent?(event: E, ctx: RequestContext): Promise<object>;
  /** Log fields for one event (eventId, objectKey, resourceVersion); handleEvent's ctx.log carries them. */
  describeEvent?(event: E): EventLogFields;
  /**
   * Events of a batch with the same key are handled in order, different keys
   * at once; undefined: in order after every other event without a key. Without
   * orderKey, a batch is handled one event after another.
   */
  orderKey?(event: E): string | undefined;
  resync?(ctx: RequestContext): Promise<object>;
  /**
   * Extra routes (usually GET, e.g. /explain/...). `ctx()` returns the current
   * request's context inside a handler. POST handlers that need the body use
   * `rawBody()` from this module.
   */
  routes?(router: FunctionRoutes, ctx: () => RequestContext): void;
  /** Readiness beyond "listening", e.g. "the CSI driver answers Probe". */
  ready?(): Promise<boolean>;
  /** Defaults to the process registry (shared/metrics processMetrics()). */
  metrics?: Registry;
  /** Defaults to createLogger({ name }). */
  logger?: Logger;
  /** Defaults to MAX_BODY_BYTES, then 1 MiB. */
  maxBodyBytes?: number;
  /**
   * Who may call the non-probe routes. Defaults to the AUTH_* environment
   * (authPolicyFromEnv: AUTH_MODE=none means open); null means open whatever
   * the environment says (for callers that authenticate differently).
   */
  auth?: AuthPolicy | null;
}

/** What serveFunction (and tests) need beyond the express app itself. */
interface FunctionRuntime {
  readonly name: string;
  readonly log: Logger;
  readonly metrics: Registry;
  /** Set when shutting down: /readyz answers 503 so no new traffic is routed here. */
  draining: boolean;
  /** "none", "token" or "tokenreview". */
  readonly authMode: string;
  /** Run by serveFunction after the server has closed (e.g. the TokenReview client). */
  readonly closeHooks: (() => Promise<void>)[];
}

export type FunctionApp = Express & { readonly runtime: FunctionRuntime };

const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;
const READY_TIMEOUT_MS = 5000;
const PROBE_ROUTES = new Set(["/healthz", "/readyz", "/metrics"]);

/** MAX_BODY_BYTES, validated, so a typo fails at start instead of at the first request. */
export function maxBodyBytesFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.MAX_BODY_BYTES?.trim();
  if (raw === undefined || raw === "") return DEFAULT_MAX_BODY_BYTES;
  if (!/^\d+$/.test(raw) || Number(raw) <= 0 || !Number.isSafeInteger(Number(raw))) {
    throw new Error(`MAX_BODY_BYTES must be a positive integer number of bytes, got ${JSON.stringify(raw)}`);
  }
  return Number(raw);
}

interface RequestState {
  ctx: RequestContext;
  /** The logger of the event being handled, while one is. */
  eventLog?: Logger | undefined;
  started: bigint;
  route?: string;
  /** The authenticated caller, for the request log line. */
  user?: string;
}

/**
 * A request's context whose child logger is made on first use: a child costs
 * a copy of its bindings through pino's redaction, and most requests log only
 * the request line. A class, because an object literal with a getter gets a
 * hidden class of its own each time (cost: bench/README.md).
 */
class LazyLogContext implements RequestContext {
  #log: Logger | undefined;
  readonly #base: Logger;
  readonly requestId: string;
  readonly signal: AbortSignal;
  constructor(base: Logger, requestId: string, signal: AbortSignal) {
    this.#base = base;
    this.requestId = requestId;
    this.signal = signal;
  }
  get log(): Logger {
    this.#log ??= this.#base.child({ requestId: this.requestId });
    return this.#log;
  }
}

const states = new WeakMap<Request, RequestState>();
const current = new AsyncLocalStorage<RequestContext>();

function stateOf(req: Request): RequestState {
  const state = states.get(req);
  if (state === undefined) throw new Error("request context missing: middleware order broken");
  return state;
}

/** The current request's context; only valid inside a request handler. */
function currentContext(): RequestContext {
  const ctx = current.getStore();
  if (ctx === undefined) throw new Error("ctx() called outside a request handler");
  return ctx;
}

/**
 * Reads the whole body into `req.body` as a Buffer, whatever the Content-Type
 * (envelopes are told apart by the parser), up to `limit` bytes (413 beyond;
 * read-body.ts has the rest of the rules). Continues in the request context,
 * in case stream callbacks ran outside it.
 */
export function rawBody(limit: number = maxBodyBytesFromEnv()): RequestHandler {
  return (req, res, next) => {
    const ctx = current.getStore();
    const proceed = (err?: unknown) => (ctx === undefined ? next(err) : current.run(ctx, () => next(err)));
    readRequestBody(req, res, limit).then((body) => {
      req.body = body;
      proceed();
    }, proceed);
  };
}

// ce-id / x-request-id are echoed into logs and a response header: only
// accept printable ASCII of sane length, otherwise make our own.
const REQUEST_ID = /^[\x20-\x7e]{1,200}$/;

function requestIdOf(headers: IncomingHttpHeaders): string {
  for (const name of ["ce-id", "x-request-id"]) {
    const value = headers[name];
    const id = Array.isArray(value) ? value[0] : value;
    if (id !== undefined && REQUEST_ID.test(id)) return id;
  }
  return randomUUID();
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export function createFunctionApp<E>(spec: FunctionSpec<E>): FunctionApp {
  const log = spec.logger ?? createLogger({ name: spec.name });
  const metrics = spec.metrics ?? processMetrics();
  const requests = requestMetrics(metrics);
  const limit = spec.maxBodyBytes ?? maxBodyBytesFromEnv();
  const auth = spec.auth === undefined ? authPolicyFromEnv(process.env) : (spec.auth ?? undefined);
  const runtime: FunctionRuntime = {
    name: spec.name,
    log,
    metrics,
    draining: false,
    authMode: auth?.mode ?? "none",
    closeHooks: auth?.close ? [() => auth.close?.() ?? Promise.resolve()] : [],
  };
  // Bound: a spec written as a class or with `this` keeps working.
  const parseEvents = spec.parseEvents?.bind(spec);
  const handleEvent = spec.handleEvent?.bind(spec);
  if ((parseEvents === undefined) !== (handleEvent === undefined)) {
    throw new Error(`${spec.name}: give both parseEvents and handleEvent, or neither`);
  }

  const app = express();
  app.disable("x-powered-by");
  app.disable("etag");

  const table = new RouteTable();
  const builtinRouter = express.Router();
  const builtin = table.recorder(builtinRouter);
  const extra = express.Router();
  spec.routes?.(table.recorder(extra), currentContext);

  // Context, request id, and the one log line + metrics per request.
  app.use((req, res, next) => {
    const requestId = requestIdOf(req.headers);
    const abort = new AbortController();
    const ctx = new LazyLogContext(log, requestId, abort.signal);
    const state: RequestState = { ctx, started: process.hrtime.bigint() };
    states.set(req, state);
    res.setHeader("x-request-id", requestId);
    res.setHeader("x-content-type-options", "nosniff");
    // Answers are about one event at one moment; no cache (or proxy) should keep them.
    res.setHeader("cache-control", "no-store");
    res.once("close", () => {
      const aborted = !res.writableFinished;
      if (aborted) abort.abort(new DOMException("client disconnected", "AbortError"));
      const seconds = Number(process.hrtime.bigint() - state.started) / 1e9;
      const route = state.route ?? "unmatched";
      const outcome = aborted ? "aborted" : outcomeOfStatus(res.statusCode);
      requests.observe({ function: spec.name, route, outcome }, seconds);
      const line = {
        requestId,
        method: req.method,
        route,
        path: req.path,
        status: aborted ? undefined : res.statusCode,
        outcome,
        user: state.user,
        durationMs: Math.round(seconds * 1e6) / 1e3,
      };
      // Probes arrive every few seconds; keep them out of the info stream.
      if (PROBE_ROUTES.has(route) && outcome === "ok") log.debug(line, "request");
      else log.info(line, "request");
    });
    current.run(ctx, next);
  });

  // Which route this is (express matches the table's patterns), for the log, metrics and 405.
  app.use(table.matcher, (req, _res, next) => {
    const match = table.matchOf(req);
    if (match !== undefined) stateOf(req).route = match.pattern;
    next();
  });

  // Authentication before anything else looks at the request: an unknown
  // caller learns nothing about routes or methods, and no body is read for it.
  if (auth !== undefined) {
    app.use(async (req, res, next) => {
      if (PROBE_ROUTES.has(req.path)) return next();
      const outcome = await authorize(auth, req.headers.authorization, spec.name);
      if (outcome.ok) {
        stateOf(req).user = outcome.user.username;
        return next();
      }
      if (outcome.challenge !== undefined) res.setHeader("www-authenticate", outcome.challenge);
      res.status(outcome.status).json({ error: outcome.error });
    });
  }

  // 405 / OPTIONS for known paths, before any router could answer OPTIONS in plain text.
  app.use((req, res, next) => {
    const match = table.matchOf(req);
    if (match === undefined || match.methods.has(req.method)) return next();
    const allow = [...match.methods].sort().join(", ");
    res.setHeader("allow", allow);
    if (req.method === "OPTIONS") return void res.status(204).end();
    res
      .status(405)
      .json({ error: `method ${req.method} not allowed on ${match.pattern}; allowed: ${allow}` });
  });

  if (parseEvents !== undefined && handleEvent !== undefined) {
    builtin.post("/", rawBody(limit), async (req, res) => {
      const state = stateOf(req);
      const body = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      const events = parseEvents(req.headers, body);
      if (!Array.isArray(events)) throw new Error(`${spec.name}: parseEvents did not return an array`);
      const results: object[] = new Array(events.length);
      const handleAt = async (i: number): Promise<void> => {
        state.ctx.signal.throwIfAborted();
        const event = events[i]!;
        // One child per event, with the request id among its bindings (not a child of a child).
        const eventLog = spec.describeEvent
          ? requestLogger(log, { requestId: state.ctx.requestId, ...spec.describeEvent(event) })
          : state.ctx.log;
        try {
          results[i] = await handleEvent(event, {
            log: eventLog,
            requestId: state.ctx.requestId,
            signal: state.ctx.signal,
          });
        } catch (err) {
          // The error answer is logged with the failing event's fields.
          state.eventLog ??= eventLog;
          throw err;
        }
      };
      // A batch: events of one object in order, different objects at once (as separate requests would be).
      await Promise.all(
        orderedLanes(events, spec.orderKey).map(async (lane) => {
          for (const i of lane) await handleAt(i);
        }),
      );
      state.eventLog = undefined;
      if (!res.destroyed) res.status(200).json({ function: spec.name, results });
    });
  }

  builtin.post("/resync", rawBody(limit), async (req, res) => {
    if (spec.resync === undefined) {
      res.status(404).json({ error: `${spec.name} has no resync` });
      return;
    }
    const result = await spec.resync(stateOf(req).ctx);
    if (!res.destroyed) res.status(200).json({ function: spec.name, result });
  });

  builtin.get("/healthz", (_req, res) => {
    res.status(200).json({ ok: true });
  });

  builtin.get("/readyz", async (req, res) => {
    if (runtime.draining) {
      res.status(503).json({ ready: false, reason: "shutting down" });
      return;
    }
    let ready = true;
    try {
      if (spec.ready) ready = (await withTimeout(spec.ready(), READY_TIMEOUT_MS, "ready()")) === true;
    } catch (err) {
      stateOf(req).ctx.log.warn({ err }, "readiness check failed");
      ready = false;
    }
    res.status(ready ? 200 : 503).json(ready ? { ready: true } : { ready: false, reason: "not ready" });
  });

  builtin.get("/metrics", async (_req, res) => {
    const text = await metrics.metrics();
    res.status(200).type(metrics.contentType).send(text);
  });

  app.use(builtinRouter);
  // ctx() must see this request even after body parsers or awaits in between.
  app.use((req, _res, next) => current.run(stateOf(req).ctx, next), extra);

  app.use((req, res) => {
    res.status(404).json({ error: `no route for ${req.method} ${req.path}` });
  });

  // Express 5 routes rejected promises here too. Four parameters mark this as the error handler.
  app.use((err: unknown, req: Request, res: Response, _next: NextFunction) => {
    const state = states.get(req);
    const reqLog = state?.eventLog ?? state?.ctx.log ?? log;
    if (state?.ctx.signal.aborted) {
      reqLog.info({ err }, "client disconnected before the answer");
      return;
    }
    const answer = classifyError(err);
    if (answer.class === "internal") reqLog.error({ err }, "request failed");
    else if (answer.class === "transient")
      reqLog.warn({ err }, "transient failure, asking the sender to retry");
    else reqLog.info({ error: answer.body.error, status: answer.status }, "rejected bad input");
    if (res.headersSent || res.destroyed) {
      res.destroy();
      return;
    }
    if (answer.retryAfterSeconds !== undefined)
      res.setHeader("retry-after", String(answer.retryAfterSeconds));
    res.status(answer.status).json(answer.body);
  });

  return Object.assign(app, { runtime });
}

/**
 * Indices of `events` grouped into lanes that may run at once: one lane per
 * key, in event order; events without a key (or without orderKey) share one.
 */
export function orderedLanes<E>(
  events: readonly E[],
  orderKey: ((e: E) => string | undefined) | undefined,
): number[][] {
  if (events.length <= 1 || orderKey === undefined)
    return events.length === 0 ? [] : [events.map((_, i) => i)];
  const lanes = new Map<string | undefined, number[]>();
  events.forEach((e, i) => {
    const key = orderKey(e);
    const lane = lanes.get(key);
    if (lane === undefined) lanes.set(key, [i]);
    else lane.push(i);
  });
  return [...lanes.values()];
}
