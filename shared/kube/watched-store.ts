// An ObjectStore kept current by a list + watch of one kind (KindWatcher,
// which restarts itself after failures). A process that lives across many
// requests (a Knative revision, a container) keeps one; a Lambda, frozen
// between invocations, should not.
//
// The copy is optional, the process is not: when the copy's estimated size
// passes a share of the heap limit (a cluster bigger than the process was
// sized for), it is dropped for good and its users fall back to what they did
// without it, instead of the process running out of memory. The estimate is
// by object count, not the heap in use, which a burst of garbage inflates.

import { getHeapStatistics } from "node:v8";
import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "../log.ts";
import type { KubeJsonClient } from "./json-client.ts";
import { KindWatcher } from "./kind-watcher.ts";
import { ObjectStore, type ObjectStoreOptions } from "./object-store.ts";
import type { ResourceDescriptor } from "./resources.ts";
import type { KubeObject } from "./types.ts";

export interface WatchedStore<T extends KubeObject> {
  readonly store: ObjectStore<T>;
  /** The first list has been applied and the copy is kept; before that (or once dropped) it promises nothing. */
  readonly synced: boolean;
  /** The copy was given up to spare the heap; it will not come back in this process. */
  readonly dropped: boolean;
  /**
   * True once synced (at once if it is); false when the copy is dropped first,
   * or once `windowMs` have passed since the store started. A copy whose first
   * list keeps failing (an API server down, RBAC without list/watch) holds
   * nobody up for longer than that.
   */
  whenSynced(windowMs: number): Promise<boolean>;
  stop(): Promise<void>;
}

export interface WatchedStoreOptions<T extends KubeObject> extends ObjectStoreOptions<T> {
  kubeConfig: KubeConfig;
  json: KubeJsonClient;
  resource: ResourceDescriptor;
  log: Logger;
  /** Drop the copy when its estimated size passes this share of the heap limit. Default 0.5. */
  maxHeapShare?: number;
  /** Estimated heap per object. Default 1536 bytes (a PV measured about 1.3 KiB). */
  bytesPerObject?: number;
  /** What the copy keeps of each object (its users read no more); default all of it. */
  keep?: (object: T) => T;
}

/** How many changes pass between two looks at the copy's size. */
const SIZE_CHECK_EVERY = 500;

export function startWatchedStore<T extends KubeObject>(options: WatchedStoreOptions<T>): WatchedStore<T> {
  const storeOptions: ObjectStoreOptions<T> = {
    indexBy: options.indexBy,
    ...(options.rememberDeleted !== undefined ? { rememberDeleted: options.rememberDeleted } : {}),
  };
  let store = new ObjectStore<T>(storeOptions);
  let synced = false;
  let dropped = false;
  let changes = 0;
  const startedAt = performance.now();
  const waiters = new Set<(synced: boolean) => void>();
  const settleWaiters = (): void => {
    for (const waiter of waiters) waiter(synced);
    waiters.clear();
  };
  const keep = options.keep ?? ((object: T) => object);
  const budgetBytes = (options.maxHeapShare ?? 0.5) * getHeapStatistics().heap_size_limit;
  const bytesPerObject = options.bytesPerObject ?? 1536;
  const checkSize = (): void => {
    const estimate = store.size * bytesPerObject;
    if (estimate <= budgetBytes) return;
    dropped = true;
    synced = false;
    options.log.warn(
      { kind: options.resource.kind, objects: store.size, estimateMiB: Math.round(estimate / 2 ** 20) },
      "the watched copy would crowd the heap; dropping it (raise --max-old-space-size to keep one)",
    );
    store = new ObjectStore<T>(storeOptions);
    settleWaiters();
    void watcher.stop();
  };
  const watcher = new KindWatcher({
    kubeConfig: options.kubeConfig,
    json: options.json,
    resource: options.resource,
    log: options.log,
    onChange: (action, object) => {
      if (dropped) return;
      store.apply(action, keep(object as T));
      if (++changes % SIZE_CHECK_EVERY === 0) checkSize();
    },
    onListed: (rv) => {
      if (dropped) return;
      store.listed(rv);
      synced = true;
      checkSize();
      settleWaiters();
    },
  });
  watcher.start();
  return {
    get store() {
      return store;
    },
    get synced() {
      return synced;
    },
    get dropped() {
      return dropped;
    },
    whenSynced: (windowMs) => {
      const left = startedAt + windowMs - performance.now();
      if (synced || dropped || left <= 0) return Promise.resolve(synced);
      return new Promise<boolean>((resolve) => {
        const done = (result: boolean): void => {
          clearTimeout(timer);
          waiters.delete(done);
          resolve(result);
        };
        const timer = setTimeout(() => done(false), left);
        timer.unref();
        waiters.add(done);
      });
    },
    stop: async () => {
      await watcher.stop();
      settleWaiters();
    },
  };
}

export interface LazyWatchedStore<T extends KubeObject> {
  /** The copy, started by the first call (whose caller finds it not yet synced) and the same one after. */
  get(): WatchedStore<T>;
  /** Ends the copy if it was started. */
  stop(): Promise<void>;
}

/** A watched copy started by its first use, so a process that never needs it watches nothing. */
export function lazyWatchedStore<T extends KubeObject>(options: WatchedStoreOptions<T>): LazyWatchedStore<T> {
  let started: WatchedStore<T> | undefined;
  return {
    get: () => {
      started ??= startWatchedStore<T>(options);
      return started;
    },
    stop: async () => {
      await started?.stop();
    },
  };
}
