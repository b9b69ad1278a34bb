// The sandbox CSI driver over real gRPC on its unix socket: identity, node
// info, and the volume lifecycle with the spec's idempotency and error codes.
import assert from "node:assert/strict";
import { mkdtemp, open, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type CsiDriverHandle, startCsiDriver } from "../../sandbox/csi/server.ts";
import {
  blockCap,
  mountCap,
  type RawCsiClient,
  rawCsiClient,
  rejectsWith,
} from "../helpers/csi-driver-client.ts";

const MiB = 1024 * 1024;
const GiB = 1024 * MiB;

interface VolumeMsg {
  volume_id: string;
  capacity_bytes: string;
  volume_context: Record<string, string>;
  content_source: { type: string; snapshot?: { snapshot_id: string }; volume?: { volume_id: string } } | null;
  accessible_topology: { segments: Record<string, string> }[];
}

let dir: string;
let handle: CsiDriverHandle;
let csi: RawCsiClient;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "ksf-csi-"));
  handle = await startCsiDriver({ dir, maxVolumeBytes: 10 * GiB, totalCapacityBytes: 20 * GiB });
  csi = rawCsiClient(handle.endpoint);
});

after(async () => {
  csi.close();
  await handle.close();
  await rm(dir, { recursive: true, force: true });
});

const create = async (request: object): Promise<VolumeMsg> =>
  (await csi.call<{ volume: VolumeMsg }>("Controller", "CreateVolume", request)).volume;

const backingNamed = (name: string) => handle.driver.listBackingVolumes().filter((v) => v.name === name);

describe("Identity and Node", () => {
  it("answers GetPluginInfo, GetPluginCapabilities and Probe", async () => {
    const info = await csi.call("Identity", "GetPluginInfo");
    assert.equal(info.name, "hostpath.csi.k8s.io");
    assert.ok(info.vendor_version);
    const caps = await csi.call<{
      capabilities: { service?: { type: string }; volume_expansion?: { type: string } }[];
    }>("Identity", "GetPluginCapabilities");
    assert.deepEqual(
      caps.capabilities.map((c) => c.service?.type ?? `volume_expansion ${c.volume_expansion?.type}`),
      ["CONTROLLER_SERVICE", "VOLUME_ACCESSIBILITY_CONSTRAINTS", "volume_expansion ONLINE"],
    );
    assert.deepEqual(await csi.call("Identity", "Probe"), { ready: { value: true } });
    handle.driver.setReady(false);
    try {
      assert.deepEqual(await csi.call("Identity", "Probe"), { ready: { value: false } });
    } finally {
      handle.driver.setReady(true);
    }
  });

  it("answers NodeGetInfo with the node's topology segment and NodeGetCapabilities", async () => {
    const info = await csi.call("Node", "NodeGetInfo");
    assert.equal(info.node_id, "sandbox-node");
    assert.deepEqual(info.accessible_topology, {
      segments: { "topology.hostpath.csi/node": "sandbox-node" },
    });
    assert.deepEqual(await csi.call("Node", "NodeGetCapabilities"), {
      capabilities: [
        { rpc: { type: "STAGE_UNSTAGE_VOLUME" }, type: "rpc" },
        { rpc: { type: "EXPAND_VOLUME" }, type: "rpc" },
      ],
    });
  });

  it("advertises the default controller capabilities", async () => {
    const res = await csi.call<{ capabilities: { rpc: { type: string } }[] }>(
      "Controller",
      "ControllerGetCapabilities",
    );
    assert.deepEqual(res.capabilities.map((c) => c.rpc.type).sort(), [
      "CLONE_VOLUME",
      "CREATE_DELETE_SNAPSHOT",
      "CREATE_DELETE_VOLUME",
      "EXPAND_VOLUME",
      "GET_CAPACITY",
      "LIST_SNAPSHOTS",
      "LIST_VOLUMES",
      "LIST_VOLUMES_PUBLISHED_NODES",
      "MODIFY_VOLUME",
      "PUBLISH_READONLY",
      "PUBLISH_UNPUBLISH_VOLUME",
      "SINGLE_NODE_MULTI_WRITER",
    ]);
  });
});

