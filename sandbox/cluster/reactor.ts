// Runs a component's pass after every change it watches and on a resync
// tick, one pass at a time: a change during a pass brings one more pass, so
// nothing seen is left undone and passes never overlap.
export class Reactor {
  private running = false;
  private again = false;
  private stopped = false;
  private readonly timer: NodeJS.Timeout;
  private idleWaiters: (() => void)[] = [];
  private readonly pass: () => Promise<void>;
  private readonly onError: (err: unknown) => void;

  constructor(pass: () => Promise<void>, resyncMs: number, onError: (err: unknown) => void) {
    this.pass = pass;
    this.onError = onError;
    this.timer = setInterval(() => this.poke(), resyncMs);
  }

  /** Asks for a pass soon (at once when idle, after the running one otherwise). */
  poke(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    setImmediate(() => void this.loop());
  }

  private async loop(): Promise<void> {
    do {
      this.again = false;
      if (this.stopped) break;
      try {
        await this.pass();
      } catch (err) {
        this.onError(err);
      }
    } while (this.again);
    this.running = false;
    for (const done of this.idleWaiters.splice(0)) done();
  }

  /** Stops ticking and waits for a running pass to end. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    if (this.running) await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }
}
