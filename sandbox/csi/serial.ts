// Runs mutating calls one at a time. The driver's checks ("does a volume
// with this name exist?") and the writes that follow must not interleave,
// or twenty concurrent CreateVolume calls with one name make twenty volumes.

export class SerialQueue {
  private tail: Promise<unknown> = Promise.resolve();

  run<T>(task: () => Promise<T>): Promise<T> {
    const result = this.tail.then(task);
    // The chain only orders the tasks; each caller sees its own outcome.
    this.tail = result.catch(() => undefined);
    return result;
  }

  /** Resolves once everything queued so far has finished. */
  idle(): Promise<void> {
    return this.tail.then(() => undefined);
  }
}
