// Bounds on what one request may carry. They keep a hostile or broken sender
// from making a function spend unbounded time or memory on one request.

/**
 * Largest request body accepted, in bytes. kube-apiserver refuses requests
 * over 3 MiB and etcd stores objects up to 1.5 MiB, so any real object (plus
 * its CloudEvent envelope) fits. Use the same figure for the body parser's
 * `limit` so oversized requests are refused before they are buffered.
 */
export const MAX_BODY_BYTES = 3 * 1024 * 1024;

/** Deepest JSON nesting accepted. Storage objects nest about 10 levels deep. */
export const MAX_JSON_DEPTH = 100;

/** Longest CloudEvent attribute or extension value (ids, types, URLs, paths). */
export const MAX_ATTRIBUTE_LENGTH = 4096;

/** Most events accepted in one CloudEvents batch. */
export const MAX_BATCH_EVENTS = 1000;