describe("CreateVolume", () => {
  it("makes a directory for a mount volume and a sparse file for a block volume", async () => {
    const fs = await create({
      name: "pvc-mount",
      capacity_range: { required_bytes: 64 * MiB },
      volume_capabilities: [mountCap()],
      parameters: { type: "fast" },
    });
    assert.equal(fs.capacity_bytes, String(64 * MiB));
    assert.deepEqual(fs.volume_context, { type: "fast" });
    const [mount] = backingNamed("pvc-mount");
    assert.ok((await stat(mount!.path)).isDirectory());

    const blk = await create({
      name: "pvc-block",
      capacity_range: { required_bytes: 2 * GiB },
      volume_capabilities: [blockCap()],
    });
    const [block] = backingNamed("pvc-block");
    const st = await stat(block!.path);
    assert.ok(st.isFile());
    assert.equal(st.size, 2 * GiB);
    assert.ok(st.blocks * 512 < MiB, "the block file is sparse");
    assert.equal(blk.capacity_bytes, String(2 * GiB));
  });

  it("is idempotent by name: the same request again returns the same volume", async () => {
    const request = {
      name: "pvc-again",
      capacity_range: { required_bytes: 10 * MiB },
      volume_capabilities: [mountCap()],
    };
    const first = await create(request);
    const second = await create(request);
    assert.deepEqual(second, first);
    // A compatible but different range (a larger limit) also names the same volume.
    const third = await create({ ...request, capacity_range: { required_bytes: 5 * MiB, limit_bytes: GiB } });
    assert.equal(third.volume_id, first.volume_id);
    assert.equal(backingNamed("pvc-again").length, 1);
  });

  it("makes exactly one backing volume for 20 concurrent calls with the same name", async () => {
    const request = {
      name: "pvc-race",
      capacity_range: { required_bytes: 10 * MiB },
      volume_capabilities: [mountCap()],
    };
    const results = await Promise.all(Array.from({ length: 20 }, () => create(request)));
    assert.equal(new Set(results.map((v) => v.volume_id)).size, 1);
    assert.equal(backingNamed("pvc-race").length, 1);
    const onDisk = await readdir(join(dir, "volumes"));
    assert.equal(onDisk.length, handle.driver.listBackingVolumes().length);
  });

  it("answers ALREADY_EXISTS when the name exists with an incompatible request", async () => {
    const base = {
      name: "pvc-incompatible",
      capacity_range: { required_bytes: 10 * MiB },
      volume_capabilities: [mountCap()],
      parameters: { a: "1" },
    };
    await create(base);
    await rejectsWith(
      create({ ...base, capacity_range: { required_bytes: 20 * MiB } }),
      "ALREADY_EXISTS",
      /already exists .* capacity/,
    );
    await rejectsWith(
      create({ ...base, capacity_range: { required_bytes: MiB, limit_bytes: 5 * MiB } }),
      "ALREADY_EXISTS",
    );
    await rejectsWith(create({ ...base, volume_capabilities: [blockCap()] }), "ALREADY_EXISTS", /block/);
    await rejectsWith(create({ ...base, parameters: { a: "2" } }), "ALREADY_EXISTS", /parameters/);
    assert.equal(backingNamed("pvc-incompatible").length, 1);
  });

  it("answers OUT_OF_RANGE above the per-volume maximum and RESOURCE_EXHAUSTED when capacity runs out", async () => {
    await rejectsWith(
      create({
        name: "too-big",
        capacity_range: { required_bytes: 11 * GiB },
        volume_capabilities: [mountCap()],
      }),
      "OUT_OF_RANGE",
      /maximum volume size/,
    );
    const capacity = async () =>
      Number(
        (await csi.call<{ available_capacity: string }>("Controller", "GetCapacity", {})).available_capacity,
      );
    const free = await capacity();
    const hog = await create({
      name: "hog",
      capacity_range: { required_bytes: Math.min(free, 10 * GiB) },
      volume_capabilities: [mountCap()],
    });
    const left = await capacity();
    assert.equal(left, free - Math.min(free, 10 * GiB));
    await rejectsWith(
      create({
        name: "no-room",
        capacity_range: { required_bytes: left + 1 },
        volume_capabilities: [mountCap()],
      }),
      "RESOURCE_EXHAUSTED",
    );
    assert.equal(backingNamed("too-big").length + backingNamed("no-room").length, 0);
    await csi.call("Controller", "DeleteVolume", { volume_id: hog.volume_id });
    assert.equal(await capacity(), free);
  });

  it("rejects requests a real driver would reject, with INVALID_ARGUMENT", async () => {
    const cases: [object, RegExp][] = [
      [{ volume_capabilities: [mountCap()] }, /name missing/],
      [{ name: "x" }, /volume_capabilities missing/],
      [{ name: "x", volume_capabilities: [{ mount: {} }] }, /access_mode missing/],
      [{ name: "x", volume_capabilities: [{ access_mode: { mode: "SINGLE_NODE_WRITER" } }] }, /access_type/],
      [{ name: "x", volume_capabilities: [mountCap(), blockCap()] }, /both block and mount/],
      [
        {
          name: "x",
          volume_capabilities: [mountCap()],
          capacity_range: { required_bytes: 10, limit_bytes: 5 },
        },
        /larger than limit_bytes/,
      ],
      [{ name: "x", volume_capabilities: [mountCap()], volume_content_source: { volume: {} } }, /volume_id/],
    ];
    for (const [request, message] of cases) await rejectsWith(create(request), "INVALID_ARGUMENT", message);
    await rejectsWith(csi.call("Controller", "DeleteVolume", {}), "INVALID_ARGUMENT", /volume_id missing/);
    assert.equal(backingNamed("x").length, 0);
  });

  it("places the volume in the preferred topology, else the first requisite one", async () => {
    const key = "topology.hostpath.csi/node";
    const requirement = {
      requisite: [{ segments: { [key]: "node-a" } }, { segments: { [key]: "node-b" } }],
      preferred: [{ segments: { [key]: "node-b" } }, { segments: { [key]: "node-a" } }],
    };
    const preferred = await create({
      name: "pvc-topo",
      volume_capabilities: [mountCap()],
      capacity_range: { required_bytes: MiB },
      accessibility_requirements: requirement,
    });
    assert.deepEqual(preferred.accessible_topology, [{ segments: { [key]: "node-b" } }]);
    const requisite = await create({
      name: "pvc-topo-requisite",
      volume_capabilities: [mountCap()],
      capacity_range: { required_bytes: MiB },
      accessibility_requirements: { requisite: requirement.requisite, preferred: [] },
    });
    assert.deepEqual(requisite.accessible_topology, [{ segments: { [key]: "node-a" } }]);
    const none = await create({
      name: "pvc-topo-none",
      volume_capabilities: [mountCap()],
      capacity_range: { required_bytes: MiB },
    });
    assert.deepEqual(none.accessible_topology, [{ segments: { [key]: "sandbox-node" } }]);
    // The same name asked for elsewhere no longer matches.
    await rejectsWith(
      create({
        name: "pvc-topo",
        volume_capabilities: [mountCap()],
        capacity_range: { required_bytes: MiB },
        accessibility_requirements: { requisite: [{ segments: { [key]: "node-c" } }], preferred: [] },
      }),
      "ALREADY_EXISTS",
      /topology/,
    );
  });
});

