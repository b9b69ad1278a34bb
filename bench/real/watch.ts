// What the real server stored, seen the way a controller sees it: a LIST +
// WATCH of each kind the workloads touch. Every stored change is one watch
// event, so counting them counts writes (the bench's own included: take
// those out); the latest copy of each object answers "are we there yet"
// without polling the server (polling would add reads to the figures).

import type { KubeConfig } from "@kubernetes/client-node";
import type { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { KindWatcher, type WatchAction } from "../../shared/kube/kind-watcher.ts";
import type { ResourceDescriptor } from "../../shared/kube/resources.ts";
import type { KubeObject } from "../../shared/kube/types.ts";
import { createLogger } from "../../shared/log.ts";
import type { Tally } from "./figures.ts";

const TYPES: Record<WatchAction, string> = { add: "ADDED", update: "MODIFIED", delete: "DELETED" };

export interface ClusterWatch {
  /** Current objects of a kind (by plural) that `mine` accepted, keyed namespace/name. */
  objects(plural: string): ReadonlyMap<string, KubeObject>;
  /** Changes counted since the watch synced ("MODIFIED persistentvolumeclaims": n). */
  tally(): Tally;
  /** Resolves once `done()` holds (checked after every change), rejects after `timeoutMs`. */
  until(done: () => boolean, timeoutMs: number, what: string): Promise<void>;
  close(): Promise<void>;
}

export interface ClusterWatchOptions {
  kubeConfig: KubeConfig;
  json: KubeJsonClient;
  resources: readonly ResourceDescriptor[];
  /** Which objects belong to the bench run; others are neither kept nor counted. */
  mine(resource: ResourceDescriptor, object: KubeObject): boolean;
}

const keyOf = (o: KubeObject): string => `${o.metadata.namespace ?? ""}/${o.metadata.name ?? ""}`;

export async function watchCluster(options: ClusterWatchOptions): Promise<ClusterWatch> {
  const log = createLogger({ name: "bench-watch", level: "warn" });
  const stores = new Map<string, Map<string, KubeObject>>();
  const counts: Tally = {};
  const waiters = new Set<() => void>();
  let counting = false;
  const watchers = options.resources.map((resource) => {
    const store = new Map<string, KubeObject>();
    stores.set(resource.plural, store);
    return new KindWatcher({
      kubeConfig: options.kubeConfig,
      json: options.json,
      resource,
      log,
      onChange: (action, object) => {
        if (!options.mine(resource, object)) return;
        if (action === "delete") store.delete(keyOf(object));
        else store.set(keyOf(object), object);
        if (counting) {
          const key = `${TYPES[action]} ${resource.plural}`;
          counts[key] = (counts[key] ?? 0) + 1;
        }
        for (const w of [...waiters]) w();
      },
    });
  });
  for (const w of watchers) w.start();
  await Promise.all(watchers.map((w) => w.synced));
  counting = true;
  return {
    objects: (plural) => stores.get(plural) ?? new Map(),
    tally: () => ({ ...counts }),
    until: (done, timeoutMs, what) =>
      new Promise<void>((resolve, reject) => {
        if (done()) return resolve();
        const check = (): void => {
          if (!done()) return;
          clearTimeout(timer);
          waiters.delete(check);
          resolve();
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
        }, timeoutMs);
        waiters.add(check);
      }),
    close: async () => {
      waiters.clear();
      await Promise.all(watchers.map((w) => w.stop()));
    },
  };
}
