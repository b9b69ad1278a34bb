// The driver's records in memory, saved to the state file before any reply
// reports a change (a burst of calls shares one save), and the backing
// directories they point at.
import { join } from "node:path";
import { CsiError } from "./errors.ts";
import {
  type DriverStateFile,
  loadState,
  type SnapshotRecord,
  saveState,
  type VolumeRecord,
} from "./state.ts";
import { entriesOf, removeBacking } from "./storage.ts";

export const volumesDir = "volumes";
export const snapshotsDir = "snapshots";
export const stateFileName = "state.json";
/**
 * How long a save that others are waiting behind gathers more changes first.
 * A save writes the whole file (O(records)); under a burst of calls, many
 * changes share one save (driver.ts persists after the serialized section).
 */
const GROUP_COMMIT_WINDOW_MS = 50;

export class DriverStore {
  readonly dir: string;
  readonly volumes = new Map<string, VolumeRecord>();
  readonly snapshots = new Map<string, SnapshotRecord>();

  private constructor(dir: string, state: DriverStateFile) {
    this.dir = dir;
    for (const v of state.volumes) this.volumes.set(v.id, v);
    for (const s of state.snapshots) this.snapshots.set(s.id, s);
  }

  /** Loads the state in dir (or starts empty) and removes backing data no record names. */
  static async open(dir: string): Promise<DriverStore> {
    const store = new DriverStore(dir, await loadState(join(dir, stateFileName)));
    await store.removeOrphans();
    return store;
  }

  /**
   * Backing data is made before its record is saved and removed after, so a
   * driver killed in between leaves data without a record. Nobody was ever
   * told its id (the reply comes after the save), so it is safe to drop.
   */
  private async removeOrphans(): Promise<void> {
    const known = new Set([
      ...[...this.volumes.values()].map((v) => v.path),
      ...[...this.snapshots.values()].map((s) => s.path),
    ]);
    // Temporary state files of a save that was cut short.
    for (const name of await entriesOf(this.dir)) {
      if (name.startsWith(`${stateFileName}.tmp-`)) await removeBacking(join(this.dir, name));
    }
    for (const sub of [volumesDir, snapshotsDir]) {
      for (const name of await entriesOf(join(this.dir, sub))) {
        const rel = `${sub}/${name}`;
        if (!known.has(rel)) await removeBacking(join(this.dir, rel));
      }
    }
  }

  abs(rel: string): string {
    return join(this.dir, rel);
  }

  volumeByName(name: string): VolumeRecord | undefined {
    for (const v of this.volumes.values()) if (v.name === name) return v;
    return undefined;
  }

  snapshotByName(name: string): SnapshotRecord | undefined {
    for (const s of this.snapshots.values()) if (s.name === name) return s;
    return undefined;
  }

  /** Capacity handed out to volumes (snapshots are not counted). */
  usedBytes(): number {
    let used = 0;
    for (const v of this.volumes.values()) used += v.capacityBytes;
    return used;
  }

  /** Counts changes to the records (changed()); the state file holds `savedVersion` of them. */
  private version = 0;
  private savedVersion = 0;
  private saveCount = 0;
  /** Backing data to remove once the file no longer names it (version: the change that dropped it). */
  private removals: { version: number; path: string }[] = [];

  /** Whole-file saves completed since the store was opened. */
  get saves(): number {
    return this.saveCount;
  }

  /** The records changed in memory: the next persist() saves them. */
  changed(): void {
    this.version++;
  }

  /**
   * Drops a volume's or snapshot's record, and its backing data once a save
   * without the record has completed. A driver killed before then leaves
   * data whose record the file still names (the caller never heard back, and
   * retries), or, after the save, an orphan the next start removes; never a
   * record pointing at nothing.
   */
  drop(records: Map<string, { path: string }>, id: string): void {
    const record = records.get(id);
    if (!record) return;
    records.delete(id);
    this.changed();
    this.removals.push({ version: this.version, path: record.path });
  }

  /**
   * Resolves once the state file holds every change made before the call (a
   * reply may then be sent); at once when it already does. Group commit:
   * while one save runs, later callers share the next save instead of each
   * writing the whole file, which made a burst of n creates cost n
   * whole-file writes. The next save also waits a few milliseconds for more
   * changes to join it.
   */
  persist(): Promise<void> {
    const wanted = this.version;
    if (this.savedVersion >= wanted) return Promise.resolve();
    if (this.runningSave && this.runningSave.version >= wanted) return this.runningSave.done;
    if (this.nextSave) return this.nextSave;
    if (!this.runningSave) return this.startSave();
    // The running save serialized the state before this caller's change.
    this.nextSave = this.runningSave.done
      .catch(() => undefined)
      .then(() => new Promise((resolve) => setTimeout(resolve, GROUP_COMMIT_WINDOW_MS)))
      .then(() => {
        this.nextSave = undefined;
        return this.startSave();
      });
    return this.nextSave;
  }

  private runningSave: { version: number; done: Promise<void> } | undefined;
  private nextSave: Promise<void> | undefined;

  private startSave(): Promise<void> {
    const version = this.version;
    const done = this.saveNow().then(async () => {
      this.savedVersion = Math.max(this.savedVersion, version);
      this.saveCount++;
      // Before the waiting replies: a DeleteVolume answered means the data is gone.
      await this.removeDropped();
    });
    const running = { version, done };
    this.runningSave = running;
    void done
      .catch(() => undefined)
      .finally(() => {
        if (this.runningSave === running) this.runningSave = undefined;
      });
    return done;
  }

  private async removeDropped(): Promise<void> {
    const due = this.removals.filter((r) => r.version <= this.savedVersion);
    if (due.length === 0) return;
    this.removals = this.removals.filter((r) => r.version > this.savedVersion);
    // A failed removal leaves an orphan, which the next start removes.
    for (const r of due) await removeBacking(this.abs(r.path)).catch(() => undefined);
  }

  private async saveNow(): Promise<void> {
    try {
      await saveState(join(this.dir, stateFileName), {
        version: 1,
        volumes: [...this.volumes.values()],
        snapshots: [...this.snapshots.values()],
      });
    } catch (err) {
      throw new CsiError("INTERNAL", `saving the driver state failed: ${String(err)}`);
    }
  }
}
