// Fault injection (in-process and over the admin HTTP endpoint) and the
// admin endpoint itself. Injected timeouts on CreateVolume happen before or
// after the volume really exists; leak checks must see both.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, afterEach, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { type CsiDriverHandle, startCsiDriver } from "../../sandbox/csi/server.ts";
import { mountCap, type RawCsiClient, rawCsiClient, rejectsWith } from "../helpers/csi-driver-client.ts";
import { csiAdmin } from "../helpers/sandbox.ts";

let dir: string;
let handle: CsiDriverHandle;
let csi: RawCsiClient;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "ksf-csi-faults-"));
  handle = await startCsiDriver({ dir });
  csi = rawCsiClient(handle.endpoint);
});

afterEach(() => {
  handle.driver.clearFaults();
  handle.driver.resetStats();
});

after(async () => {
  csi.close();
  await handle.close();
  await rm(dir, { recursive: true, force: true });
});

const createReq = (name: string) => ({
  name,
  capacity_range: { required_bytes: 1024 * 1024 },
  volume_capabilities: [mountCap()],
});
const create = (name: string, deadlineMs?: number) =>
  csi.call<{ volume: { volume_id: string } }>("Controller", "CreateVolume", createReq(name), deadlineMs);
const names = () => new Set(handle.driver.listBackingVolumes().map((v) => v.name));

describe("fault injection", () => {
  it("with probability 1 fails every matching call with the chosen code, and only those", async () => {
    handle.driver.setFaults({
      errorProbability: 1,
      errorCodes: ["DEADLINE_EXCEEDED"],
      methods: ["CreateVolume"],
    });
    for (let i = 0; i < 5; i++) await rejectsWith(create(`always-${i}`), "DEADLINE_EXCEEDED", /injected/);
    assert.equal((await csi.call("Identity", "GetPluginInfo")).name, "hostpath.csi.k8s.io");
    await csi.call("Controller", "ListVolumes", {});
    assert.equal(handle.driver.getStats().calls.CreateVolume, 5);

    handle.driver.setFaults({ errorProbability: 1, errorCodes: ["UNAVAILABLE"] });
    await rejectsWith(csi.call("Identity", "Probe"), "UNAVAILABLE");
    await rejectsWith(csi.call("Controller", "ListVolumes", {}), "UNAVAILABLE");
  });

  it("fails before creating anything when afterProbability is 0", async () => {
    handle.driver.setFaults({ errorProbability: 1, errorCodes: ["UNAVAILABLE"], afterProbability: 0 });
    await rejectsWith(create("before-only"), "UNAVAILABLE");
    assert.ok(!names().has("before-only"));
  });

  it("creates the volume and then fails when afterProbability is 1; a retry finds it", async () => {
    handle.driver.setFaults({ errorProbability: 1, errorCodes: ["DEADLINE_EXCEEDED"], afterProbability: 1 });
    await rejectsWith(create("after-only"), "DEADLINE_EXCEEDED");
    const leaked = handle.driver.listBackingVolumes().filter((v) => v.name === "after-only");
    assert.equal(leaked.length, 1, "the volume exists although the caller saw a timeout");
    handle.driver.clearFaults();
    const retry = await create("after-only");
    assert.equal(retry.volume.volume_id, leaked[0]!.volumeId);
    assert.equal(handle.driver.listBackingVolumes().filter((v) => v.name === "after-only").length, 1);
  });

  it("decides randomly between before and after: both happen, and stats count them", async () => {
    handle.driver.setFaults({
      errorProbability: 1,
      errorCodes: ["UNAVAILABLE"],
      seed: 42,
      methods: ["CreateVolume"],
    });
    const tried = Array.from({ length: 40 }, (_, i) => `random-${i}`);
    for (const name of tried) await rejectsWith(create(name), "UNAVAILABLE");
    const existing = tried.filter((name) => names().has(name));
    assert.ok(existing.length > 0, "some failed after creating");
    assert.ok(existing.length < tried.length, "some failed before creating");
    assert.deepEqual(handle.driver.getStats().injected.CreateVolume, {
      before: tried.length - existing.length,
      after: existing.length,
    });
  });

  it("never does the work for codes that mean the call failed", async () => {
    handle.driver.setFaults({ errorProbability: 1, errorCodes: ["INTERNAL"], afterProbability: 1 });
    await rejectsWith(create("internal"), "INTERNAL");
    assert.ok(!names().has("internal"));
  });

  it("picks among several codes and replays the same sequence for the same seed", async () => {
    const run = async () => {
      handle.driver.setFaults({
        errorProbability: 0.5,
        errorCodes: ["UNAVAILABLE", "RESOURCE_EXHAUSTED"],
        seed: 7,
        methods: ["GetPluginInfo"],
      });
      const outcomes: string[] = [];
      for (let i = 0; i < 30; i++) {
        outcomes.push(
          await csi.call("Identity", "GetPluginInfo").then(
            () => "OK",
            (e: { code: number }) => String(e.code),
          ),
        );
      }
      return outcomes;
    };
    const first = await run();
    assert.deepEqual(await run(), first);
    assert.deepEqual(new Set(first), new Set(["OK", "14", "8"]));
  });

  it("adds latency; a caller that times out still gets its volume made (the classic leak)", async () => {
    handle.driver.setFaults({ latencyMs: 300, methods: ["CreateVolume"] });
    await rejectsWith(create("slow", 100), "DEADLINE_EXCEEDED");
    assert.ok(!names().has("slow"), "not made yet when the caller gives up");
    while (!names().has("slow")) await sleep(20);
  });

  it("rejects settings that make no sense", () => {
    assert.throws(() => handle.driver.setFaults({ errorProbability: 2 }), /errorProbability/);
    assert.throws(() => handle.driver.setFaults({ errorCodes: ["OK" as never] }), /errorCodes/);
    assert.throws(() => handle.driver.setFaults({ methods: ["CreateVolumes"] }), /unknown CSI method/);
  });
});

