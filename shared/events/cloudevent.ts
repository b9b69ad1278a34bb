// Reads CloudEvents (binary, structured and batched HTTP modes) with the
// cloudevents SDK, after checking what the SDK does not. What HTTP.toEvent
// (v10) does with bad input, and why each check below exists:
// - binary and structured modes build events with validation switched off: a
//   missing ce-specversion silently becomes "1.0", "9.9" is accepted as is,
//   missing id/type/source pass, and a missing id is replaced by a random UUID
//   (which would defeat duplicate detection) — so required attributes are
//   checked here first;
// - a Buffer body is not decoded: in binary mode data stays a Buffer, in
//   structured mode the Buffer's bytes become attributes "0", "1", … — so the
//   SDK only ever gets headers and already parsed JSON from us;
// - Content-Type is matched exactly ("application/json;charset=utf-8" is not
//   JSON to it), non-JSON text is wrapped in quotes and JSON.parse'd, an
//   invalid ce-time is silently replaced by "now";
// - it throws its ValidationError (a TypeError) but also plain TypeErrors and
//   SyntaxErrors (array Content-Type, null body, non-array batch, bad JSON);
// - a top-level "__proto__" key in structured mode is assigned, i.e. it
//   replaces the prototype of an internal object, and is then dropped;
// - batch mode alone validates (strictly) and needs a string body.
// We therefore parse and check JSON ourselves, split batches ourselves, hand
// the SDK one clean message per event, run its schema validation explicitly,
// and turn anything it throws into an EnvelopeError.

import { CloudEvent, type CloudEventV1, HTTP, ValidationError } from "cloudevents";
import { isRecord } from "../is-record.ts";
import { describeType, quote } from "./describe.ts";
import { EnvelopeError, withContext } from "./errors.ts";
import type { EventHeaders } from "./headers.ts";
import { parseJson } from "./json-body.ts";
import { MAX_ATTRIBUTE_LENGTH, MAX_BATCH_EVENTS } from "./limits.ts";
import { CLOUDEVENTS_JSON, isJsonMediaType, mediaTypeOf } from "./media-type.ts";

/** The extensions ApiServerSource sets, checked to be strings when present. */
export interface ApiServerExtensions {
  kind?: string;
  apiversion?: string;
  name?: string;
  namespace?: string;
}

/** One CloudEvent, attributes checked; data is decoded only when asked for. */
export interface ReceivedCloudEvent {
  id: string;
  type: string;
  source: string;
  extensions: ApiServerExtensions;
  /** The JSON data, undefined when there is none; throws EnvelopeError when it is not JSON. */
  readData(): unknown;
}

const SPEC_VERSION = "1.0";
const EXTENSION_NAMES = ["kind", "apiversion", "name", "namespace"] as const;

/**
 * Binary mode: attributes in ce-* headers, data in the body. `bodyText` is
 * only called when the data is needed, so events whose data we never read
 * (pings, ignored types) may carry any bytes.
 */
export function readBinaryCloudEvent(
  headers: EventHeaders,
  bodyText: () => string | undefined,
): ReceivedCloudEvent {
  const attrs = headers.attributes;
  const specversion = attrs.get("specversion");
  if (specversion === undefined) {
    throw new EnvelopeError(
      "ce-specversion header is missing; a binary-mode CloudEvent needs ce-specversion: 1.0 (with ce-id, ce-type, ce-source)",
    );
  }
  checkSpecVersion(specversion, "ce-specversion header");
  const id = requiredAttribute(attrs.get("id"), "ce-id header");
  const type = requiredAttribute(attrs.get("type"), "ce-type header");
  const source = requiredAttribute(attrs.get("source"), "ce-source header");

  const contentType = headers.contentType === undefined ? undefined : mediaTypeOf(headers.contentType);
  const message: Record<string, string> = {};
  for (const [name, value] of attrs) message[`ce-${name}`] = value;
  if (contentType !== undefined) message["content-type"] = contentType;
  // Data is decoded by us (see above), so the SDK sees headers only.
  return received(sdkToEvent(message, undefined), { id, type, source }, () => {
    const body = bodyText();
    if (body === undefined) return undefined;
    requireJsonData(contentType, "data has Content-Type");
    return parseJson(body, "CloudEvent data (request body)");
  });
}

