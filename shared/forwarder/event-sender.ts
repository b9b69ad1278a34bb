// Sends changes to one destination as CloudEvents (one change: binary mode,
// as ApiServerSource does; several: one JSON batch), retrying transient
// failures with backoff (retry-policy.ts). Every retry sends the same
// request, so the receiver sees the same ce-ids and can drop duplicates. A
// batch the receiver refuses is sent again one change at a time, so one bad
// event does not take the others down with it.

import { setTimeout as sleep } from "node:timers/promises";
import { Agent, type Dispatcher, request } from "undici";
import type { Logger } from "../log.ts";
import type { Change } from "./change.ts";
import { cloudEventBatchRequest, cloudEventRequest, type EventRequest } from "./cloud-event.ts";
import { classifyStatus, parseRetryAfter, type RetryOptions, retryDelayMs } from "./retry-policy.ts";

export type DeliveryOutcome =
  /** 2xx. */
  | "delivered"
  /** A 4xx (or 3xx): the receiver refused this event; not retried. */
  | "rejected"
  /** Retry budget spent (maxAttempts, or maxServerErrorAttempts of 500-like answers). */
  | "retries_exhausted"
  /** A newer state of the same object took over while this one waited to retry. */
  | "superseded"
  /** The forwarder shut down mid-delivery. */
  | "aborted";

export interface DeliveryReport {
  outcome: DeliveryOutcome;
  attempts: number;
  /** Last HTTP status, if an answer came. */
  status?: number;
}

export interface EventSenderOptions {
  url: string;
  /** The URL as logs show it (redacted). */
  label: string;
  /** ce-source: the API server URL. */
  source: string;
  /** Sent as `Authorization: Bearer <token>` when set. */
  authToken?: string;
  /** Per attempt: for the connection, for the answer's headers, and for each pause in its body. */
  timeoutMs: number;
  retry: RetryOptions;
  /** Sockets to the destination; match the queue's concurrency. */
  connections: number;
  /** Aborts waits and requests when the forwarder stops for good. */
  signal: AbortSignal;
  log: Logger;
  /** Called before each retry wait. */
  onRetry?(change: Change, attempt: number, delayMs: number): void;
}

/** Largest piece of an error answer kept for the log line. */
const MAX_ANSWER_SNIPPET = 512;

type Attempt =
  | { class: "delivered"; status: number }
  | { class: "rejected" | "server-error"; status: number; detail: string }
  | { class: "transient"; status?: number; detail: string; retryAfterMs?: number }
  | { class: "aborted" };

export class EventSender {
  private readonly options: EventSenderOptions;
  private readonly dispatcher: Dispatcher;

  constructor(options: EventSenderOptions) {
    this.options = options;
    this.dispatcher = new Agent({
      connections: options.connections,
      connect: { timeout: options.timeoutMs },
    });
  }

  /** One report per change, in their order. */
  async send(changes: readonly Change[], superseded: () => boolean): Promise<DeliveryReport[]> {
    if (changes.length === 1) return [await this.sendOne(changes, superseded)];
    const report = await this.sendOne(changes, superseded);
    if (report.outcome !== "rejected") return changes.map(() => report);
    // Which event the receiver refused is not known: each goes again alone, and only that one is refused.
    const single = await Promise.all(changes.map((c) => this.sendOne([c], () => false)));
    return single.map((r) => ({ ...r, attempts: r.attempts + report.attempts }));
  }