describe("admin HTTP endpoint", () => {
  const url = (path: string) => `${handle.adminUrl}${path}`;

  it("lists volumes and snapshots, and one volume by id", async () => {
    const { volume } = await create("admin-vol");
    const admin = csiAdmin(handle.adminUrl);
    const volumes = await admin.volumes();
    const mine = volumes.find((v) => v.name === "admin-vol");
    assert.equal(mine?.volumeId, volume.volume_id);
    assert.equal(mine?.kind, "mount");
    const one = await fetch(url(`/volumes/${volume.volume_id}`));
    assert.equal(one.status, 200);
    assert.equal(((await one.json()) as { name: string }).name, "admin-vol");
    assert.equal((await fetch(url("/volumes/nope"))).status, 404);
    assert.deepEqual(await admin.snapshots(), []);
    const info = (await (await fetch(url("/"))).json()) as Record<string, unknown>;
    assert.equal(info.endpoint, handle.endpoint);
    assert.equal(info.ready, true);
  });

  it("sets, reads and clears faults; bad settings are a 400 with the reason", async () => {
    const admin = csiAdmin(handle.adminUrl);
    await admin.setFaults({
      errorProbability: 1,
      errorCodes: ["ABORTED"],
      methods: ["/csi.v1.Controller/ListVolumes"],
    });
    assert.deepEqual(await (await fetch(url("/faults"))).json(), {
      errorProbability: 1,
      errorCodes: ["ABORTED"],
      methods: ["ListVolumes"],
    });
    await rejectsWith(csi.call("Controller", "ListVolumes", {}), "ABORTED", /injected/);
    const stats = await admin.stats();
    assert.deepEqual(stats.injected.ListVolumes, { before: 1, after: 0 });
    await admin.clearFaults();
    await csi.call("Controller", "ListVolumes", {});

    const bad = await fetch(url("/faults"), {
      method: "PUT",
      body: JSON.stringify({ errorCodes: ["NOPE"] }),
    });
    assert.equal(bad.status, 400);
    assert.match(((await bad.json()) as { error: string }).error, /errorCodes/);
    const notJson = await fetch(url("/faults"), { method: "PUT", body: "{" });
    assert.equal(notJson.status, 400);
  });

  it("switches Probe to not ready and back", async () => {
    const admin = csiAdmin(handle.adminUrl);
    await admin.setReady(false);
    assert.deepEqual(await csi.call("Identity", "Probe"), { ready: { value: false } });
    await admin.setReady(true);
    assert.deepEqual(await csi.call("Identity", "Probe"), { ready: { value: true } });
  });

  it("answers 404 and 405 for unknown paths and methods", async () => {
    assert.equal((await fetch(url("/nothing"))).status, 404);
    assert.equal((await fetch(url("/volumes"), { method: "POST" })).status, 405);
  });
});
