// client-node's Watch, reimplemented for ListWatch (client-node 2.0.x),
// because the original cannot be stopped reliably or safely:
// - watch() resolves only once the API server has sent response headers; until
//   then nobody holds its AbortController, so ListWatch.stop() cannot abort a
//   watch that is still connecting (an API server that sends headers with the
//   first event, as the sandbox does on a quiet resume, keeps it there). Here
//   the controller is returned at once and the request runs behind it.
// - ListWatch calls watch() from its own done-callback without catching, so a
//   throw (an auth plugin failing, no current cluster) would be an unhandled
//   rejection. Here every failure goes to done(err), which ListWatch reports
//   as an "error" event.
// - close() aborts every open watch and refuses new ones: a list in flight
//   during shutdown cannot start a watch that outlives the forwarder.
// What ListWatch relies on is kept: done(err) with `statusCode` for a non-200
// answer (410 makes it relist), a TimeoutError after `idleTimeoutMs` without
// data (it reconnects at once from the last resourceVersion), done(null) when
// the server ends the stream. Bookmarks are asked for, so a quiet kind's
// resourceVersion stays fresh and a reconnect can resume instead of relisting,
// and the server is asked to end each watch after 5-10 minutes, like
// client-go's reflector, so connections get rebalanced.

import { STATUS_CODES } from "node:http";
import { createInterface } from "node:readline";
import { HttpMethod, type KubeConfig, RequestContext, Watch } from "@kubernetes/client-node";
import { type Dispatcher, request } from "undici";
import { isRecord } from "../is-record.ts";

export interface WatchHooks {
  /** A watch is starting: ListWatch has dispatched the list before it, if any. */
  onStart(): void;
  /** The API server answered 200; the stream is open. */
  onEstablished(): void;
  /** A line of the stream was not a usable watch event, or handling it failed. */
  onBadEvent?(problem: string, detail: unknown): void;
}

type WatchCallback = (phase: string, apiObj: unknown, watchObj?: unknown) => void;
type DoneCallback = (err: unknown) => void;
type QueryParams = Record<string, string | number | boolean | undefined>;

/** No byte for this long (bookmarks included) and the watch is presumed dead. */
export const WATCH_IDLE_TIMEOUT_MS = 60_000;

export class KubeWatch extends Watch {
  private readonly hooks: WatchHooks;
  private readonly idleTimeoutMs: number;
  private readonly open = new Set<AbortController>();
  private closed = false;

  constructor(config: KubeConfig, hooks: WatchHooks, idleTimeoutMs = WATCH_IDLE_TIMEOUT_MS) {
    super(config);
    this.hooks = hooks;
    this.idleTimeoutMs = idleTimeoutMs;
  }

  override async watch(
    path: string,
    queryParams: QueryParams,
    callback: WatchCallback,
    done: DoneCallback,
  ): Promise<AbortController> {
    const controller = new AbortController();
    if (this.closed) {
      controller.abort();
      return controller;
    }
    this.open.add(controller);
    this.hooks.onStart();
    // Started on the next macrotask: ListWatch must have stored the controller
    // (its await of this call resumes in a microtask) before done() can run.
    setImmediate(() => void this.stream(path, queryParams, callback, done, controller));
    return controller;
  }

  /** Aborts every open watch and refuses new ones. */
  close(): void {
    this.closed = true;
    for (const controller of this.open) controller.abort();
    this.open.clear();
  }

  private async stream(
    path: string,
    queryParams: QueryParams,
    callback: WatchCallback,
    done: DoneCallback,
    controller: AbortController,
  ): Promise<void> {
    let finished = false;
    let timedOut = false;
    let timer: NodeJS.Timeout | undefined;
    let dispatcher: Dispatcher | undefined;
    const finish = (err: unknown): void => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      this.open.delete(controller);
      controller.abort();
      // A per-watch dispatcher (TLS options) would otherwise keep its pool alive.
      if (dispatcher !== undefined) void dispatcher.close().catch(() => undefined);
      done(timedOut ? timeoutError(this.idleTimeoutMs) : err);
    };
    const touch = (): void => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        timedOut = true;
        controller.abort();
      }, this.idleTimeoutMs);
      timer.unref();
    };
    controller.signal.addEventListener("abort", () => finish(controller.signal.reason), { once: true });
    if (controller.signal.aborted) return finish(controller.signal.reason);

    try {
      const cluster = this.config.getCurrentCluster();
      if (!cluster) throw new Error("no current cluster in the kubeconfig");
      const url = new URL(cluster.server + path);
      const query: QueryParams = {
        ...queryParams,
        watch: true,
        allowWatchBookmarks: true,
        timeoutSeconds: 300 + Math.floor(Math.random() * 300),
      };
      for (const [key, value] of Object.entries(query)) {
        if (value !== undefined) url.searchParams.set(key, String(value));
      }
      const context = new RequestContext(url.toString(), HttpMethod.GET);
      await this.config.applySecurityAuthentication(context);
      dispatcher = context.getDispatcher() as Dispatcher | undefined;
      if (finished) return;
      touch();
      const answer = await request(url, {
        method: "GET",
        headers: context.getHeaders(),
        signal: controller.signal,
        ...(dispatcher ? { dispatcher } : {}),
        // The idle timer above covers headers and body; undici's own timeouts would race it.
        headersTimeout: 0,
        bodyTimeout: 0,
      });
      if (answer.statusCode !== 200) {
        await answer.body.dump().catch(() => undefined);
        const error = new Error(STATUS_CODES[answer.statusCode] ?? `HTTP ${answer.statusCode}`);
        throw Object.assign(error, { statusCode: answer.statusCode });
      }
      touch();
      this.hooks.onEstablished();
      answer.body.on("data", touch);
      for await (const line of createInterface({ input: answer.body, crlfDelay: Number.POSITIVE_INFINITY })) {
        if (finished) return;
        if (line.trim() === "") continue;
        this.dispatch(line, callback);
      }
      finish(null);
    } catch (err) {
      finish(err);
    }
  }

  /**
   * Hands one line to ListWatch. Its handler is async and touches
   * object.metadata for every type but ERROR: an event without it would be
   * an unhandled rejection, so it is skipped, and a rejection is reported
   * instead of crashing the process.
   */
  private dispatch(line: string, callback: WatchCallback): void {
    let event: unknown;
    try {
      event = JSON.parse(line);
    } catch {
      this.hooks.onBadEvent?.("watch line is not JSON", line.slice(0, 200));
      return;
    }
    if (!isRecord(event) || typeof event.type !== "string") {
      this.hooks.onBadEvent?.("watch line has no type", line.slice(0, 200));
      return;
    }
    if (event.type !== "ERROR" && !(isRecord(event.object) && isRecord(event.object.metadata))) {
      this.hooks.onBadEvent?.("watch event object has no metadata", line.slice(0, 200));
      return;
    }
    const handled: unknown = callback(event.type, event.object, event);
    if (handled instanceof Promise) {
      handled.catch((err: unknown) => this.hooks.onBadEvent?.("handling a watch event failed", err));
    }
  }
}

/** What ListWatch recognizes as a client-side timeout (reconnect at once, same resourceVersion). */
function timeoutError(ms: number): Error {
  return new DOMException(`no data from the watch for ${ms} ms`, "TimeoutError");
}
