// The in-memory copy of one kind that a watch keeps, and what it can promise.
// A decision taken on it is safe only as ARCHITECTURE.md "Watched copies"
// says: the write is conditional on the copy's resourceVersion, and absence
// is believed only where `covers` proves it.
// What it does promise, when resourceVersions are etcd revisions (decimal,
// one global counter, as on every etcd-backed apiserver and the sandbox):
// `covers(rv)` is true only if every change of this kind up to revision rv is
// reflected, because watch events arrive in revision order and a fresh list
// reflects everything up to its own revision. So "nothing here matches" can
// be trusted for an object read at or before that revision.

import { compareResourceVersions } from "./resource-version.ts";
import type { KubeObject } from "./types.ts";

export type StoreChange = "add" | "update" | "delete";

function keyOf(o: KubeObject): string {
  const ns = o.metadata.namespace;
  return ns ? `${ns}/${o.metadata.name}` : o.metadata.name;
}

/** a is newer than b; when either is not comparable, true (take what arrived last). */
function newerThan(a: string | undefined, b: string | undefined): boolean {
  const order = compareResourceVersions(a, b);
  return order === undefined || order > 0;
}

export interface ObjectStoreOptions<T extends KubeObject> {
  /**
   * A secondary key per object (e.g. the claim a PV is bound to): byIndex(key)
   * then answers in time proportional to the objects with that key.
   */
  indexBy?: (object: T) => string;
  /**
   * Remember the UIDs of this many deleted objects (the newest), so that
   * wasDeleted can prove an object gone for good; 0 (default): none. Only for
   * a copy of every object of its kind: a watch with a selector also says
   * "deleted" of an object that merely stopped matching.
   */
  rememberDeleted?: number;
}

export class ObjectStore<T extends KubeObject> {
  private readonly objects = new Map<string, T>();
  private readonly indexBy: ((object: T) => string) | undefined;
  /** indexBy(object) -> store key -> object. */
  private readonly index = new Map<string, Map<string, T>>();
  /** The newest revision known to be reflected here; undefined until a list is applied. */
  private newest: string | undefined;
  /** Revision of the last list merged by replaceWithList: older add/update events are already in it. */
  private floor: string | undefined;
  private snapshot: T[] | undefined;
  /** performance.now() of the last event or list applied. */
  private lastChangeAt = Number.NEGATIVE_INFINITY;
  private readonly waiters = new Set<{ rv: string; done: (covered: boolean) => void }>();
  private readonly deletedUids = new Set<string>();
  private readonly rememberDeleted: number;

  constructor(options: ObjectStoreOptions<T> = {}) {
    this.indexBy = options.indexBy;
    this.rememberDeleted = options.rememberDeleted ?? 0;
  }

  /**
   * The API server reported the object with this UID deleted (a watch's
   * DELETED, or a relist without it). UIDs are never reused, so it is gone
   * for good, however far behind the copy is otherwise. False also when the
   * deletion is older than what the store remembers.
   */
  wasDeleted(uid: string | undefined): boolean {
    return uid !== undefined && this.deletedUids.has(uid);
  }

  get size(): number {
    return this.objects.size;
  }

  /** Every object, as one array reused until the next change (callers must not modify it). */
  items(): readonly T[] {
    this.snapshot ??= [...this.objects.values()];
    return this.snapshot;
  }

  /** The objects whose indexBy key is `key`; undefined when the store has no index. */
  byIndex(key: string): readonly T[] | undefined {
    if (this.indexBy === undefined) return undefined;
    const found = this.index.get(key);
    return found ? [...found.values()] : [];
  }

  get(namespace: string, name: string): T | undefined {
    return this.objects.get(namespace ? `${namespace}/${name}` : name);
  }

  /** One watch event (or a relist's difference). */
  apply(change: StoreChange, object: T): void {
    const key = keyOf(object);
    const rv = object.metadata.resourceVersion;
    const stored = this.objects.get(key);
    if (change === "delete") {
      this.noteDeleted(object.metadata.uid);
      // A delete carries the deletion revision (or, after a relist, the last known one).
      if (stored && !newerThan(stored.metadata.resourceVersion, rv)) this.remove(key);
    } else if (newerThan(rv, this.floor) && (!stored || newerThan(rv, stored.metadata.resourceVersion))) {
      this.put(key, object);
    }
    this.advance(rv);
  }

