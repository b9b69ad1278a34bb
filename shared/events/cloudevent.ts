// Reads CloudEvents (binary, structured and batched HTTP modes) and checks
// them against the CloudEvents v1.0 rules by hand. The cloudevents SDK used
// to do the checking, but building its CloudEvent and running its JSON schema
// cost more CPU than the rest of an event's parse, so its checks are spelled
// out below, with the same outcome and message (test/events/cloudevents-sdk
// .test.ts compares the two; checkBase64Data has the one known exception):
// - required attributes: specversion "1.0", non-empty string id, type and
//   source, source a URI-reference;
// - optional ones (subject, time, datacontenttype, dataschema) non-empty
//   strings when present, dataschema a URI, and time what the SDK made of it:
//   it re-wrote any time Date.parse can read in ISO 8601 (and replaced one it
//   cannot read by "now"), so only a year outside 0000-9999 fails;
// - attribute names [a-z0-9]+ (data_base64 aside); a non-empty schemaurl (a
//   v0.3 attribute) or an attribute named "validate" (it shadowed the SDK's
//   method) is refused, as is a datacontentencoding "base64" whose data the
//   SDK could not decode.
// JSON is parsed and checked once, by parseJson, and batches are split here.

import { isRecord } from "../is-record.ts";
import { describeType, quote } from "./describe.ts";
import { EnvelopeError, withContext } from "./errors.ts";
import type { EventHeaders } from "./headers.ts";
import { parseJson } from "./json-body.ts";
import { MAX_ATTRIBUTE_LENGTH, MAX_BATCH_EVENTS } from "./limits.ts";
import { CLOUDEVENTS_JSON, isJsonMediaType, mediaTypeOf } from "./media-type.ts";
import { isUri, isUriReference } from "./uri.ts";

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
  checkBinaryAttributes(attrs, source);

  const extensions: ApiServerExtensions = {};
  for (const name of EXTENSION_NAMES) {
    // Header values are strings no longer than MAX_ATTRIBUTE_LENGTH (headers.ts).
    const value = attrs.get(name);
    if (value !== undefined && value !== "") extensions[name] = value;
  }
  return {
    id,
    type,
    source,
    extensions,
    readData() {
      const body = bodyText();
      if (body === undefined) return undefined;
      requireJsonData(contentType, "data has Content-Type");
      return parseJson(body, "CloudEvent data (request body)");
    },
  };
}

/**
 * The optional attributes of a binary-mode event. An empty header counts as
 * the attribute with an empty value, except ce-time (an empty time was
 * replaced by "now"); ce-datacontenttype, when sent, is the datacontenttype
 * checked rather than Content-Type (never empty once mediaTypeOf passed it).
 */
