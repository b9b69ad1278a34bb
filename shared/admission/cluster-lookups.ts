// The cluster facts the admission rules need, read from the API through
// KubeJsonClient: every StorageClass (default class, a claim's class), and
// one CSIDriver by name. Each answer comes through a LookupCache and within a
// deadline; a failure or a missed deadline is an answer too ({ok: false}),
// so the hook can apply its failure policy instead of hanging or throwing.

import { statusCodeOf } from "../kube/api-errors.ts";
import type { KubeJsonClient } from "../kube/json-client.ts";
import { csiDrivers, storageClasses } from "../kube/resources.ts";
import type { CSIDriver, StorageClass } from "../kube/types.ts";
import { counter, type Registry } from "../metrics.ts";
import { type CacheResult, DeadlineExceededError, LookupCache, withDeadline } from "./lookup-cache.ts";

export type Lookup<T> = { ok: true; value: T } | { ok: false; error: string };

export interface ClusterLookups {
  /**
   * Every StorageClass; `fresh` skips the cache, for a rule about to refuse
   * (or skip) something on a cached list that may predate the class it names.
   */
  storageClasses(options?: { fresh?: boolean }): Promise<Lookup<StorageClass[]>>;
  /** The CSIDriver, or undefined when there is none by that name. */
  csiDriver(name: string): Promise<Lookup<CSIDriver | undefined>>;
}

export interface ClusterLookupOptions {
  /** Per lookup, including waiting for a request another review started. */
  timeoutMs: number;
  cacheTtlMs: number;
  /** How long past cacheTtlMs a value is still served while one request refreshes it. */
  cacheStaleMs?: number;
  cacheMaxEntries: number;
  metrics?: Registry;
}

const MAX_ERROR_CHARS = 300;

function errorText(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return text.length <= MAX_ERROR_CHARS ? text : `${text.slice(0, MAX_ERROR_CHARS)}…`;
}

export function createClusterLookups(
  kube: Pick<KubeJsonClient, "get" | "list">,
  options: ClusterLookupOptions,
): ClusterLookups {
  const cacheOptions = {
    ttlMs: options.cacheTtlMs,
    staleMs: options.cacheStaleMs ?? 0,
    maxEntries: options.cacheMaxEntries,
  };
  // StorageClasses are read as one list (one key); CSIDrivers one by name (bounded by maxEntries).
  const classCache = new LookupCache<StorageClass[]>(cacheOptions);
  const driverCache = new LookupCache<CSIDriver | null>(cacheOptions);
  const lookups = options.metrics
    ? counter(options.metrics, {
        name: "admission_lookups_total",
        help: "API lookups made for admission reviews, by resource and result (hit, stale, miss, error, timeout)",
        labelNames: ["resource", "result"] as const,
      })
    : undefined;

  async function lookup<T>(resource: string, read: () => Promise<CacheResult<T>>) {
    try {
      const { value, hit, stale } = await withDeadline(read(), options.timeoutMs, `looking up ${resource}`);
      lookups?.inc({ resource, result: stale ? "stale" : hit ? "hit" : "miss" });
      return { ok: true as const, value };
    } catch (err) {
      lookups?.inc({ resource, result: err instanceof DeadlineExceededError ? "timeout" : "error" });
      return { ok: false as const, error: errorText(err) };
    }
  }

  return {
    storageClasses(o = {}) {
      if (o.fresh) classCache.forget("all");
      return lookup("storageclasses", () =>
        classCache.get("all", async () => (await kube.list<StorageClass>(storageClasses)).items),
      );
    },
    async csiDriver(name) {
      const found = await lookup("csidrivers", () =>
        driverCache.get(name, async () => {
          try {
            return await kube.get<CSIDriver>(csiDrivers, name);
          } catch (err) {
            // "Does not exist" is an answer worth caching; other failures are not.
            if (statusCodeOf(err) === 404) return null;
            throw err;
          }
        }),
      );
      return found.ok ? { ok: true, value: found.value ?? undefined } : found;
    },
  };
}
