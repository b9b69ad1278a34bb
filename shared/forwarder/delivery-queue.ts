// One destination's queue: per-object order, bounded concurrency, bounded memory.
//
// - Order: changes of one object (kind/namespace/name) go out one at a time,
//   oldest first; the next starts only once the previous delivery is over
//   (delivered, given up, or superseded). Different objects go out in
//   parallel, up to `concurrency` deliveries at once, fairly (objects take
//   turns in the order they became ready).
// - Batches: a delivery carries up to `maxBatch` changes, of different
//   objects, taken when a delivery slot frees up. Under light load every
//   change goes out alone at once; only a backlog (all slots busy) is sent in
//   batches, so batching adds no wait, and cuts the receiver's per-request
//   cost exactly when it is the bottleneck.
// - Coalescing: a change for an object whose last queued change is still
//   waiting is folded into it (see coalesce in change.ts), so a busy object
//   costs one queue slot however often it changes, and an in-flight delivery
//   that is being retried gives way to a newer state as soon as one is queued
//   (`superseded`), instead of pushing stale state at a struggling receiver.
// - Memory: at most `maxQueue` changes wait (in-flight ones excluded; they are
//   bounded by `concurrency`). When full, a change that cannot be folded into
//   one already waiting is dropped and reported: the newest is dropped, not the
//   oldest, because everything queued ahead of it may already be owed a
//   receiver's attention, and the object's next change (or the functions'
//   periodic resync) carries its state anyway.

import { type Change, coalesce } from "./change.ts";

export interface DeliveryQueueOptions {
  concurrency: number;
  maxQueue: number;
  /** Changes (of different objects) one delivery may carry. Default 1. */
  maxBatch?: number;
  /**
   * Delivers changes of different objects; resolves once done with them,
   * whatever the outcome. `superseded()` tells a retry loop that newer states
   * of all those objects are queued and have taken over (true means: stop, do
   * not send these again).
   */
  deliver(changes: readonly Change[], superseded: () => boolean): Promise<void>;
  /** Called whenever the number of waiting or in-flight changes moves. */
  onDepthChange?(waiting: number, inFlight: number): void;
}

export type EnqueueResult = "queued" | "coalesced" | "dropped";

interface ObjectLine {
  busy: boolean;
  waiting: Change[];
}

/** One change of a delivery, with the line it came from. */
interface InFlight {
  key: string;
  line: ObjectLine;
  change: Change;
}

export class DeliveryQueue {
  private readonly options: DeliveryQueueOptions;
  private readonly maxBatch: number;
  private readonly lines = new Map<string, ObjectLine>();
  /** Keys with a waiting change and nothing in flight, oldest first (a Set keeps insertion order). */
  private readonly ready = new Set<string>();
  private waitingCount = 0;
  private active = 0;
  private closed = false;
  private idleWaiters: Array<() => void> = [];

  constructor(options: DeliveryQueueOptions) {
    if (!(Number.isInteger(options.concurrency) && options.concurrency > 0))
      throw new RangeError(`concurrency must be a positive integer, got ${options.concurrency}`);
    if (!(Number.isInteger(options.maxQueue) && options.maxQueue > 0))
      throw new RangeError(`maxQueue must be a positive integer, got ${options.maxQueue}`);
    const maxBatch = options.maxBatch ?? 1;
    if (!(Number.isInteger(maxBatch) && maxBatch > 0))
      throw new RangeError(`maxBatch must be a positive integer, got ${maxBatch}`);
    this.options = options;
    this.maxBatch = maxBatch;
  }

  /** Changes waiting to be sent (not counting in-flight ones). */
  get waiting(): number {
    return this.waitingCount;
  }

  get inFlight(): number {
    return this.active;
  }

  enqueue(change: Change): EnqueueResult {
    if (this.closed) return "dropped";
    const line = this.lines.get(change.key);
    const last = line?.waiting.at(-1);
    if (line !== undefined && last !== undefined) {
      const merged = coalesce(last, change);
      if (merged !== undefined) {
        line.waiting[line.waiting.length - 1] = merged;
        return "coalesced";
      }
    }
    if (this.waitingCount >= this.options.maxQueue) return "dropped";
    if (line === undefined) {
      this.lines.set(change.key, { busy: false, waiting: [change] });
      this.ready.add(change.key);
    } else {
      line.waiting.push(change);
      if (!line.busy) this.ready.add(change.key);
    }
    this.waitingCount++;
    this.pump();
    this.reportDepth();
    return "queued";
  }

  /** Resolves once nothing waits and nothing is in flight. */
  idle(): Promise<void> {
    if (this.waitingCount === 0 && this.active === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Stops taking changes and removes the waiting ones (returned); in-flight ones finish on their own. */
  close(): Change[] {
    this.closed = true;
    const dropped: Change[] = [];
    for (const line of this.lines.values()) dropped.push(...line.waiting.splice(0));
    this.ready.clear();
    this.waitingCount = 0;
    for (const [key, line] of this.lines) if (!line.busy) this.lines.delete(key);
    this.reportDepth();
    this.notifyIfIdle();
    return dropped;
  }

  private pump(): void {
    while (this.active < this.options.concurrency && this.ready.size > 0) {
      const batch: InFlight[] = [];
      for (const key of this.ready) {
        if (batch.length >= this.maxBatch) break;
        this.ready.delete(key);
        const line = this.lines.get(key);
        const change = line?.waiting.shift();
        if (line === undefined || change === undefined) continue;
        this.waitingCount--;
        line.busy = true;
        batch.push({ key, line, change });
      }
      if (batch.length === 0) continue;
      this.active++;
      void this.run(batch);
    }
  }

  private async run(batch: readonly InFlight[]): Promise<void> {
    try {
      await this.options.deliver(
        batch.map((b) => b.change),
        () => this.supersede(batch),
      );
    } catch {
      // deliver() reports its own failures; a throw must not wedge the objects' lines.
    } finally {
      this.active--;
      for (const { key, line } of batch) {
        line.busy = false;
        if (line.waiting.length > 0 && !this.closed) this.ready.add(key);
        else if (line.waiting.length === 0) this.lines.delete(key);
      }
      this.pump();
      this.reportDepth();
      this.notifyIfIdle();
    }
  }

  /**
   * Folds the in-flight changes into the next waiting ones of their objects,
   * only if every one of them may be folded: a retry stops only when nothing
   * it carries would be lost.
   */
  private supersede(batch: readonly InFlight[]): boolean {
    const merged: Change[] = [];
    for (const { line, change } of batch) {
      const next = line.waiting[0];
      const folded = next === undefined ? undefined : coalesce(change, next);
      if (folded === undefined) return false;
      merged.push(folded);
    }
    batch.forEach(({ line }, i) => {
      line.waiting[0] = merged[i]!;
    });
    return true;
  }

  private reportDepth(): void {
    this.options.onDepthChange?.(this.waitingCount, this.active);
  }

  private notifyIfIdle(): void {
    if (this.waitingCount !== 0 || this.active !== 0) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const resolve of waiters) resolve();
  }
}