  /**
   * An object this process has just written, as the API answered: kept if
   * the copy holds that very object (same UID) at an older revision, so the
   * process judges its own write's echo on the state it already knows.
   * Never adds an object (a deletion the watch delivered stays) and never
   * moves the revision mark: `covers` speaks for the watch alone.
   */
  learn(object: T): void {
    const key = keyOf(object);
    const stored = this.objects.get(key);
    if (stored === undefined || stored.metadata.uid !== object.metadata.uid) return;
    if (compareResourceVersions(object.metadata.resourceVersion, stored.metadata.resourceVersion) === 1)
      this.put(key, object);
  }

  /** The list a watch started from has been applied (through apply): everything up to its revision is here. */
  listed(resourceVersion: string | undefined): void {
    this.advance(resourceVersion);
  }

  /**
   * A consistent list read by someone else: take it as the state at its
   * revision, keeping only objects a watch has already shown to be newer.
   */
  replaceWithList(items: readonly T[], resourceVersion: string | undefined): void {
    const fromList = new Map<string, T>();
    for (const o of items) fromList.set(keyOf(o), o);
    for (const [key, stored] of this.objects) {
      if (!fromList.has(key) && !newerThan(stored.metadata.resourceVersion, resourceVersion)) {
        this.noteDeleted(stored.metadata.uid);
        this.remove(key);
      }
    }
    for (const [key, listed] of fromList) {
      const stored = this.objects.get(key);
      if (!stored || !newerThan(stored.metadata.resourceVersion, listed.metadata.resourceVersion)) {
        this.put(key, listed);
      }
    }
    this.snapshot = undefined;
    if (compareResourceVersions(resourceVersion, this.floor) !== -1) this.floor = resourceVersion;
    this.advance(resourceVersion);
  }

  /** Whether every change up to revision rv is reflected here (false when that cannot be known). */
  covers(resourceVersion: string | undefined): boolean {
    const order = compareResourceVersions(this.newest, resourceVersion);
    return order !== undefined && order >= 0;
  }

  /** Whether an event or list arrived within the last `ms`: a busy watch, soon past any recent revision. */
  changedWithin(ms: number): boolean {
    return performance.now() - this.lastChangeAt <= ms;
  }

  /** Resolves true once covers(rv), or false after `timeoutMs` (at once for an opaque revision). */
  whenCovers(resourceVersion: string | undefined, timeoutMs: number): Promise<boolean> {
    if (this.covers(resourceVersion)) return Promise.resolve(true);
    const rv = resourceVersion;
    if (rv === undefined || compareResourceVersions(rv, rv) !== 0) return Promise.resolve(false);
    return new Promise((resolve) => {
      const waiter = {
        rv,
        done: (covered: boolean) => {
          clearTimeout(timer);
          this.waiters.delete(waiter);
          resolve(covered);
        },
      };
      const timer = setTimeout(() => waiter.done(false), timeoutMs);
      timer.unref();
      this.waiters.add(waiter);
    });
  }

  private advance(rv: string | undefined): void {
    this.lastChangeAt = performance.now();
    if (this.newest === undefined || compareResourceVersions(rv, this.newest) === 1) {
      // Only comparable revisions move the mark; an opaque one leaves "covers" false.
      if (compareResourceVersions(rv, rv) === 0) this.newest = rv;
    }
    for (const waiter of this.waiters) if (this.covers(waiter.rv)) waiter.done(true);
  }

  private put(key: string, object: T): void {
    this.unindex(key);
    this.objects.set(key, object);
    this.snapshot = undefined;
    if (this.indexBy === undefined) return;
    const indexKey = this.indexBy(object);
    let bucket = this.index.get(indexKey);
    if (bucket === undefined) {
      bucket = new Map();
      this.index.set(indexKey, bucket);
    }
    bucket.set(key, object);
  }

  private noteDeleted(uid: string | undefined): void {
    if (this.rememberDeleted === 0 || uid === undefined || uid === "") return;
    this.deletedUids.add(uid);
    if (this.deletedUids.size > this.rememberDeleted) {
      const oldest = this.deletedUids.values().next().value;
      if (oldest !== undefined) this.deletedUids.delete(oldest);
    }
  }

  private remove(key: string): void {
    this.unindex(key);
    this.objects.delete(key);
    this.snapshot = undefined;
  }

  private unindex(key: string): void {
    const stored = this.objects.get(key);
    if (this.indexBy === undefined || stored === undefined) return;
    const indexKey = this.indexBy(stored);
    const bucket = this.index.get(indexKey);
    bucket?.delete(key);
    if (bucket?.size === 0) this.index.delete(indexKey);
  }
}
