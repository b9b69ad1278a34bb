// The sandbox CSI driver's state file under a burst of changes: saves are
// shared (group commit), yet every persist() resolves only once the file
// holds the change made before it.
import assert from "node:assert/strict";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { loadState, type VolumeRecord } from "../../sandbox/csi/state.ts";
import { DriverStore, stateFileName } from "../../sandbox/csi/store.ts";

function record(i: number): VolumeRecord {
  return {
    id: `vol-${i}`,
    name: `pvc-${i}`,
    capacityBytes: 1024,
    kind: "mount",
    path: `volumes/vol-${i}`,
    parameters: {},
    accessibleTopology: [],
    publishedNodes: {},
    createdAt: "2026-11-22T00:00:00Z",
  };
}

test("a burst of persists: each resolves with its own change on disk, and saves are shared", async () => {
  const dir = await mkdtemp(join(tmpdir(), "ksf-csi-store-"));
  try {
    const store = await DriverStore.open(dir);
    const file = join(dir, stateFileName);
    const saves: Promise<void>[] = [];
    const done: Promise<void>[] = [];
    for (let i = 0; i < 50; i++) {
      store.volumes.set(`vol-${i}`, record(i));
      const mine = `vol-${i}`;
      const save = store.persist();
      saves.push(save);
      done.push(
        save.then(async () => {
          const onDisk = await loadState(file);
          assert.ok(
            onDisk.volumes.some((v) => v.id === mine),
            `${mine} is on disk when its persist resolves`,
          );
        }),
      );
    }
    await Promise.all(done);
    // One save was running; every later change shares the next one: 2 whole-file writes, not 50.
    assert.equal(new Set(saves).size, 2);
    const final = await loadState(file);
    assert.equal(final.volumes.length, 50);
    // And a change after the burst gets a save of its own.
    store.volumes.set("vol-late", record(99));
    await store.persist();
    assert.equal((await loadState(file)).volumes.length, 51);
    assert.deepEqual(
      (await readdir(dir)).filter((n) => n.startsWith(`${stateFileName}.tmp-`)),
      [],
      "no temporary files left",
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