describe("content sources", () => {
  it("clones a volume and restores a snapshot, copying the data", async () => {
    const source = await create({
      name: "pvc-source",
      capacity_range: { required_bytes: 8 * MiB },
      volume_capabilities: [mountCap()],
    });
    const [sourceBacking] = backingNamed("pvc-source");
    await writeFile(join(sourceBacking!.path, "data.txt"), "hello");

    const clone = await create({
      name: "pvc-clone",
      volume_capabilities: [mountCap()],
      volume_content_source: { volume: { volume_id: source.volume_id } },
    });
    assert.equal(clone.capacity_bytes, String(8 * MiB), "defaults to the source's size");
    assert.deepEqual(clone.content_source, { type: "volume", volume: { volume_id: source.volume_id } });
    const [cloneBacking] = backingNamed("pvc-clone");
    assert.equal(await readFile(join(cloneBacking!.path, "data.txt"), "utf8"), "hello");

    const { snapshot } = await csi.call<{
      snapshot: { snapshot_id: string; size_bytes: string; ready_to_use: boolean };
    }>("Controller", "CreateSnapshot", { name: "snap-1", source_volume_id: source.volume_id });
    assert.equal(snapshot.size_bytes, String(8 * MiB));
    assert.equal(snapshot.ready_to_use, true);
    const restored = await create({
      name: "pvc-restored",
      capacity_range: { required_bytes: 16 * MiB },
      volume_capabilities: [mountCap()],
      volume_content_source: { snapshot: { snapshot_id: snapshot.snapshot_id } },
    });
    assert.deepEqual(restored.content_source, {
      type: "snapshot",
      snapshot: { snapshot_id: snapshot.snapshot_id },
    });
    const [restoredBacking] = backingNamed("pvc-restored");
    assert.equal(await readFile(join(restoredBacking!.path, "data.txt"), "utf8"), "hello");

    await rejectsWith(
      create({
        name: "pvc-small",
        capacity_range: { required_bytes: MiB },
        volume_capabilities: [mountCap()],
        volume_content_source: { snapshot: { snapshot_id: snapshot.snapshot_id } },
      }),
      "OUT_OF_RANGE",
      /smaller than the source/,
    );
    await rejectsWith(
      create({
        name: "pvc-as-block",
        volume_capabilities: [blockCap()],
        volume_content_source: { volume: { volume_id: source.volume_id } },
      }),
      "INVALID_ARGUMENT",
    );
    // Same name, different source: incompatible.
    await rejectsWith(
      create({
        name: "pvc-clone",
        volume_capabilities: [mountCap()],
        volume_content_source: { snapshot: { snapshot_id: snapshot.snapshot_id } },
      }),
      "ALREADY_EXISTS",
      /content source/,
    );
  });

  it("answers NOT_FOUND for a missing source volume or snapshot", async () => {
    await rejectsWith(
      create({
        name: "pvc-orphan-clone",
        volume_capabilities: [mountCap()],
        volume_content_source: { volume: { volume_id: "no-such-volume" } },
      }),
      "NOT_FOUND",
      /no-such-volume/,
    );
    await rejectsWith(
      create({
        name: "pvc-orphan-restore",
        volume_capabilities: [mountCap()],
        volume_content_source: { snapshot: { snapshot_id: "no-such-snapshot" } },
      }),
      "NOT_FOUND",
      /no-such-snapshot/,
    );
  });

  it("clones a sparse block volume without filling the holes", async () => {
    const src = await create({
      name: "blk-src",
      capacity_range: { required_bytes: GiB },
      volume_capabilities: [blockCap()],
    });
    const [srcBacking] = backingNamed("blk-src");
    const f = await open(srcBacking!.path, "r+");
    await f.write(Buffer.from("block data"), 0, 10, 512 * MiB);
    await f.close();
    await create({
      name: "blk-clone",
      capacity_range: { required_bytes: 2 * GiB },
      volume_capabilities: [blockCap()],
      volume_content_source: { volume: { volume_id: src.volume_id } },
    });
    const [cloneBacking] = backingNamed("blk-clone");
    const st = await stat(cloneBacking!.path);
    assert.equal(st.size, 2 * GiB);
    assert.ok(st.blocks * 512 < 8 * MiB, `clone stays sparse (${st.blocks * 512} bytes used)`);
    const g = await open(cloneBacking!.path, "r");
    const buf = Buffer.alloc(10);
    await g.read(buf, 0, 10, 512 * MiB);
    await g.close();
    assert.equal(buf.toString(), "block data");
  });
});

