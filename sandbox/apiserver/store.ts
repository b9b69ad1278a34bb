// The sandbox's "etcd": objects by resource and key, one global monotonic
// resourceVersion, and a bounded history of changes that watches replay from.
// It stores what it is given; the API semantics live in registry.ts.
import type { ObjectMeta as KnownObjectMeta } from "../../shared/kube/types.ts";
import { sortMapKeys } from "./map-keys.ts";
import type { ResourceType } from "./resources.ts";

/** Metadata as the API server holds it while it admits an object: even the name may be missing (generateName) until filled in. */
export type ObjectMeta = Partial<KnownObjectMeta>;

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  [key: string]: unknown;
}

export type WatchEventType = "ADDED" | "MODIFIED" | "DELETED";

export interface StoredChange {
  resourceVersion: bigint;
  resource: ResourceType;
  type: WatchEventType;
  /** The object after the change (for DELETED: its last state, stamped with the deletion's resourceVersion). */
  object: KubeObject;
  /** The object before the change, so watches can tell when it leaves or enters a selector. */
  previous: KubeObject | undefined;
}

export type ChangeListener = (change: StoredChange) => void;

export class TooOldResourceVersionError extends Error {}

function keyOf(namespace: string | undefined, name: string): string {
  return namespace ? `${namespace}/${name}` : name;
}

function resourceKey(t: ResourceType): string {
  return `${t.group}/${t.plural}`;
}

export class ObjectStore {
  private revision: bigint;
  private readonly buckets = new Map<string, Map<string, KubeObject>>();
  private history: StoredChange[] = [];
  /** Changes with a resourceVersion at or below this are no longer replayable. */
  private compactedThrough: bigint;
  private readonly listeners = new Set<ChangeListener>();
  readonly historyLimit: number;

  constructor(options: { historyLimit?: number; initialRevision?: bigint } = {}) {
    this.historyLimit = options.historyLimit ?? 10_000;
    this.revision = options.initialRevision ?? 1000n;
    this.compactedThrough = this.revision;
  }

  get currentRevision(): bigint {
    return this.revision;
  }

  nextRevision(): bigint {
    this.revision += 1n;
    return this.revision;
  }

  private bucket(t: ResourceType): Map<string, KubeObject> {
    const k = resourceKey(t);
    let b = this.buckets.get(k);
    if (!b) {
      b = new Map();
      this.buckets.set(k, b);
    }
    return b;
  }

  /** The stored object itself: callers must not mutate it. */
  peek(t: ResourceType, namespace: string | undefined, name: string): KubeObject | undefined {
    return this.bucket(t).get(keyOf(namespace, name));
  }

  /** Stored objects in key order (namespace, then name), as etcd lists them. */
  peekAll(t: ResourceType, namespace?: string): KubeObject[] {
    const out: KubeObject[] = [];
    for (const [k, o] of this.bucket(t)) {
      if (namespace === undefined || o.metadata.namespace === namespace) out.push(o);
      void k;
    }
    out.sort((a, b) => {
      const ka = keyOf(a.metadata.namespace, a.metadata.name ?? "");
      const kb = keyOf(b.metadata.namespace, b.metadata.name ?? "");
      return ka < kb ? -1 : ka > kb ? 1 : 0;
    });
    return out;
  }

  count(t: ResourceType): number {
    return this.bucket(t).size;
  }

  /**
   * Writes `object` (whose metadata.resourceVersion the caller already stamped) and records
   * the change. Its map fields are re-keyed in Go's order first, so every answer and watch
   * event writes them as kube-apiserver does.
   */
  put(t: ResourceType, type: "ADDED" | "MODIFIED", object: KubeObject): void {
    sortMapKeys(t, object);
    const key = keyOf(object.metadata.namespace, object.metadata.name ?? "");
    const b = this.bucket(t);
    const previous = b.get(key);
    b.set(key, object);
    this.record({
      resourceVersion: BigInt(object.metadata.resourceVersion ?? "0"),
      resource: t,
      type,
      object,
      previous,
    });
  }

  remove(t: ResourceType, namespace: string | undefined, name: string, lastState: KubeObject): void {
    const key = keyOf(namespace, name);
    const b = this.bucket(t);
    const previous = b.get(key);
    if (!previous) return;
    b.delete(key);
    this.record({
      resourceVersion: BigInt(lastState.metadata.resourceVersion ?? "0"),
      resource: t,
      type: "DELETED",
      object: lastState,
      previous,
    });
  }

  private record(change: StoredChange): void {
    this.history.push(change);
    if (this.history.length > this.historyLimit) {
      const drop = this.history.length - this.historyLimit;
      this.compactedThrough = this.history[drop - 1]!.resourceVersion;
      this.history = this.history.slice(drop);
    }
    for (const l of this.listeners) l(change);
  }

  /** Changes after `since`, oldest first; throws when `since` was compacted away (watch answers 410). */
  changesSince(since: bigint): StoredChange[] {
    if (since < this.compactedThrough) {
      throw new TooOldResourceVersionError(`too old resource version: ${since} (${this.compactedThrough})`);
    }
    // History is ordered by resourceVersion: binary search for the first newer change.
    let lo = 0;
    let hi = this.history.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.history[mid]!.resourceVersion <= since) lo = mid + 1;
      else hi = mid;
    }
    return this.history.slice(lo);
  }

  /** Forget all replayable history up to now, like an etcd compaction. */
  compact(): void {
    this.compactedThrough = this.revision;
    this.history = [];
  }

  subscribe(listener: ChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  clear(): void {
    this.buckets.clear();
    this.history = [];
    this.compactedThrough = this.revision;
  }
}
