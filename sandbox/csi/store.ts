// The driver's records in memory, mirrored to the state file after every
// change, and the backing directories they point at.
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
 * A save writes the whole file (O(records)). Note that the driver runs its
 * mutating calls one at a time, persist included (driver.ts SerialQueue), so
 * today its own saves never overlap and each call still pays one save; the
 * sharing only helps callers that persist concurrently. Moving the save out
 * of the serialized section would let a burst share saves.
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

  /**
   * Resolves once the state file holds every change made before the call (a
   * reply may then be sent). Group commit: while one save runs, later callers
   * share the next save instead of each writing the whole file, which made a
   * burst of n creates cost n whole-file writes. The next save also waits a
   * few milliseconds for more changes to join it.
   */
  persist(): Promise<void> {
    if (this.nextSave) return this.nextSave;
    if (!this.runningSave) return this.startSave();
    // The running save may have serialized the state before this caller's change.
    this.nextSave = this.runningSave
      .catch(() => undefined)
      .then(() => new Promise((resolve) => setTimeout(resolve, GROUP_COMMIT_WINDOW_MS)))
      .then(() => {
        this.nextSave = undefined;
        return this.startSave();
      });
    return this.nextSave;
  }

  private runningSave: Promise<void> | undefined;
  private nextSave: Promise<void> | undefined;

  private startSave(): Promise<void> {
    const save = this.saveNow().finally(() => {
      if (this.runningSave === save) this.runningSave = undefined;
    });
    this.runningSave = save;
    return save;
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
