// Configurable capabilities, and a driver that survives restarts (a clean
// close, and SIGKILL of the standalone process) with its volumes intact.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdir, mkdtemp, open, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, before, describe, it } from "node:test";
import { startCsiDriver } from "../../sandbox/csi/server.ts";
import { copySparse } from "../../sandbox/csi/storage.ts";
import { mountCap, rawCsiClient, rejectsWith } from "../helpers/csi-driver-client.ts";

let root: string;
before(async () => {
  root = await mkdtemp(join(tmpdir(), "ksf-csi-cfg-"));
});
after(async () => {
  await rm(root, { recursive: true, force: true });
});

let n = 0;
const freshDir = () => join(root, `d${++n}`);

const createReq = (name: string) => ({
  name,
  capacity_range: { required_bytes: 1024 * 1024 },
  volume_capabilities: [mountCap()],
});

describe("configurable capabilities", () => {
  it("drops PUBLISH_UNPUBLISH_VOLUME: not advertised, and publish is UNIMPLEMENTED", async () => {
    const h = await startCsiDriver({
      dir: freshDir(),
      name: "other.csi.example.com",
      nodeId: "worker-7",
      controllerCapabilities: ["CREATE_DELETE_VOLUME", "LIST_VOLUMES"],
    });
    const csi = rawCsiClient(h.endpoint);
    try {
      assert.equal((await csi.call("Identity", "GetPluginInfo")).name, "other.csi.example.com");
      assert.equal((await csi.call("Node", "NodeGetInfo")).node_id, "worker-7");
      const caps = await csi.call<{ capabilities: { rpc: { type: string } }[] }>(
        "Controller",
        "ControllerGetCapabilities",
      );
      assert.deepEqual(
        caps.capabilities.map((c) => c.rpc.type),
        ["CREATE_DELETE_VOLUME", "LIST_VOLUMES"],
      );
      const { volume } = await csi.call<{ volume: { volume_id: string; accessible_topology: unknown[] } }>(
        "Controller",
        "CreateVolume",
        createReq("v"),
      );
      assert.deepEqual(volume.accessible_topology, [
        { segments: { "topology.hostpath.csi/node": "worker-7" } },
      ]);
      await rejectsWith(
        csi.call("Controller", "ControllerPublishVolume", {
          volume_id: volume.volume_id,
          node_id: "n",
          volume_capability: mountCap(),
        }),
        "UNIMPLEMENTED",
        /PUBLISH_UNPUBLISH_VOLUME/,
      );
      await rejectsWith(csi.call("Controller", "GetCapacity", {}), "UNIMPLEMENTED");
      await rejectsWith(
        csi.call("Controller", "CreateVolume", {
          ...createReq("clone"),
          volume_content_source: { volume: { volume_id: volume.volume_id } },
        }),
        "INVALID_ARGUMENT",
        /cloning/,
      );
      // Without LIST_VOLUMES_PUBLISHED_NODES the entries carry no status.
      const list = await csi.call<{ entries: { status: unknown }[] }>("Controller", "ListVolumes", {});
      assert.equal(list.entries[0]!.status, null);
    } finally {
      csi.close();
      await h.close();
    }
  });

  it("drops VOLUME_ACCESSIBILITY_CONSTRAINTS: no topology anywhere", async () => {
    const h = await startCsiDriver({ dir: freshDir(), pluginCapabilities: ["CONTROLLER_SERVICE"] });
    const csi = rawCsiClient(h.endpoint);
    try {
      const caps = await csi.call<{ capabilities: { service?: { type: string } }[] }>(
        "Identity",
        "GetPluginCapabilities",
      );
      assert.deepEqual(
        caps.capabilities.flatMap((c) => (c.service ? [c.service.type] : [])),
        ["CONTROLLER_SERVICE"],
      );
      assert.equal((await csi.call("Node", "NodeGetInfo")).accessible_topology, null);
      const { volume } = await csi.call<{ volume: { accessible_topology: unknown[] } }>(
        "Controller",
        "CreateVolume",
        createReq("v"),
      );
      assert.deepEqual(volume.accessible_topology, []);
    } finally {
      csi.close();
      await h.close();
    }
  });

  it("drops CONTROLLER_SERVICE: the Controller service is not served at all", async () => {
    const h = await startCsiDriver({ dir: freshDir(), pluginCapabilities: [], volumeExpansion: "NONE" });
    const csi = rawCsiClient(h.endpoint);
    try {
      assert.deepEqual(await csi.call("Identity", "GetPluginCapabilities"), { capabilities: [] });
      await rejectsWith(csi.call("Controller", "ControllerGetCapabilities"), "UNIMPLEMENTED");
      await rejectsWith(csi.call("Controller", "CreateVolume", createReq("v")), "UNIMPLEMENTED");
    } finally {
      csi.close();
      await h.close();
    }
  });

  it("refuses unknown capability names", async () => {
    await assert.rejects(
      startCsiDriver({ dir: freshDir(), controllerCapabilities: ["TELEPORT" as never] }),
      /unknown controller capability "TELEPORT"/,
    );
  });
});

