// Entry point: one untrusted HTTP request (headers + body) in, normalized
// events out. Which envelope it is follows the CloudEvents HTTP binding:
// Content-Type decides structured / batched mode, ce-* headers mean binary
// mode, and anything else is a plain watch event.
//
// Body: pass the raw bytes (rawBody() of shared/http/function-app.ts)
// so every mode works, including structured and batched CloudEvents, whose
// content types express.json() does not parse. A string (express.text) or a
// value express.json() already parsed is accepted too; it is serialized back
// to JSON and checked the same way.

import { fromCloudEvent } from "./apiserver-source.ts";
import { readBatchedCloudEvents, readBinaryCloudEvent, readStructuredCloudEvent } from "./cloudevent.ts";
import { quote } from "./describe.ts";
import { EnvelopeError, withContext } from "./errors.ts";
import { type EventHeaders, readEventHeaders } from "./headers.ts";
import { bodyText, parseJson } from "./json-body.ts";
import { CLOUDEVENTS_BATCH_JSON, CLOUDEVENTS_JSON, isJsonMediaType, mediaTypeOf } from "./media-type.ts";
import type { ParsedEvent } from "./types.ts";
import { fromWatchEvent } from "./watch-event.ts";

// Any of these marks a binary-mode CloudEvent; the rest are then required.
const BINARY_MARKERS = ["specversion", "id", "type", "source"];

type Envelope = "batch" | "structured" | "binary" | "watch";

/** CloudEvents HTTP binding: the event format in Content-Type wins over ce-* headers. */
function envelopeOf(mediaType: string | undefined, headers: EventHeaders): Envelope {
  if (mediaType === CLOUDEVENTS_BATCH_JSON) return "batch";
  if (mediaType?.startsWith("application/cloudevents")) {
    if (mediaType !== CLOUDEVENTS_JSON) {
      throw new EnvelopeError(
        `Content-Type ${quote(mediaType)} is not supported; send CloudEvents as ${CLOUDEVENTS_JSON} or ${CLOUDEVENTS_BATCH_JSON}`,
      );
    }
    return "structured";
  }
  if (BINARY_MARKERS.some((name) => headers.attributes.has(name))) return "binary";
  // A missing Content-Type is tolerated for watch events: the body must still parse as one.
  if (mediaType !== undefined && !isJsonMediaType(mediaType)) {
    throw new EnvelopeError(
      `Content-Type ${quote(mediaType)} is not supported; send a watch event as application/json, ` +
        `or a CloudEvent (ce-* headers, or ${CLOUDEVENTS_JSON})`,
    );
  }
  return "watch";
}

/**
 * Parses one request into events (several for a CloudEvents batch).
 * Throws EnvelopeError — and nothing else — for malformed input; answer 400
 * with its message. Events of unhandled types come back as { kind: "ignored" }.
 */
export function parseEventRequest(
  headers: Record<string, string | string[] | undefined>,
  body: Buffer | string | unknown,
): ParsedEvent[] {
  const eventHeaders = readEventHeaders(headers);
  const mediaType =
    eventHeaders.contentType === undefined ? undefined : mediaTypeOf(eventHeaders.contentType);
  switch (envelopeOf(mediaType, eventHeaders)) {
    case "binary":
      // The body is read only if the event type needs its data.
      return [fromCloudEvent(readBinaryCloudEvent(eventHeaders, () => bodyText(body)))];
    case "structured":
      return [fromCloudEvent(readStructuredCloudEvent(bodyText(body)))];
    case "batch":
      return readBatchedCloudEvents(bodyText(body)).map((event, i) =>
        withContext(`batch event ${i}`, () => fromCloudEvent(event)),
      );
    case "watch": {
      const text = bodyText(body);
      if (text === undefined) {
        throw new EnvelopeError(
          'request body is empty; expected a watch event {"type": "ADDED", "object": {...}} or a CloudEvent',
        );
      }
      return [fromWatchEvent(parseJson(text, "request body"))];
    }
  }
}
