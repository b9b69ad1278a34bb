// A tiny function for the HTTP tests: events are JSON objects (one or an
// array), and an event's `do` field chooses what the handler does, so each
// error class can be provoked through the real HTTP path.

import type { IncomingHttpHeaders } from "node:http";
import { ApiException } from "@kubernetes/client-node";
import { RetryLaterError } from "../../shared/http/errors.ts";
import type { FunctionSpec } from "../../shared/http/function-app.ts";
import { ConflictRetriesExhaustedError } from "../../shared/kube/optimistic-update.ts";
import type { DestinationStream } from "../../shared/log.ts";
import { createLogger } from "../../shared/log.ts";
import { createMetricsRegistry } from "../../shared/metrics.ts";

export interface EchoEvent {
  id?: string;
  do?: "echo" | "api503" | "api429" | "api403" | "retry" | "conflict" | "refused" | "crash" | "wait-abort";
  sleepMs?: number;
}

/** Stands in for shared/events' EnvelopeError: bad input with a 4xx status. */
export class EchoEnvelopeError extends Error {
  override name = "EnvelopeError";
  readonly status = 400;
}

export function parseEchoEvents(_headers: IncomingHttpHeaders, body: Buffer): EchoEvent[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString("utf8"));
  } catch {
    throw new EchoEnvelopeError("body is not valid JSON");
  }
  const list = Array.isArray(parsed) ? parsed : [parsed];
  for (const item of list) {
    if (typeof item !== "object" || item === null)
      throw new EchoEnvelopeError("each event must be a JSON object");
  }
  return list as EchoEvent[];
}

export const SECRET_DETAIL = "db password hunter2 at /etc/very/internal/path";

async function handleEcho(event: EchoEvent, signal: AbortSignal): Promise<object> {
  switch (event.do) {
    case "api503":
      throw new ApiException(503, "Service Unavailable", '{"kind":"Status","code":503}', {
        "retry-after": "7",
      });
    case "api429":
      throw new ApiException(
        429,
        "Too Many Requests",
        '{"kind":"Status","code":429,"reason":"TooManyRequests"}',
        {},
      );
    case "api403":
      throw new ApiException(403, "Forbidden", '{"kind":"Status","code":403,"reason":"Forbidden"}', {});
    case "retry":
      throw new RetryLaterError("volume operation pending", 3);
    case "conflict":
      throw new ConflictRetriesExhaustedError(
        5,
        new ApiException(409, "Conflict", { reason: "Conflict" }, {}),
      );
    case "refused":
      throw new TypeError("fetch failed", {
        cause: Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }),
      });
    case "crash":
      throw new Error(SECRET_DETAIL);
    case "wait-abort":
      await new Promise((_, reject) =>
        signal.addEventListener("abort", () => reject(signal.reason), { once: true }),
      );
      return {};
    default:
      if (event.sleepMs) await new Promise((resolve) => setTimeout(resolve, event.sleepMs));
      return { echoed: event.id ?? null };
  }
}

export interface LogCapture {
  lines: Record<string, unknown>[];
  destination: DestinationStream;
}

export function captureLogs(): LogCapture {
  const lines: Record<string, unknown>[] = [];
  return { lines, destination: { write: (line: string) => void lines.push(JSON.parse(line)) } };
}

export function echoSpec(
  overrides: Partial<FunctionSpec<EchoEvent>> = {},
  logs = captureLogs(),
): FunctionSpec<EchoEvent> {
  return {
    name: "echo",
    parseEvents: parseEchoEvents,
    handleEvent: (event, ctx) => handleEcho(event, ctx.signal),
    describeEvent: (event) => (event.id === undefined ? {} : { eventId: event.id }),
    metrics: createMetricsRegistry(),
    logger: createLogger({ name: "echo", level: "debug", destination: logs.destination }),
    ...overrides,
  };
}
