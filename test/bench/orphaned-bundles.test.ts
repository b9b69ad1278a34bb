// A bench killed by a signal leaves its bundle directory; the next bench
// removes the directories whose bench process is gone, and only those.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { removeOrphanedBundles } from "../../bench/support.ts";

test("removeOrphanedBundles: a dead bench's directory goes; a live one's, old names and other files stay", async () => {
  const dir = await mkdtemp(join(tmpdir(), "ksf-orphans-test-"));
  try {
    const exited = spawnSync(process.execPath, ["-e", ""]);
    assert.equal(exited.status, 0);
    const dead = `ksf-bench-bundles-${exited.pid}-aB3xYz`;
    const live = `ksf-bench-bundles-${process.pid}-Qw12er`;
    const oldName = "ksf-bench-bundles-57DIAa";
    const other = "ksf-bench-Zz9";
    for (const name of [dead, live, oldName, other])
      await mkdir(join(dir, name, "controllers"), { recursive: true });
    await writeFile(join(dir, dead, "controllers", "index.cjs"), "// a bundle");

    assert.deepEqual(await removeOrphanedBundles(dir), [dead]);
    assert.equal(existsSync(join(dir, dead)), false);
    for (const name of [live, oldName, other]) assert.ok(existsSync(join(dir, name)), name);
    assert.deepEqual(await removeOrphanedBundles(join(dir, "missing")), []);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
