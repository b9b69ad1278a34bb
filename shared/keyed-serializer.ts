// Runs work for one key at a time, in arrival order; different keys run
// concurrently. Within one process this gives what upstream's workqueue
// guarantees (an object is never synced by two workers at once), so two
// events for the same claim do not race each other to a 409. Across
// processes the conditional writes still decide; this only saves the
// conflict, never replaces it.

export class KeyedSerializer {
  private readonly tails = new Map<string, Promise<unknown>>();

  /** Number of keys with work running or waiting. */
  get busyKeys(): number {
    return this.tails.size;
  }

  run<T>(key: string, work: () => Promise<T>): Promise<T> {
    const before = this.tails.get(key);
    const mine = (before ? before.then(noop, noop) : Promise.resolve()).then(work);
    const tail = mine.then(noop, noop);
    this.tails.set(key, tail);
    void tail.then(() => {
      // The last one out forgets the key, so the map holds only busy keys.
      if (this.tails.get(key) === tail) this.tails.delete(key);
    });
    return mine;
  }
}

function noop(): void {}
