// Content-Type handling. The cloudevents SDK compares Content-Type strings
// exactly (so "application/json;charset=utf-8" without the space is not
// JSON to it); we compare the media type alone, case-insensitively.

import { quote } from "./describe.ts";
import { EnvelopeError } from "./errors.ts";

const MAX_CONTENT_TYPE_LENGTH = 256;
// RFC 7231 type "/" subtype, both RFC 7230 tokens.
const MEDIA_TYPE = /^[a-z0-9!#$%&'*+.^_`|~-]+\/[a-z0-9!#$%&'*+.^_`|~-]+$/;

/** "Application/JSON; charset=utf-8" → "application/json". Parameters are dropped. */
export function mediaTypeOf(contentType: string): string {
  if (contentType.length > MAX_CONTENT_TYPE_LENGTH) {
    throw new EnvelopeError(
      `Content-Type is ${contentType.length} characters long; the limit is ${MAX_CONTENT_TYPE_LENGTH}`,
    );
  }
  const semicolon = contentType.indexOf(";");
  const type = (semicolon === -1 ? contentType : contentType.slice(0, semicolon)).trim().toLowerCase();
  if (!MEDIA_TYPE.test(type)) {
    throw new EnvelopeError(`Content-Type ${quote(contentType)} is not a media type like application/json`);
  }
  return type;
}

/** application/json and every structured-syntax "+json" type. */
export function isJsonMediaType(mediaType: string): boolean {
  return mediaType === "application/json" || mediaType.endsWith("+json");
}

export const CLOUDEVENTS_JSON = "application/cloudevents+json";
export const CLOUDEVENTS_BATCH_JSON = "application/cloudevents-batch+json";