/** Structured mode: the whole event is one JSON object in the body. */
export function readStructuredCloudEvent(body: string | undefined): ReceivedCloudEvent {
  if (body === undefined) {
    throw new EnvelopeError(
      `request body is empty; Content-Type ${CLOUDEVENTS_JSON} needs the event as a JSON object`,
    );
  }
  const envelope = parseJson(body, "request body");
  if (Array.isArray(envelope)) {
    throw new EnvelopeError(
      "request body is a JSON array; send a batch of CloudEvents with Content-Type application/cloudevents-batch+json",
    );
  }
  return readEventObject(envelope);
}

/** Batched mode: a JSON array of structured-mode events. */
export function readBatchedCloudEvents(body: string | undefined): ReceivedCloudEvent[] {
  if (body === undefined) {
    throw new EnvelopeError("request body is empty; a CloudEvents batch is a JSON array");
  }
  const batch = parseJson(body, "request body");
  if (!Array.isArray(batch)) {
    throw new EnvelopeError(`a CloudEvents batch must be a JSON array of events, got ${describeType(batch)}`);
  }
  if (batch.length > MAX_BATCH_EVENTS) {
    throw new EnvelopeError(`the batch has ${batch.length} events; the limit is ${MAX_BATCH_EVENTS}`);
  }
  return batch.map((element: unknown, i) => withContext(`batch event ${i}`, () => readEventObject(element)));
}

/** One event in the JSON event format (structured mode, or one batch element). */
function readEventObject(envelope: unknown): ReceivedCloudEvent {
  if (!isRecord(envelope)) {
    throw new EnvelopeError(`a CloudEvent must be a JSON object, got ${describeType(envelope)}`);
  }
  if (envelope.specversion === undefined) {
    throw new EnvelopeError('"specversion" is missing; a CloudEvent needs "specversion": "1.0"');
  }
  checkSpecVersion(envelope.specversion, '"specversion"');
  const id = requiredAttribute(envelope.id, '"id"');
  const type = requiredAttribute(envelope.type, '"type"');
  const source = requiredAttribute(envelope.source, '"source"');
  for (const name of ["subject", "time", "datacontenttype", "dataschema"]) {
    const value = envelope[name];
    if (value !== undefined && value !== null) requiredAttribute(value, `"${name}"`);
  }
  const contentType =
    typeof envelope.datacontenttype === "string" ? mediaTypeOf(envelope.datacontenttype) : undefined;
  const hasData = envelope.data !== undefined && envelope.data !== null;
  const base64 = envelope.data_base64;
  if (base64 !== undefined && base64 !== null) {
    if (typeof base64 !== "string") {
      throw new EnvelopeError(`"data_base64" must be a base64 string, got ${describeType(base64)}`);
    }
    if (hasData) throw new EnvelopeError('a CloudEvent has either "data" or "data_base64", not both');
  }

  // The SDK would turn data_base64 into a Uint32Array; we decode it ourselves.
  const { data_base64: _, ...attributes } = envelope;
  return received(sdkToEvent({ "content-type": CLOUDEVENTS_JSON }, attributes), { id, type, source }, () => {
    requireJsonData(contentType, "datacontenttype is");
    if (typeof base64 === "string") return parseJson(decodeBase64(base64), "CloudEvent data_base64");
    // In the JSON event format, JSON data is embedded as is (already checked with the envelope).
    return hasData ? envelope.data : undefined;
  });
}

/** The event once the SDK has checked it too; `readData` decodes its data when asked. */
function received(
  event: CloudEventV1<unknown>,
  attributes: { id: string; type: string; source: string },
  readData: () => unknown,
): ReceivedCloudEvent {
  sdkValidate(event);
  return { ...attributes, extensions: extensionsOf(event), readData };
}