describe("state survives a restart", () => {
  it("after a clean close: volumes, snapshots, publications and name idempotency", async () => {
    const dir = freshDir();
    let h = await startCsiDriver({ dir });
    let csi = rawCsiClient(h.endpoint);
    const { volume } = await csi.call<{ volume: { volume_id: string } }>(
      "Controller",
      "CreateVolume",
      createReq("keep"),
    );
    await csi.call("Controller", "ControllerPublishVolume", {
      volume_id: volume.volume_id,
      node_id: "node-a",
      volume_capability: mountCap(),
    });
    await csi.call("Controller", "CreateSnapshot", { name: "keep-snap", source_volume_id: volume.volume_id });
    csi.close();
    await h.close();
    await assert.rejects(stat(h.socketPath), { code: "ENOENT" }, "close removes the socket");

    h = await startCsiDriver({ dir });
    csi = rawCsiClient(h.endpoint);
    try {
      const list = await csi.call<{
        entries: { volume: { volume_id: string }; status: { published_node_ids: string[] } }[];
      }>("Controller", "ListVolumes", {});
      assert.deepEqual(
        list.entries.map((e) => [e.volume.volume_id, e.status.published_node_ids]),
        [[volume.volume_id, ["node-a"]]],
      );
      const again = await csi.call<{ volume: { volume_id: string } }>(
        "Controller",
        "CreateVolume",
        createReq("keep"),
      );
      assert.equal(again.volume.volume_id, volume.volume_id);
      assert.equal(h.driver.listBackingSnapshots().length, 1);
      const state = JSON.parse(await readFile(join(dir, "state.json"), "utf8"));
      assert.equal(state.version, 1);
      assert.equal(state.volumes[0].name, "keep");
    } finally {
      csi.close();
      await h.close();
    }
  });

  it("after SIGKILL of the standalone driver: stale socket replaced, volumes still there", async () => {
    const dir = freshDir();
    const first = await startStandalone(dir);
    const csi = rawCsiClient(first.endpoint);
    const { volume } = await csi.call<{ volume: { volume_id: string } }>(
      "Controller",
      "CreateVolume",
      createReq("survivor"),
    );
    csi.close();
    const exited = new Promise((resolve) => first.child.once("exit", resolve));
    first.child.kill("SIGKILL");
    await exited;
    assert.ok((await stat(join(dir, "csi.sock"))).isSocket(), "a killed driver leaves its socket behind");

    const second = await startStandalone(dir);
    const csi2 = rawCsiClient(second.endpoint);
    try {
      const list = await csi2.call<{ entries: { volume: { volume_id: string } }[] }>(
        "Controller",
        "ListVolumes",
        {},
      );
      assert.deepEqual(
        list.entries.map((e) => e.volume.volume_id),
        [volume.volume_id],
      );
      const res = await fetch(`${second.adminUrl}/volumes`);
      const body = (await res.json()) as { volumes: { name: string }[] };
      assert.deepEqual(
        body.volumes.map((v) => v.name),
        ["survivor"],
      );
    } finally {
      csi2.close();
      const done = new Promise((resolve) => second.child.once("exit", resolve));
      second.child.kill("SIGTERM");
      assert.equal(await done, 0);
    }
  });

  it("removes backing data no record names and half-written state files (a crash mid-change)", async () => {
    const dir = freshDir();
    await mkdir(join(dir, "volumes", "half-made"), { recursive: true });
    await writeFile(join(dir, "volumes", "half-made", "f"), "x");
    await writeFile(join(dir, "state.json.tmp-1-1"), "{");
    const h = await startCsiDriver({ dir });
    try {
      await assert.rejects(stat(join(dir, "volumes", "half-made")), { code: "ENOENT" });
      await assert.rejects(stat(join(dir, "state.json.tmp-1-1")), { code: "ENOENT" });
    } finally {
      await h.close();
    }
  });

  it("never replaces a live driver's socket or a file that is not a socket", async () => {
    const dir = freshDir();
    const h = await startCsiDriver({ dir });
    try {
      await assert.rejects(startCsiDriver({ dir: freshDir(), socketPath: h.socketPath }), /in use/);
    } finally {
      await h.close();
    }
    const file = join(root, "not-a-socket");
    await writeFile(file, "precious");
    await assert.rejects(startCsiDriver({ dir: freshDir(), socketPath: file }), /not a socket/);
    assert.equal(await readFile(file, "utf8"), "precious");
  });
});

it("the portable sparse copy keeps data and holes", async () => {
  const from = join(root, "sparse-src");
  const to = join(root, "sparse-dst");
  const f = await open(from, "w");
  await f.truncate(64 * 1024 * 1024);
  await f.write(Buffer.from("middle"), 0, 6, 40 * 1024 * 1024 + 3);
  await f.close();
  await copySparse(from, to);
  const st = await stat(to);
  assert.equal(st.size, 64 * 1024 * 1024);
  assert.ok(st.blocks * 512 <= 2 * 1024 * 1024, "only the chunk with data is written");
  const data = await readFile(to);
  assert.equal(data.subarray(40 * 1024 * 1024 + 3, 40 * 1024 * 1024 + 9).toString(), "middle");
});

interface Standalone {
  child: ChildProcess;
  endpoint: string;
  adminUrl: string;
}

async function startStandalone(dir: string): Promise<Standalone> {
  const child = spawn(process.execPath, ["sandbox/csi/main.ts"], {
    env: { ...process.env, CSI_DIR: dir },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const line = await new Promise<string>((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`driver exited early with ${code}`)));
    createInterface({ input: child.stdout! }).once("line", resolve);
  });
  const ready = JSON.parse(line) as { ready: boolean; csiEndpoint: string; csiAdmin: string };
  assert.equal(ready.ready, true);
  return { child, endpoint: ready.csiEndpoint, adminUrl: ready.csiAdmin };
}
