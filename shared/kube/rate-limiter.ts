// A token bucket in front of the API client, as client-go's --kube-api-qps /
// --kube-api-burst: `burst` requests may go at once, then one per 1/qps
// seconds. Waiters are served in arrival order, so a busy process cannot
// starve one request behind later ones.

export interface ApiRate {
  /** Requests per second, sustained (> 0). */
  qps: number;
  /** Requests that may go at once after a quiet spell (>= 1). */
  burst: number;
}

export class TokenBucket {
  private readonly qps: number;
  private readonly burst: number;
  private readonly now: () => number;
  private tokens: number;
  private last: number;
  /** When the last reserved token becomes available; reservations queue behind it. */
  private queue: Promise<void> = Promise.resolve();

  constructor(rate: ApiRate, now: () => number = () => performance.now()) {
    if (!(rate.qps > 0) || !Number.isFinite(rate.qps))
      throw new RangeError(`qps must be above 0, got ${rate.qps}`);
    if (!Number.isInteger(rate.burst) || rate.burst < 1)
      throw new RangeError(`burst must be an integer of at least 1, got ${rate.burst}`);
    this.qps = rate.qps;
    this.burst = rate.burst;
    this.now = now;
    this.tokens = rate.burst;
    this.last = now();
  }

  /** Resolves when the caller may send one request. */
  take(): Promise<void> {
    const turn = this.queue.then(() => this.waitForToken());
    this.queue = turn;
    return turn;
  }

  private async waitForToken(): Promise<void> {
    for (;;) {
      const t = this.now();
      this.tokens = Math.min(this.burst, this.tokens + ((t - this.last) / 1000) * this.qps);
      this.last = t;
      if (this.tokens >= 1) {
        this.tokens -= 1;
        return;
      }
      const waitMs = ((1 - this.tokens) / this.qps) * 1000;
      await new Promise((resolve) => setTimeout(resolve, Math.max(1, Math.ceil(waitMs))));
    }
  }
}
