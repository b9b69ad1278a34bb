// An ObjectStore kept current by a list + watch of one kind (KindWatcher,
// which restarts itself after failures). A process that lives across many
// requests (a Knative revision, a container) keeps one; a Lambda, frozen
// between invocations, should not.

import type { KubeConfig } from "@kubernetes/client-node";
import type { Logger } from "../log.ts";
import type { KubeJsonClient } from "./json-client.ts";
import { KindWatcher } from "./kind-watcher.ts";
import { ObjectStore } from "./object-store.ts";
import type { ResourceDescriptor } from "./resources.ts";
import type { KubeObject } from "./types.ts";

export interface WatchedStore<T extends KubeObject> {
  readonly store: ObjectStore<T>;
  /** The first list has been applied; before that the store promises nothing. */
  readonly synced: boolean;
  stop(): Promise<void>;
}

export interface WatchedStoreOptions {
  kubeConfig: KubeConfig;
  json: KubeJsonClient;
  resource: ResourceDescriptor;
  log: Logger;
}

export function startWatchedStore<T extends KubeObject>(options: WatchedStoreOptions): WatchedStore<T> {
  const store = new ObjectStore<T>();
  let synced = false;
  const watcher = new KindWatcher({
    kubeConfig: options.kubeConfig,
    json: options.json,
    resource: options.resource,
    log: options.log,
    onChange: (action, object) => store.apply(action, object as T),
    onListed: (rv) => {
      store.listed(rv);
      synced = true;
    },
  });
  watcher.start();
  return {
    store,
    get synced() {
      return synced;
    },
    stop: () => watcher.stop(),
  };
}
