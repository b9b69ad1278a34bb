// One function URL the forwarder delivers to: its ordered queue
// (delivery-queue.ts), its HTTP sender (event-sender.ts), and the counters
// and metrics of what became of each change sent its way.

import type { Logger } from "../log.ts";
import type { Change } from "./change.ts";
import { DeliveryQueue } from "./delivery-queue.ts";
import { type DeliveryOutcome, EventSender } from "./event-sender.ts";
import type { FailureReason, ForwarderMetrics } from "./metrics.ts";
import type { RetryOptions } from "./retry-policy.ts";
import { type Route, redactUrl } from "./routes.ts";

export interface DestinationStats {
  /** Redacted (no query, no credentials). */
  url: string;
  kinds: string[];
  waiting: number;
  inFlight: number;
  delivered: number;
  /** Given up after trying: rejected (4xx) or retries exhausted. */
  failed: number;
  /** Never tried to the end: queue full, or shut down first. */
  dropped: number;
  /** Retry attempts made. */
  retried: number;
  /** Changes folded into a newer state of the same object (while queued, or a retry superseded). */
  coalesced: number;
}

export interface DestinationSettings {
  /** ce-source: the API server URL. */
  source: string;
  concurrency: number;
  /** Changes one request may carry (a CloudEvents batch when more than one). */
  maxBatch: number;
  maxQueue: number;
  retry: RetryOptions;
  timeoutMs: number;
  authToken?: string;
  /** Aborted when the forwarder stops for good: ends retry waits and requests. */
  signal: AbortSignal;
  log: Logger;
  metrics: ForwarderMetrics;
}

export class Destination {
  readonly label: string;
  readonly kinds: ReadonlySet<string>;
  private readonly queue: DeliveryQueue;
  private readonly sender: EventSender;
  private readonly counts: DestinationStats;
  private readonly metrics: ForwarderMetrics;
  private readonly log: Logger;
  private readonly maxQueue: number;
  private queueFullDrops = 0;

  constructor(route: Route, settings: DestinationSettings) {
    const { metrics } = settings;
    const label = redactUrl(route.url);
    this.label = label;
    this.kinds = new Set(route.kinds);
    this.metrics = metrics;
    this.log = settings.log;
    this.maxQueue = settings.maxQueue;
    this.counts = {
      url: label,
      kinds: [...route.kinds],
      waiting: 0,
      inFlight: 0,
      delivered: 0,
      failed: 0,
      dropped: 0,
      retried: 0,
      coalesced: 0,
    };
    this.sender = new EventSender({
      url: route.url,
      label,
      source: settings.source,
      timeoutMs: settings.timeoutMs,
      retry: settings.retry,
      connections: settings.concurrency,
      signal: settings.signal,
      log: settings.log,
      ...(settings.authToken ? { authToken: settings.authToken } : {}),
      onRetry: (change) => {
        this.counts.retried++;
        metrics.retried.inc({ destination: label, kind: change.resource.kind });
      },
    });
    this.queue = new DeliveryQueue({
      concurrency: settings.concurrency,
      maxBatch: settings.maxBatch,
      maxQueue: settings.maxQueue,
      onDepthChange: (waiting, inFlight) => {
        metrics.queueDepth.set({ destination: label }, waiting);
        metrics.inFlight.set({ destination: label }, inFlight);
      },
      deliver: async (changes, superseded) => {
        const started = performance.now();
        const reports = await this.sender.send(changes, superseded);
        const seconds = (performance.now() - started) / 1000;
        changes.forEach((change, i) => {
          const outcome = reports[i]?.outcome ?? "aborted";
          metrics.deliverySeconds.observe({ destination: label, outcome }, seconds);
          this.record(change, outcome);
        });
      },
    });
  }

  /** Queues a change; never waits, so one destination's trouble stays its own. */
  enqueue(change: Change): void {
    const result = this.queue.enqueue(change);
    if (result === "coalesced") {
      this.counts.coalesced++;
      this.metrics.coalesced.inc({ destination: this.label, kind: change.resource.kind });
    } else if (result === "dropped") {
      this.fail(change, "queue_full");
      this.queueFullDrops++;
      // One line per drop would flood the log exactly when the destination is already in trouble.
      if (this.queueFullDrops === 1 || this.queueFullDrops % 1000 === 0) {
        this.log.warn(
          { destination: this.label, maxQueue: this.maxQueue, dropped: this.queueFullDrops },
          "delivery queue full; dropping changes of objects that have none queued",
        );
      }
    }
  }

  stats(): DestinationStats {
    return { ...this.counts, waiting: this.queue.waiting, inFlight: this.queue.inFlight };
  }

  /** Resolves once nothing is queued or in flight. */
  idle(): Promise<void> {
    return this.queue.idle();
  }

  /** Takes no more changes and drops (counts) the queued ones; in-flight ones end on their own. */
  stopQueue(): void {
    for (const change of this.queue.close()) this.fail(change, "shutdown");
  }

  /** Closes the connections; call once idle. */
  async close(): Promise<void> {
    await this.sender.close();
  }

  private record(change: Change, outcome: DeliveryOutcome): void {
    const labels = { destination: this.label, kind: change.resource.kind };
    switch (outcome) {
      case "delivered":
        this.counts.delivered++;
        this.metrics.delivered.inc(labels);
        return;
      case "superseded":
        this.counts.coalesced++;
        this.metrics.coalesced.inc(labels);
        return;
      case "rejected":
      case "retries_exhausted":
        this.fail(change, outcome);
        return;
      case "aborted":
        this.fail(change, "shutdown");
        return;
    }
  }

  private fail(change: Change, reason: FailureReason): void {
    if (reason === "queue_full" || reason === "shutdown") this.counts.dropped++;
    else this.counts.failed++;
    this.metrics.failed.inc({ destination: this.label, kind: change.resource.kind, reason });
  }
}
