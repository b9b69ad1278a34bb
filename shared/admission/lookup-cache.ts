// A short-lived, bounded cache for API lookups made while kube-apiserver
// waits on the webhook. A burst of claims (a StatefulSet scaling up) then
// costs one StorageClass list, not one per claim, and concurrent misses for
// the same key share one request. Values live `ttlMs` (a few seconds: a new
// default class or CSIDriver is seen soon enough), at most `maxEntries` of
// them (least recently used go first). Failures are never cached: the next
// request tries again.
//
// This is a latency and load optimisation, not state: a fresh process with an
// empty cache decides the same, only after one more read.

export interface LookupCacheOptions {
  /** How long a value is served; 0 disables caching (concurrent misses still share a request). */
  ttlMs: number;
  maxEntries: number;
  /** Clock in ms, for tests. */
  now?: () => number;
}

export interface CacheResult<V> {
  value: V;
  /** Served from the cache (no request made for this call). */
  hit: boolean;
}

interface Entry<V> {
  value: V;
  expires: number;
}

export class LookupCache<V> {
  private readonly entries = new Map<string, Entry<V>>();
  private readonly inflight = new Map<string, Promise<V>>();
  private readonly ttlMs: number;
  private readonly maxEntries: number;
  private readonly now: () => number;

  constructor(options: LookupCacheOptions) {
    if (!(options.ttlMs >= 0)) throw new TypeError("ttlMs must be >= 0");
    if (!(options.maxEntries >= 1)) throw new TypeError("maxEntries must be >= 1");
    this.ttlMs = options.ttlMs;
    this.maxEntries = options.maxEntries;
    this.now = options.now ?? Date.now;
  }

  get size(): number {
    return this.entries.size;
  }

  /** The cached value for `key`, else the result of `load()` (shared with concurrent callers). */
  async get(key: string, load: () => Promise<V>): Promise<CacheResult<V>> {
    const entry = this.entries.get(key);
    if (entry !== undefined) {
      if (entry.expires > this.now()) {
        // Re-insert: Map order is the LRU order.
        this.entries.delete(key);
        this.entries.set(key, entry);
        return { value: entry.value, hit: true };
      }
      this.entries.delete(key);
    }
    let pending = this.inflight.get(key);
    if (pending === undefined) {
      pending = load().then(
        (value) => {
          this.inflight.delete(key);
          this.store(key, value);
          return value;
        },
        (err: unknown) => {
          this.inflight.delete(key);
          throw err;
        },
      );
      this.inflight.set(key, pending);
    }
    return { value: await pending, hit: false };
  }

  clear(): void {
    this.entries.clear();
  }

  /** Drops `key`'s value, so the next get reads afresh (a request already in flight is still shared). */
  forget(key: string): void {
    this.entries.delete(key);
  }

  private store(key: string, value: V): void {
    if (this.ttlMs === 0) return;
    this.entries.delete(key);
    this.entries.set(key, { value, expires: this.now() + this.ttlMs });
    while (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value;
      if (oldest === undefined) break;
      this.entries.delete(oldest);
    }
  }
}

/** Thrown by withDeadline when the work did not finish in time. */
export class DeadlineExceededError extends Error {
  override name = "DeadlineExceededError";
}

/**
 * `promise`, or a DeadlineExceededError after `ms`. The work itself goes on
 * (its result still fills the cache for the next request); the caller stops
 * waiting, so the webhook answers within its deadline whatever the API does.
 */
export function withDeadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DeadlineExceededError(`${what}: no answer within ${ms} ms`)), ms);
  });
  // The losing promise must not surface as an unhandled rejection later.
  promise.catch(() => undefined);
  return Promise.race([promise, deadline]).finally(() => clearTimeout(timer));
}
