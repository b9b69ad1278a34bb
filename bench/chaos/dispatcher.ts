// The chaos dispatcher: stands between the watch forwarder and the function
// instances of each controller, and breaks every promise a platform does not
// make anyway. Each event the forwarder posts to /<controller> is accepted at
// once (so the forwarder's per-object ordering ends here), held for a random
// moment, put in a pool from which deliveries are drawn at random (shuffled),
// sent to a random live instance, and sometimes sent a second time to another
// random instance. Failed deliveries (a killed instance, a 503) are retried a
// bounded number of times on other instances and then dropped: lost events
// are what the resync is for (DESIGN.md invariant 5).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { ControllerName, Fleet } from "./fleet.ts";
import { sleep } from "./options.ts";

export interface DispatcherOptions {
  fleet: Fleet;
  random: () => number;
  duplicateProbability: number;
  maxHoldMs: number;
  /** Deliveries in flight per controller. */
  concurrency: number;
}

export interface DispatcherStats {
  /** Events the forwarder handed over. */
  received: number;
  /** Deliveries made (first copies and duplicates, retries not counted). */
  dispatched: number;
  /** Second copies sent on purpose. */
  duplicated: number;
  delivered: number;
  /** Attempts repeated after a transport error or a 5xx/429. */
  retried: number;
  /** Given up after the last attempt: lost events the resync must repair. */
  dropped: number;
  /** Answers by HTTP status ("error" for transport failures such as a killed instance). */
  answers: Record<string, number>;
  /** First few bodies of 500 and 4xx answers: the functions reserve these for bugs and bad input. */
  unexpectedAnswers: string[];
  perController: Record<string, number>;
}

interface Delivery {
  controller: ControllerName;
  headers: Record<string, string>;
  body: Buffer;
  attempt: number;
}

const maxAttempts = 8;
const maxServerErrorAttempts = 3;
const requestTimeoutMs = 60_000;
const maxBodyBytes = 4 * 1024 * 1024;
const maxRetryAfterMs = 30_000;

export class Dispatcher {
  private readonly options: DispatcherOptions;
  private server: Server | undefined;
  private baseUrl = "";
  private readonly pool = new Map<ControllerName, Delivery[]>();
  private readonly inFlight = new Map<ControllerName, number>();
  /** Deliveries held back (shuffle delay, retry backoff) that will join the pool. */
  private held = 0;
  /** When each held delivery joins the pool, and whether it is a retry. */
  private readonly heldDue = new Map<number, { due: number; retry: boolean; timer: NodeJS.Timeout }>();
  private heldSeq = 0;
  private closed = false;
  private idleWaiters: (() => void)[] = [];
  private readonly counts: DispatcherStats = {
    received: 0,
    dispatched: 0,
    duplicated: 0,
    delivered: 0,
    retried: 0,
    dropped: 0,
    answers: {},
    unexpectedAnswers: [],
    perController: {},
  };

  constructor(options: DispatcherOptions) {
    this.options = options;
    for (const c of options.fleet.controllers) {
      this.pool.set(c, []);
      this.inFlight.set(c, 0);
    }
  }

