// The cluster facts the admission rules need: every StorageClass (default
// class, a claim's class), and one CSIDriver by name. StorageClasses come from
// the process's watched copy once its first list is in, as kube-apiserver's
// DefaultStorageClass plugin reads its informer; a burst of reviews then
// reads no API at all. Otherwise each answer is read through KubeJsonClient
// and a LookupCache, within a deadline; a failure or a missed deadline is an
// answer too ({ok: false}), so the hook can apply its failure policy instead
// of hanging or throwing.

import { statusCodeOf } from "../kube/api-errors.ts";
import type { KubeJsonClient } from "../kube/json-client.ts";
import { csiDrivers, storageClasses } from "../kube/resources.ts";
import type { StorageClassCopy } from "../kube/storage-class-copy.ts";
import type { CSIDriver, StorageClass } from "../kube/types.ts";
import { counter, type Registry } from "../metrics.ts";
import { DeadlineExceededError, LookupCache, withDeadline } from "./lookup-cache.ts";

export type Lookup<T> = { ok: true; value: T } | { ok: false; error: string };

export interface ClusterLookups {
  /**
   * Every StorageClass; `fresh` skips the copy and the cache, for a rule about
   * to refuse (or skip) something on a list that may predate the class it names.
   */
  storageClasses(options?: { fresh?: boolean }): Promise<Lookup<StorageClass[]>>;
  /** The CSIDriver, or undefined when there is none by that name. */
  csiDriver(name: string): Promise<Lookup<CSIDriver | undefined>>;
}

export interface ClusterLookupOptions {
  /** Per lookup, including waiting for a request another review started. */
  timeoutMs: number;
  cacheTtlMs: number;
  cacheMaxEntries: number;
  /** The process's watched copy of the StorageClasses (storage-class-copy.ts); none: every list is read. */
  classCopy?: () => StorageClassCopy;
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
  const cacheOptions = { ttlMs: options.cacheTtlMs, maxEntries: options.cacheMaxEntries };
  // StorageClasses are read as one list (one key); CSIDrivers one by name (bounded by maxEntries).
  const classCache = new LookupCache<StorageClass[]>(cacheOptions);
  const driverCache = new LookupCache<CSIDriver | null>(cacheOptions);
  const lookups = options.metrics
    ? counter(options.metrics, {
        name: "admission_lookups_total",
        help: "Lookups made for admission reviews, by resource and result (copy, hit, miss, error, timeout)",
        labelNames: ["resource", "result"] as const,
      })
    : undefined;

  async function lookup<T>(resource: string, read: () => Promise<{ value: T; hit: boolean }>) {
    try {
      const { value, hit } = await withDeadline(read(), options.timeoutMs, `looking up ${resource}`);
      lookups?.inc({ resource, result: hit ? "hit" : "miss" });
      return { ok: true as const, value };
    } catch (err) {
      lookups?.inc({ resource, result: err instanceof DeadlineExceededError ? "timeout" : "error" });
      return { ok: false as const, error: errorText(err) };
    }
  }

  return {
    storageClasses(o = {}) {
      const copy = o.fresh ? undefined : options.classCopy?.();
      if (copy?.synced) {
        lookups?.inc({ resource: "storageclasses", result: "copy" });
        return Promise.resolve({ ok: true, value: [...copy.store.items()] });
      }
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