describe("snapshots", () => {
  it("creates snapshots idempotently by name, lists and deletes them", async () => {
    const vol = await create({
      name: "pvc-snap-src",
      capacity_range: { required_bytes: MiB },
      volume_capabilities: [mountCap()],
    });
    const other = await create({
      name: "pvc-snap-other",
      capacity_range: { required_bytes: MiB },
      volume_capabilities: [mountCap()],
    });
    const snap = (name: string, source: string) =>
      csi.call<{ snapshot: { snapshot_id: string } }>("Controller", "CreateSnapshot", {
        name,
        source_volume_id: source,
      });
    const a = await snap("s-a", vol.volume_id);
    assert.deepEqual(await snap("s-a", vol.volume_id), a);
    await rejectsWith(snap("s-a", other.volume_id), "ALREADY_EXISTS");
    await rejectsWith(snap("s-b", "missing"), "NOT_FOUND");
    await rejectsWith(snap("", vol.volume_id), "INVALID_ARGUMENT", /name missing/);
    await rejectsWith(snap("s-c", ""), "INVALID_ARGUMENT", /source_volume_id missing/);
    await snap("s-b", vol.volume_id);
    await snap("s-c", other.volume_id);

    type List = {
      entries: { snapshot: { snapshot_id: string; source_volume_id: string } }[];
      next_token: string;
    };
    const bySource = await csi.call<List>("Controller", "ListSnapshots", { source_volume_id: vol.volume_id });
    assert.equal(bySource.entries.length, 2);
    const byId = await csi.call<List>("Controller", "ListSnapshots", { snapshot_id: a.snapshot.snapshot_id });
    assert.deepEqual(
      byId.entries.map((e) => e.snapshot.snapshot_id),
      [a.snapshot.snapshot_id],
    );
    const unknown = await csi.call<List>("Controller", "ListSnapshots", { snapshot_id: "nope" });
    assert.deepEqual(unknown.entries, []);

    const seen: string[] = [];
    let token = "";
    do {
      const page = await csi.call<List>("Controller", "ListSnapshots", {
        max_entries: 1,
        starting_token: token,
      });
      assert.ok(page.entries.length <= 1);
      seen.push(...page.entries.map((e) => e.snapshot.snapshot_id));
      token = page.next_token;
    } while (token);
    assert.equal(new Set(seen).size, handle.driver.listBackingSnapshots().length);
    await rejectsWith(csi.call("Controller", "ListSnapshots", { starting_token: "bogus" }), "ABORTED");

    await csi.call("Controller", "DeleteSnapshot", { snapshot_id: a.snapshot.snapshot_id });
    await csi.call("Controller", "DeleteSnapshot", { snapshot_id: a.snapshot.snapshot_id });
    assert.ok(!handle.driver.listBackingSnapshots().some((s) => s.snapshotId === a.snapshot.snapshot_id));
    await rejectsWith(csi.call("Controller", "DeleteSnapshot", {}), "INVALID_ARGUMENT");
  });
});

