// Picks the headers this module reads (Content-Type and the CloudEvents
// binary-mode "ce-*" attributes) out of an untrusted header record. Node
// lower-cases incoming header names and folds repeated ones, but callers may
// hand us anything, so names are matched case-insensitively and every value
// is type-checked.

import { isRecord } from "../is-record.ts";
import { describeType } from "./describe.ts";
import { EnvelopeError } from "./errors.ts";
import { MAX_ATTRIBUTE_LENGTH } from "./limits.ts";

export interface EventHeaders {
  /** The raw Content-Type value, if sent. */
  contentType?: string;
  /** CloudEvent attributes from "ce-<name>" headers, by <name> (lower case). */
  attributes: Map<string, string>;
}

// CloudEvents attribute names are lower-case ASCII letters and digits. Other
// "ce-" headers are not attributes and are skipped, which also keeps names
// like "ce-__proto__" out of every object we build.
const ATTRIBUTE_NAME = /^[a-z0-9]{1,64}$/;
const MAX_ATTRIBUTES = 100;

export function readEventHeaders(headers: unknown): EventHeaders {
  if (!isRecord(headers)) {
    throw new EnvelopeError(
      `request headers must be an object of header names to values, got ${describeType(headers)}`,
    );
  }
  const result: EventHeaders = { attributes: new Map() };
  for (const rawName of Object.keys(headers)) {
    // Only names of 3 characters or more that start with "c" can matter;
    // the rest (host, accept, traceparent, …) are skipped before any allocation.
    if (rawName.length < 3 || (rawName.charCodeAt(0) | 0x20) !== 0x63) continue;
    const name = rawName.toLowerCase();
    const isContentType = name === "content-type";
    const attribute = name.startsWith("ce-") ? name.slice(3) : undefined;
    if (!isContentType && (attribute === undefined || !ATTRIBUTE_NAME.test(attribute))) continue;

    const value = singleValue(name, headers[rawName]);
    if (value === undefined) continue;
    // A name seen before was stored: the checks below throw rather than skip.
    const seen = isContentType
      ? result.contentType !== undefined
      : attribute !== undefined && result.attributes.has(attribute);
    if (seen) throw new EnvelopeError(`header ${name} was sent more than once; send it once`);

    if (isContentType) {
      result.contentType = value;
      continue;
    }
    if (attribute === undefined) continue;
    if (value.length > MAX_ATTRIBUTE_LENGTH) {
      throw new EnvelopeError(
        `header ${name} is ${value.length} characters long; the limit is ${MAX_ATTRIBUTE_LENGTH}`,
      );
    }
    if (result.attributes.size >= MAX_ATTRIBUTES) {
      throw new EnvelopeError(
        `more than ${MAX_ATTRIBUTES} ce-* headers; a CloudEvent has far fewer attributes`,
      );
    }
    result.attributes.set(attribute, value);
  }
  return result;
}

/** A header's one string value; undefined when absent. */
function singleValue(name: string, value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value === "string") return value;
  if (Array.isArray(value)) {
    if (value.length === 0) return undefined;
    if (value.length === 1 && typeof value[0] === "string") return value[0];
    if (value.every((v) => typeof v === "string")) {
      throw new EnvelopeError(`header ${name} was sent ${value.length} times; send it once`);
    }
  }
  throw new EnvelopeError(`header ${name} must be a string, got ${describeType(value)}`);
}
