// The sandbox CSI driver's state file under a burst of changes: saves are
// shared (group commit), yet every persist() resolves only once the file
// holds the change made before it.
import assert from "node:assert/strict";
import { mkdir, mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { CsiDriver } from "../../sandbox/csi/driver.ts";
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
      store.changed();
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
    store.changed();
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

test("persist with nothing changed writes nothing; dropped backing data goes only with the save", async () => {
  const dir = await mkdtemp(join(tmpdir(), "ksf-csi-store-"));
  try {
    const store = await DriverStore.open(dir);
    const file = join(dir, stateFileName);
    await store.persist();
    assert.equal(store.saves, 0, "nothing changed, nothing saved");

    const volume = record(1);
    await mkdir(store.abs(volume.path), { recursive: true });
    store.volumes.set(volume.id, volume);
    store.changed();
    await store.persist();
    assert.equal(store.saves, 1);

    store.drop(store.volumes, volume.id);
    assert.equal(store.volumes.has(volume.id), false);
    // The file still names the volume: its data must stay until a save without it.
    await stat(store.abs(volume.path));
    assert.equal((await loadState(file)).volumes.length, 1);
    await store.persist();
    assert.equal((await loadState(file)).volumes.length, 0);
    await assert.rejects(
      stat(store.abs(volume.path)),
      { code: "ENOENT" },
      "removed by the time persist resolves",
    );
    assert.equal(store.saves, 2);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("a burst of CreateVolume calls through the driver shares saves, and each reply is on disk", async () => {
  const dir = await mkdtemp(join(tmpdir(), "ksf-csi-store-"));
  const driver = await CsiDriver.open({ dir });
  try {
    const n = 60;
    const replies = await Promise.all(
      Array.from({ length: n }, (_, i) =>
        driver
          .invoke("CreateVolume", {
            name: `pvc-burst-${i}`,
            capacityRange: { requiredBytes: 1048576n, limitBytes: 0n },
            volumeCapabilities: [
              {
                accessType: "mount",
                mount: { fsType: "", mountFlags: [] },
                accessMode: { mode: "SINGLE_NODE_WRITER" },
              },
            ],
            parameters: {},
            secrets: {},
            mutableParameters: {},
          })
          .then(async (reply) => {
            const id = reply.volume?.volumeId ?? "";
            const onDisk = await loadState(join(dir, stateFileName));
            assert.ok(
              onDisk.volumes.some((v) => v.id === id),
              `${id} is on disk when its reply arrives`,
            );
            return id;
          }),
      ),
    );
    assert.equal(new Set(replies).size, n);
    const saves = driver.getStats().stateSaves;
    assert.ok(saves >= 1 && saves <= n / 4, `${saves} saves for ${n} creates`);
  } finally {
    await driver.close();
    await rm(dir, { recursive: true, force: true });
  }
});