/** Data is read as JSON only: another declared media type is refused when the data is asked for. */
function requireJsonData(contentType: string | undefined, declared: string): void {
  if (contentType !== undefined && !isJsonMediaType(contentType))
    throw new EnvelopeError(`CloudEvent ${declared} ${quote(contentType)}; expected application/json`);
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;
const utf8 = new TextDecoder("utf-8", { fatal: true });

function decodeBase64(text: string): string {
  if (text.length % 4 !== 0 || !BASE64.test(text))
    throw new EnvelopeError('"data_base64" is not valid base64');
  try {
    return utf8.decode(Buffer.from(text, "base64"));
  } catch {
    throw new EnvelopeError('"data_base64" does not decode to UTF-8 text');
  }
}

function checkSpecVersion(value: unknown, field: string): void {
  if (typeof value !== "string")
    throw new EnvelopeError(`${field} must be a string, got ${describeType(value)}`);
  if (value !== SPEC_VERSION) {
    throw new EnvelopeError(`${field} is ${quote(value)}; only CloudEvents ${SPEC_VERSION} is supported`);
  }
}

function requiredAttribute(value: unknown, field: string): string {
  if (value === undefined) throw new EnvelopeError(`${field} is missing`);
  if (typeof value !== "string" || value === "") {
    throw new EnvelopeError(`${field} must be a non-empty string, got ${describeType(value)}`);
  }
  if (value.length > MAX_ATTRIBUTE_LENGTH) {
    throw new EnvelopeError(
      `${field} is ${value.length} characters long; the limit is ${MAX_ATTRIBUTE_LENGTH}`,
    );
  }
  return value;
}

/** HTTP.toEvent on a message we built; whatever it throws becomes an EnvelopeError. */
function sdkToEvent(headers: Record<string, string>, body: unknown): CloudEventV1<unknown> {
  let result: CloudEventV1<unknown> | CloudEventV1<unknown>[];
  try {
    result = HTTP.toEvent<unknown>({ headers, body });
  } catch (err) {
    throw new EnvelopeError(`not a valid CloudEvent: ${sdkMessage(err)}`);
  }
  if (Array.isArray(result) || result === null || typeof result !== "object") {
    throw new EnvelopeError("not a valid CloudEvent: expected exactly one event");
  }
  return result;
}

/** The SDK's JSON-schema check (id, source as URI-reference, attribute names, …), which toEvent skips. */
function sdkValidate(event: CloudEventV1<unknown>): void {
  if (!(event instanceof CloudEvent)) return;
  try {
    event.validate();
  } catch (err) {
    throw new EnvelopeError(`not a valid CloudEvent: ${sdkMessage(err)}`);
  }
}

function sdkMessage(err: unknown): string {
  if (err instanceof ValidationError && Array.isArray(err.errors) && err.errors.length > 0) {
    return err.errors.map(describeSchemaError).join("; ");
  }
  const message = err instanceof Error ? err.message : String(err);
  return message.length <= 300 ? message : `${message.slice(0, 300)}…`;
}

function describeSchemaError(error: unknown): string {
  if (typeof error === "string") return error;
  if (!isRecord(error)) return "invalid";
  const path =
    typeof error.instancePath === "string" && error.instancePath !== "" ? error.instancePath.slice(1) : "";
  const message = typeof error.message === "string" ? error.message : "is invalid";
  return path === "" ? message : `"${path}" ${message}`;
}

/**
 * ApiServerSource's extensions, type-checked: binary mode gives strings, JSON
 * may give anything. Empty values count as absent (a cluster-scoped object's
 * namespace is sent as "").
 */
function extensionsOf(event: CloudEventV1<unknown>): ApiServerExtensions {
  const extensions: ApiServerExtensions = {};
  for (const name of EXTENSION_NAMES) {
    const value: unknown = event[name];
    if (value === undefined || value === null || value === "") continue;
    if (typeof value !== "string") {
      throw new EnvelopeError(`CloudEvent extension "${name}" must be a string, got ${describeType(value)}`);
    }
    if (value.length > MAX_ATTRIBUTE_LENGTH) {
      throw new EnvelopeError(
        `CloudEvent extension "${name}" is ${value.length} characters long; the limit is ${MAX_ATTRIBUTE_LENGTH}`,
      );
    }
    extensions[name] = value;
  }
  return extensions;
}