describe("DeleteVolume, ControllerExpandVolume, ValidateVolumeCapabilities", () => {
  it("deletes idempotently: an unknown id succeeds", async () => {
    const v = await create({
      name: "pvc-delete",
      capacity_range: { required_bytes: MiB },
      volume_capabilities: [mountCap()],
    });
    const [backing] = backingNamed("pvc-delete");
    await csi.call("Controller", "DeleteVolume", { volume_id: v.volume_id });
    await assert.rejects(stat(backing!.path), { code: "ENOENT" });
    assert.equal(backingNamed("pvc-delete").length, 0);
    await csi.call("Controller", "DeleteVolume", { volume_id: v.volume_id });
    await csi.call("Controller", "DeleteVolume", { volume_id: "never-existed" });
    // The name is free again: a new create makes a new volume.
    const again = await create({
      name: "pvc-delete",
      capacity_range: { required_bytes: MiB },
      volume_capabilities: [mountCap()],
    });
    assert.notEqual(again.volume_id, v.volume_id);
  });

  it("expands volumes, never shrinks them, and checks the limits", async () => {
    const v = await create({
      name: "pvc-grow",
      capacity_range: { required_bytes: 100 * MiB },
      volume_capabilities: [blockCap()],
    });
    const expand = (required: number) =>
      csi.call<{ capacity_bytes: string; node_expansion_required: boolean }>(
        "Controller",
        "ControllerExpandVolume",
        {
          volume_id: v.volume_id,
          capacity_range: { required_bytes: required },
        },
      );
    assert.deepEqual(await expand(200 * MiB), {
      capacity_bytes: String(200 * MiB),
      node_expansion_required: false,
    });
    assert.equal((await stat(backingNamed("pvc-grow")[0]!.path)).size, 200 * MiB);
    assert.equal((await expand(50 * MiB)).capacity_bytes, String(200 * MiB));
    await rejectsWith(expand(11 * GiB), "OUT_OF_RANGE");
    await rejectsWith(
      csi.call("Controller", "ControllerExpandVolume", {
        volume_id: "missing",
        capacity_range: { required_bytes: 1 },
      }),
      "NOT_FOUND",
    );
    await rejectsWith(
      csi.call("Controller", "ControllerExpandVolume", { volume_id: v.volume_id }),
      "INVALID_ARGUMENT",
      /capacity_range missing/,
    );
  });

  it("confirms matching capabilities and explains mismatches", async () => {
    const v = await create({
      name: "pvc-validate",
      capacity_range: { required_bytes: MiB },
      volume_capabilities: [mountCap()],
    });
    const ok = await csi.call<{ confirmed: { volume_capabilities: unknown[] } | null; message: string }>(
      "Controller",
      "ValidateVolumeCapabilities",
      { volume_id: v.volume_id, volume_capabilities: [mountCap("MULTI_NODE_MULTI_WRITER")] },
    );
    assert.equal(ok.confirmed?.volume_capabilities.length, 1);
    const wrong = await csi.call<{ confirmed: unknown; message: string }>(
      "Controller",
      "ValidateVolumeCapabilities",
      {
        volume_id: v.volume_id,
        volume_capabilities: [blockCap()],
      },
    );
    assert.equal(wrong.confirmed, null);
    assert.match(wrong.message, /block access to a mount volume/);
    await rejectsWith(
      csi.call("Controller", "ValidateVolumeCapabilities", {
        volume_id: "missing",
        volume_capabilities: [mountCap()],
      }),
      "NOT_FOUND",
    );
    await rejectsWith(
      csi.call("Controller", "ValidateVolumeCapabilities", { volume_id: v.volume_id }),
      "INVALID_ARGUMENT",
    );
  });

  it("reports capacity and the largest volume that still fits", async () => {
    const res = await csi.call<{ available_capacity: string; maximum_volume_size: { value: string } }>(
      "Controller",
      "GetCapacity",
      { volume_capabilities: [mountCap()] },
    );
    const used = handle.driver.listBackingVolumes().reduce((sum, v) => sum + v.capacityBytes, 0);
    assert.equal(Number(res.available_capacity), 20 * GiB - used);
    assert.equal(Number(res.maximum_volume_size.value), Math.min(10 * GiB, 20 * GiB - used));
  });
});
