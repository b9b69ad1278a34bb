// shared/events: one untrusted HTTP request in, normalized resource events out.
// See parse-request.ts for which body parser to use.

export { PING_EVENT_TYPE } from "./apiserver-source.ts";
export { EnvelopeError } from "./errors.ts";
export { MAX_BODY_BYTES } from "./limits.ts";
export { eventMatchesKind } from "./match.ts";
export { parseEventRequest } from "./parse-request.ts";
export type {
  IgnoredEvent,
  KubeObjectLike,
  ObjectReference,
  ParsedEvent,
  ResourceAction,
  ResourceEvent,
  ResyncEvent,
} from "./types.ts";
