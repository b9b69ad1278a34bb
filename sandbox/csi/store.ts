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

  async persist(): Promise<void> {
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