  private async sendOne(changes: readonly Change[], superseded: () => boolean): Promise<DeliveryReport> {
    const { retry, log, label } = this.options;
    const event: EventRequest =
      changes.length === 1
        ? cloudEventRequest(changes[0]!, this.options.source)
        : cloudEventBatchRequest(changes, this.options.source);
    if (this.options.authToken) event.headers.authorization = `Bearer ${this.options.authToken}`;
    const first = changes[0]!;
    const context =
      changes.length === 1
        ? { destination: label, id: first.id, type: first.action, object: first.key }
        : { destination: label, events: changes.length, object: first.key };

    let attempts = 0;
    let serverErrors = 0;
    for (;;) {
      attempts++;
      const result = await this.attempt(event.headers, event.body);
      if (result.class === "aborted") return { outcome: "aborted", attempts };
      if (result.class === "delivered") return { outcome: "delivered", attempts, status: result.status };
      if (result.class === "rejected") {
        log.warn(
          { ...context, status: result.status, answer: result.detail },
          "destination refused the event; not retried",
        );
        return { outcome: "rejected", attempts, status: result.status };
      }
      if (result.class === "server-error") serverErrors++;
      const exhausted =
        (result.class === "server-error" && serverErrors >= retry.maxServerErrorAttempts) ||
        (retry.maxAttempts > 0 && attempts >= retry.maxAttempts);
      if (exhausted) {
        log.error(
          { ...context, attempts, status: result.status, answer: result.detail },
          "delivery failed; giving up",
        );
        return { outcome: "retries_exhausted", attempts, ...statusOf(result) };
      }
      const delayMs = retryDelayMs(
        attempts,
        retry,
        result.class === "transient" ? result.retryAfterMs : undefined,
      );
      // The first failure and every tenth are worth a warning; the rest would flood the log while a receiver is down.
      const level = attempts === 1 || attempts % 10 === 0 ? "warn" : "debug";
      log[level](
        { ...context, attempts, status: result.status, answer: result.detail, delayMs },
        "delivery failed; will retry",
      );
      for (const change of changes) this.options.onRetry?.(change, attempts, delayMs);
      try {
        await sleep(delayMs, undefined, { signal: this.options.signal });
      } catch {
        return { outcome: "aborted", attempts, ...statusOf(result) };
      }
      // Checked after the wait, not before: the newer state then goes out no sooner than this retry would have.
      if (superseded()) return { outcome: "superseded", attempts, ...statusOf(result) };
    }
  }

  /** Closes the destination's connections after their in-flight requests. */
  async close(): Promise<void> {
    await this.dispatcher.close();
  }

  private async attempt(headers: Record<string, string>, body: string): Promise<Attempt> {
    const { timeoutMs, signal } = this.options;
    if (signal.aborted) return { class: "aborted" };
    try {
      const answer = await request(this.options.url, {
        method: "POST",
        headers,
        body,
        dispatcher: this.dispatcher,
        // undici's own timers bound the attempt: a timeout signal per request (AbortSignal.any) is costly on this hot path.
        signal,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
      const status = answer.statusCode;
      const statusClass = classifyStatus(status);
      if (statusClass === "delivered") {
        await answer.body.dump();
        return { class: "delivered", status };
      }
      const detail = await readSnippet(answer.body);
      if (statusClass === "transient") {
        const retryAfterMs = parseRetryAfter(answer.headers["retry-after"]);
        return retryAfterMs === undefined
          ? { class: "transient", status, detail }
          : { class: "transient", status, detail, retryAfterMs };
      }
      return { class: statusClass, status, detail };
    } catch (err) {
      if (signal.aborted) return { class: "aborted" };
      // Refused, reset, timed out, DNS: nothing says the receiver got it, so send it again.
      return { class: "transient", detail: describeError(err) };
    }
  }
}

function statusOf(result: Attempt): { status?: number } {
  return "status" in result && result.status !== undefined ? { status: result.status } : {};
}

/** The start of an error answer, for the log; the rest is discarded unread. */
async function readSnippet(body: AsyncIterable<Buffer> & { destroy(): unknown }): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of body) {
      chunks.push(chunk);
      size += chunk.length;
      if (size >= MAX_ANSWER_SNIPPET) break;
    }
  } catch {
    // A broken answer body changes nothing about what its status means.
  } finally {
    body.destroy();
  }
  return Buffer.concat(chunks).toString("utf8").slice(0, MAX_ANSWER_SNIPPET);
}

function describeError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  const code = (err as { code?: unknown }).code;
  const cause = err.cause instanceof Error ? `: ${err.cause.message}` : "";
  return `${typeof code === "string" ? `${code} ` : ""}${err.message}${cause}`;
}
