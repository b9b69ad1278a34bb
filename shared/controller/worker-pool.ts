// Bounds on concurrent work. forEachBounded: the resync pass's pool, at most
// `concurrency` items at once, in list order, each item's failure its own
// (work reports it). SyncSlots: the keys one process syncs at once, events
// and resync alike, as upstream's worker goroutines bound a work queue.

import { AsyncLocalStorage } from "node:async_hooks";

export async function forEachBounded<T>(
  items: readonly T[],
  concurrency: number,
  work: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) await work(items[next++] as T);
  };
  const workers = Math.min(Math.max(1, Math.floor(concurrency)), items.length);
  await Promise.all(Array.from({ length: workers }, worker));
}

/**
 * At most `size` pieces of work at once; the rest wait in arrival order.
 * Work started from inside a slot (a sync an executor runs for another key)
 * runs in its caller's slot: waiting for a second one could deadlock.
 */
export class SyncSlots {
  readonly size: number;
  private busy = 0;
  private readonly waiting: (() => void)[] = [];
  private readonly inside = new AsyncLocalStorage<true>();

  constructor(size: number) {
    if (!Number.isInteger(size) || size < 1)
      throw new RangeError(`slots must be an integer of at least 1, got ${size}`);
    this.size = size;
  }

  /** Work running now (for tests and metrics). */
  get running(): number {
    return this.busy;
  }

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.inside.getStore()) return work();
    if (this.busy >= this.size) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.busy++;
    try {
      return await this.inside.run(true, work);
    } finally {
      // The slot passes straight to the next waiter, so a newcomer cannot take it first.
      const next = this.waiting.shift();
      if (next) next();
      else this.busy--;
    }
  }
}
