// Which volume each claim sync in this process is about to bind. Claim syncs
// run in parallel (events arrive many at a time), and with a watched copy of
// the volumes they would all pick the same best match, then all but one lose
// the race on its update and search again. A sync skips a volume another
// in-flight sync of this process has picked while an alternative exists; the
// conditional write still decides between processes. A pick is forgotten when
// its claim picks again, or after a while (a sync that stopped midway).

/** Long enough for a pick's read and four writes under load; a forgotten pick only costs a conflict. */
const PICK_TTL_MS = 10_000;

export class VolumePicks {
  private readonly byVolume = new Map<string, { claim: string; until: number }>();
  private readonly byClaim = new Map<string, string>();
  private readonly now: () => number;

  constructor(now: () => number = Date.now) {
    this.now = now;
  }

  /** Picked by a claim other than `claim`, and not yet expired. */
  heldByOther(volume: string, claim: string): boolean {
    const pick = this.byVolume.get(volume);
    if (!pick || pick.claim === claim) return false;
    if (pick.until <= this.now()) {
      this.release(pick.claim);
      return false;
    }
    return true;
  }

  /** `claim` is about to bind `volume`; its earlier pick, if any, is let go. */
  hold(volume: string, claim: string): void {
    this.release(claim);
    this.byVolume.set(volume, { claim, until: this.now() + PICK_TTL_MS });
    this.byClaim.set(claim, volume);
  }

  release(claim: string): void {
    const volume = this.byClaim.get(claim);
    if (volume === undefined) return;
    this.byClaim.delete(claim);
    if (this.byVolume.get(volume)?.claim === claim) this.byVolume.delete(volume);
  }

  get size(): number {
    return this.byVolume.size;
  }
}
