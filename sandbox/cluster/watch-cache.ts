// What the sandbox's scheduler, kubelets and pod gc see of the cluster: a
// list + watch copy of the kinds they need (KindWatcher, which restarts
// itself), and callbacks on every change so they react as informer handlers
// would. One copy can serve them all, as a shared informer factory does.
// Reads may lag the API by a watch event; every write they make is
// conditional, so a stale read costs a 409 and another pass, never a wrong write.
import type { KubeConfig } from "@kubernetes/client-node";
import type { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { KindWatcher } from "../../shared/kube/kind-watcher.ts";
import type { ResourceDescriptor } from "../../shared/kube/resources.ts";
import type { KubeObject } from "../../shared/kube/types.ts";
import type { Logger } from "../../shared/log.ts";

export interface WatchCacheOptions {
  kubeConfig: KubeConfig;
  json: KubeJsonClient;
  resources: readonly ResourceDescriptor[];
  log: Logger;
}

export type ChangeListener = (resource: ResourceDescriptor, object: KubeObject) => void;

function keyOf(o: KubeObject): string {
  return o.metadata.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : o.metadata.name;
}

export class WatchCache {
  private readonly watchers: KindWatcher[] = [];
  private readonly objects = new Map<ResourceDescriptor, Map<string, KubeObject>>();
  private readonly listeners = new Set<ChangeListener>();
  private started = false;

  constructor(options: WatchCacheOptions) {
    for (const resource of options.resources) {
      const byKey = new Map<string, KubeObject>();
      this.objects.set(resource, byKey);
      this.watchers.push(
        new KindWatcher({
          kubeConfig: options.kubeConfig,
          json: options.json,
          resource,
          log: options.log,
          onChange: (action, object) => {
            if (action === "delete") byKey.delete(keyOf(object));
            else byKey.set(keyOf(object), object);
            for (const listener of this.listeners) listener(resource, object);
          },
        }),
      );
    }
  }

  /** Calls `listener` after every change to any watched kind; returns how to stop. */
  subscribe(listener: ChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Whether every kind a component needs is watched here. */
  covers(resources: readonly ResourceDescriptor[]): boolean {
    return resources.every((r) => this.objects.has(r));
  }

  /** Starts watching (once; later calls do nothing). */
  start(): void {
    if (this.started) return;
    this.started = true;
    for (const w of this.watchers) w.start();
  }

  /** Resolves once every kind's first list is in. */
  async synced(): Promise<void> {
    await Promise.all(this.watchers.map((w) => w.synced));
  }

  list<T extends KubeObject>(resource: ResourceDescriptor): T[] {
    return [...(this.objects.get(resource)?.values() ?? [])] as T[];
  }

  get<T extends KubeObject>(resource: ResourceDescriptor, name: string, namespace?: string): T | undefined {
    return this.objects.get(resource)?.get(namespace ? `${namespace}/${name}` : name) as T | undefined;
  }

  async stop(): Promise<void> {
    await Promise.all(this.watchers.map((w) => w.stop()));
  }
}