function checkBinaryAttributes(attrs: ReadonlyMap<string, string>, source: string): void {
  const schemaurl = attrs.get("schemaurl");
  if (schemaurl !== undefined && schemaurl !== "") throw invalid(SCHEMAURL_IN_V1);
  if (attrs.has("validate")) throw invalid(VALIDATE_SHADOWED);
  checkSource(source);
  if (attrs.get("datacontenttype") === "") throw invalid(tooShort("datacontenttype"));
  const dataschema = attrs.get("dataschema");
  if (dataschema !== undefined) checkDataSchema(dataschema);
  if (attrs.get("subject") === "") throw invalid(tooShort("subject"));
  const time = attrs.get("time");
  if (time !== undefined && time !== "") checkTime(time);
  // Header names are [a-z0-9]{1,64} (headers.ts), so every attribute name is valid.
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
  for (const name of OPTIONAL_ATTRIBUTES) {
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
  checkStructuredAttributes(envelope, source);
  const extensions = extensionsOf(envelope);

  return {
    id,
    type,
    source,
    extensions,
    readData() {
      requireJsonData(contentType, "datacontenttype is");
      if (typeof base64 === "string") return parseJson(decodeBase64(base64), "CloudEvent data_base64");
      // In the JSON event format, JSON data is embedded as is (already checked with the envelope).
      return hasData ? envelope.data : undefined;
    },
  };
}

/**
 * What remains to check of a structured-mode event once the required and
 * optional attributes are non-empty strings. Falsy values of the known
 * attributes (data: 0, subject: null) count as absent; every other member is
 * an extension, whatever its value.
 */
function checkStructuredAttributes(envelope: Record<string, unknown>, source: string): void {
  let binaryData = false;
  if (envelope.datacontentencoding === "base64") {
    checkBase64Data(envelope.data || undefined);
    binaryData = true;
  }
  if (envelope.schemaurl) throw invalid(SCHEMAURL_IN_V1);
  if (Object.hasOwn(envelope, "validate")) throw invalid(VALIDATE_SHADOWED);
  checkSource(source);
  if (typeof envelope.dataschema === "string") checkDataSchema(envelope.dataschema);
  if (typeof envelope.time === "string") checkTime(envelope.time);
  const data = envelope.data;
  if (!binaryData && typeof data === "number" && !Number.isFinite(data)) {
    // JSON.parse reads 1e999 as Infinity, which JSON schema's "number" excludes.
    throw invalid('"data" must be object,string,number,array,boolean,null');
  }
  for (const name in envelope) {
    if (!ATTRIBUTE_NAME.test(name) && name !== "data_base64") {
      throw invalid(shorten(`invalid attribute name: "${name}"`));
    }
  }
}

/**
 * A v0.3-style datacontentencoding "base64" made the SDK decode data with
 * Buffer.from, and what that refused was refused. Array-like objects (a
 * numeric length) passed; they are let through without allocating the
 * buffer their length asks for.
 */
function checkBase64Data(data: unknown): void {
  if (isRecord(data) && typeof data.length === "number") return;
  try {
    Buffer.from(data as string, "base64");
  } catch (err) {
    throw invalid(shorten(err instanceof Error ? err.message : String(err)));
  }
}

const SPEC_VERSION = "1.0";
const EXTENSION_NAMES = ["kind", "apiversion", "name", "namespace"] as const;
const OPTIONAL_ATTRIBUTES = ["subject", "time", "datacontenttype", "dataschema"] as const;
const ATTRIBUTE_NAME = /^[a-z0-9]+$/;
const SCHEMAURL_IN_V1 = "cannot set schemaurl on version 1.0 event";
const VALIDATE_SHADOWED = "event.validate is not a function";
// Earliest and latest instants whose ISO 8601 form has a four-digit year.
const YEAR_0_MS = -62_167_219_200_000;
const YEAR_10000_MS = 253_402_300_800_000;

function invalid(reason: string): EnvelopeError {
  return new EnvelopeError(`not a valid CloudEvent: ${reason}`);
}

function tooShort(name: string): string {
  return `"${name}" must NOT have fewer than 1 characters`;
}

function shorten(message: string): string {
  return message.length <= 300 ? message : `${message.slice(0, 300)}…`;
}

// Every event from one API server has the same source; remembering the last
// one that passed saves running the long URI-reference pattern per event.
let lastValidSource: string | undefined;

function checkSource(source: string): void {
  if (source === lastValidSource) return;
  if (!isUriReference(source)) throw invalid('"source" must match format "uri-reference"');
  lastValidSource = source;
}

function checkDataSchema(value: string): void {
  if (value === "") throw invalid(tooShort("dataschema"));
  if (!isUri(value)) throw invalid('"dataschema" must match format "uri"');
}

/** A time Date.parse cannot read passes (it became "now"); one it reads must be within years 0000-9999. */
function checkTime(value: string): void {
  const ms = Date.parse(value);
  if (ms < YEAR_0_MS || ms >= YEAR_10000_MS) throw invalid('"time" must match format "date-time"');
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

/**
 * ApiServerSource's extensions in the JSON event format, type-checked: JSON
 * may give anything. Empty values count as absent (a cluster-scoped object's
 * namespace is sent as "").
 */
function extensionsOf(envelope: Record<string, unknown>): ApiServerExtensions {
  const extensions: ApiServerExtensions = {};
  for (const name of EXTENSION_NAMES) {
    const value = envelope[name];
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