  async start(): Promise<void> {
    const server = createServer((req, res) => this.receive(req, res));
    server.keepAliveTimeout = 60_000;
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => resolve());
    });
    this.server = server;
    this.baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  /** Where the forwarder posts a controller's events. */
  routeUrl(controller: ControllerName): string {
    return `${this.baseUrl}/${controller}`;
  }

  private receive(req: IncomingMessage, res: ServerResponse): void {
    const controller = this.options.fleet.controllers.find((c) => req.url === `/${c}`);
    if (req.method !== "POST" || !controller) {
      res.writeHead(404).end();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size <= maxBodyBytes) chunks.push(chunk);
    });
    req.on("end", () => {
      if (size > maxBodyBytes) {
        res.writeHead(413).end();
        return;
      }
      // Only what a CloudEvent is made of; hop-by-hop headers stay behind.
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) {
        if ((k.startsWith("ce-") || k === "content-type") && typeof v === "string") headers[k] = v;
      }
      this.counts.received++;
      this.counts.perController[controller] = (this.counts.perController[controller] ?? 0) + 1;
      res.writeHead(202).end();
      const copies = this.options.random() < this.options.duplicateProbability ? 2 : 1;
      if (copies === 2) this.counts.duplicated++;
      const body = Buffer.concat(chunks);
      for (let i = 0; i < copies; i++) {
        this.counts.dispatched++;
        this.hold({ controller, headers, body, attempt: 0 }, this.options.random() * this.options.maxHoldMs);
      }
    });
  }

  private hold(d: Delivery, ms: number): void {
    this.held++;
    const id = ++this.heldSeq;
    const timer = setTimeout(() => {
      this.held--;
      this.heldDue.delete(id);
      if (this.closed) {
        this.counts.dropped++;
        this.notifyIfIdle();
        return;
      }
      this.pool.get(d.controller)!.push(d);
      this.pump(d.controller);
    }, ms);
    this.heldDue.set(id, { due: Date.now() + ms, retry: d.attempt > 0, timer });
  }

  private pump(controller: ControllerName): void {
    const pool = this.pool.get(controller)!;
    while (pool.length > 0 && this.inFlight.get(controller)! < this.options.concurrency) {
      // A random draw, not FIFO: this is the shuffle.
      const at = Math.floor(this.options.random() * pool.length);
      const d = pool[at]!;
      pool[at] = pool[pool.length - 1]!;
      pool.pop();
      this.inFlight.set(controller, this.inFlight.get(controller)! + 1);
      void this.deliver(d).finally(() => {
        this.inFlight.set(controller, this.inFlight.get(controller)! - 1);
        this.pump(controller);
        this.notifyIfIdle();
      });
    }
  }

  private count(answer: string): void {
    this.counts.answers[answer] = (this.counts.answers[answer] ?? 0) + 1;
  }

  private async deliver(d: Delivery): Promise<void> {
    d.attempt++;
    let target = this.options.fleet.pick(d.controller, this.options.random);
    // Every instance of this controller may be restarting at once when N = 1: wait for one, bounded.
    for (let waited = 0; !target && waited < 30_000 && !this.closed; waited += 100) {
      await sleep(100);
      target = this.options.fleet.pick(d.controller, this.options.random);
    }
    if (!target) {
      this.counts.dropped++;
      return;
    }
    let status: number | undefined;
    let text = "";
    let retryAfterMs = 0;
    try {
      const res = await fetch(`${target.url}/`, {
        method: "POST",
        headers: d.headers,
        body: d.body,
        signal: AbortSignal.timeout(requestTimeoutMs),
      });
      status = res.status;
      text = await res.text();
      // A function that says when to come back (its backoff, kept in the object) is believed, within reason.
      const retryAfter = Number(res.headers.get("retry-after") ?? "");
      if (Number.isFinite(retryAfter) && retryAfter > 0)
        retryAfterMs = Math.min(maxRetryAfterMs, retryAfter * 1000);
    } catch {
      status = undefined;
    }
    this.count(status === undefined ? "error" : String(status));
    if (status !== undefined && status >= 200 && status < 300) {
      this.counts.delivered++;
      return;
    }
    if (status !== undefined && (status === 500 || (status >= 400 && status < 500 && status !== 429))) {
      if (this.counts.unexpectedAnswers.length < 10) {
        this.counts.unexpectedAnswers.push(`${d.controller} ${status}: ${text.slice(0, 400)}`);
      }
    }
    const retryable =
      status === undefined ||
      status === 429 ||
      status === 502 ||
      status === 503 ||
      status === 504 ||
      (status >= 500 && d.attempt < maxServerErrorAttempts);
    if (!retryable || d.attempt >= maxAttempts || this.closed) {
      this.counts.dropped++;
      return;
    }
    this.counts.retried++;
    const backoff = Math.min(2000, 50 * 2 ** d.attempt) * (0.5 + this.options.random() / 2);
    this.hold(d, Math.max(backoff, retryAfterMs));
  }

  /** Nothing held, pooled or in flight. */
  get isIdle(): boolean {
    if (this.held > 0) return false;
    for (const c of this.options.fleet.controllers) {
      if (this.pool.get(c)!.length > 0 || this.inFlight.get(c)! > 0) return false;
    }
    return true;
  }

  /**
   * Nothing pooled or in flight, and nothing held but retries due more than
   * `graceMs` from now: those wait out a backoff a function asked for
   * (Retry-After), which the object's own retry-after annotation also says.
   */
  idleButBackoff(graceMs: number): boolean {
    for (const c of this.options.fleet.controllers) {
      if (this.pool.get(c)!.length > 0 || this.inFlight.get(c)! > 0) return false;
    }
    const soon = Date.now() + graceMs;
    for (const h of this.heldDue.values()) if (!h.retry || h.due <= soon) return false;
    return true;
  }

  private notifyIfIdle(): void {
    if (!this.isIdle) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }

  /** Resolves once idle, or after timeoutMs; true when idle. */
  async idle(timeoutMs: number): Promise<boolean> {
    if (this.isIdle) return true;
    let timer: NodeJS.Timeout | undefined;
    const idle = await Promise.race([
      new Promise<boolean>((resolve) => this.idleWaiters.push(() => resolve(true))),
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), timeoutMs);
      }),
    ]);
    clearTimeout(timer);
    return idle;
  }

  stats(): DispatcherStats {
    return structuredClone(this.counts);
  }

  async close(): Promise<void> {
    this.closed = true;
    // Held deliveries would only be dropped when due (a Retry-After may be 30 s away): drop them now.
    for (const [id, h] of this.heldDue) {
      clearTimeout(h.timer);
      this.heldDue.delete(id);
      this.held--;
      this.counts.dropped++;
    }
    await this.idle(10_000);
    const server = this.server;
    if (!server) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }
}
