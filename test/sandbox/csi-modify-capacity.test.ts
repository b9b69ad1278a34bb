// Mutable parameters (MODIFY_VOLUME) and per-segment capacity (GET_CAPACITY)
// on the sandbox CSI driver over real gRPC: CreateVolume records the
// supported keys and refuses the rest, ControllerModifyVolume merges them,
// ValidateVolumeCapabilities checks them; each node's segment has a pool
// that shrinks as volumes are created or grown there and grows as they go,
// and the admin endpoint shows and changes it.
import assert from "node:assert/strict";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type CsiDriverHandle, startCsiDriver } from "../../sandbox/csi/server.ts";
import { mountCap, type RawCsiClient, rawCsiClient, rejectsWith } from "../helpers/csi-driver-client.ts";
import { csiAdmin } from "../helpers/sandbox.ts";

const GiB = 1024 ** 3;
const nodeA = "sandbox-node";
const nodeB = "sandbox-node-2";
const key = "topology.hostpath.csi/node";

let dir: string;
let handle: CsiDriverHandle;
let csi: RawCsiClient;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "ksf-csi-modify-"));
  handle = await startCsiDriver({
    dir: join(dir, "csi"),
    nodes: [nodeA, nodeB],
    maxVolumeBytes: 8 * GiB,
    totalCapacityBytes: 100 * GiB,
    segmentCapacityBytes: 10 * GiB,
    segmentCapacityOverrides: { [nodeB]: 3 * GiB },
  });
  csi = rawCsiClient(handle.endpoint);
});

after(async () => {
  csi.close();
  await handle.close();
  await rm(dir, { recursive: true, force: true });
});

let counter = 0;
function create(extra: object = {}, bytes = GiB) {
  return csi.call<{
    volume: { volume_id: string; accessible_topology: { segments: Record<string, string> }[] };
  }>("Controller", "CreateVolume", {
    name: `pvc-mc-${++counter}`,
    capacity_range: { required_bytes: bytes },
    volume_capabilities: [mountCap()],
    ...extra,
  });
}
const onNode = (node: string) => ({
  accessibility_requirements: {
    requisite: [{ segments: { [key]: node } }],
    preferred: [{ segments: { [key]: node } }],
  },
});
const backing = (id: string) => handle.driver.listBackingVolumes().find((v) => v.volumeId === id);
const modify = (id: string, params: Record<string, string>) =>
  csi.call("Controller", "ControllerModifyVolume", { volume_id: id, mutable_parameters: params });

describe("mutable parameters", () => {
  it("CreateVolume records the supported keys and drops the sidecars' metadata", async () => {
    const res = await create({
      mutable_parameters: { iops: "3000", tier: "premium", "csi.storage.k8s.io/pvc/name": "data" },
    });
    assert.deepEqual(backing(res.volume.volume_id)?.mutableParameters, { iops: "3000", tier: "premium" });
    // Not part of the volume context the node calls get.
    const listed = await csi.call<{ entries: { volume: { volume_id: string; volume_context: object } }[] }>(
      "Controller",
      "ListVolumes",
      {},
    );
    const entry = listed.entries.find((e) => e.volume.volume_id === res.volume.volume_id);
    assert.deepEqual(entry?.volume.volume_context, {});
  });

  it("CreateVolume refuses unknown keys and invalid values with INVALID_ARGUMENT and makes nothing", async () => {
    const before = handle.driver.listBackingVolumes().length;
    const dirsBefore = (await readdir(join(dir, "csi", "volumes"))).length;
    for (const [params, message] of [
      [{ color: "blue" }, /"color" is not supported/],
      [{ iops: "0" }, /iops="0" must be a positive integer/],
      [{ iops: "12abc" }, /positive integer/],
      [{ iops: "1000001" }, /at most 1000000/],
      [{ throughput: "-5" }, /throughput/],
      [{ tier: "gold" }, /tier="gold" must be one of standard, premium, archive/],
    ] as const) {
      await rejectsWith(create({ mutable_parameters: params }), "INVALID_ARGUMENT", message);
    }
    assert.equal(handle.driver.listBackingVolumes().length, before);
    assert.equal((await readdir(join(dir, "csi", "volumes"))).length, dirsBefore);
  });

  it("ControllerModifyVolume merges valid parameters over the recorded ones", async () => {
    const { volume } = await create({ mutable_parameters: { iops: "3000", tier: "standard" } });
    assert.deepEqual(await modify(volume.volume_id, { iops: "5000", throughput: "250" }), {});
    assert.deepEqual(backing(volume.volume_id)?.mutableParameters, {
      iops: "5000",
      throughput: "250",
      tier: "standard",
    });
    // The same again is a no-op success; extra metadata is accepted and not recorded.
    await modify(volume.volume_id, { iops: "5000", "csi.storage.k8s.io/pv/name": "pv-1" });
    const viaAdmin = (await csiAdmin(handle.adminUrl).volumes()).find((v) => v.volumeId === volume.volume_id);
    assert.deepEqual(viaAdmin?.mutableParameters, { iops: "5000", throughput: "250", tier: "standard" });
  });

  it("ControllerModifyVolume answers INVALID_ARGUMENT (infeasible) for bad parameters and changes nothing", async () => {
    const { volume } = await create({ mutable_parameters: { iops: "100" } });
    await rejectsWith(modify(volume.volume_id, { iops: "200", size: "big" }), "INVALID_ARGUMENT", /"size"/);
    await rejectsWith(modify(volume.volume_id, { tier: "" }), "INVALID_ARGUMENT", /tier/);
    await rejectsWith(modify(volume.volume_id, {}), "INVALID_ARGUMENT", /mutable_parameters missing/);
    await rejectsWith(
      csi.call("Controller", "ControllerModifyVolume", { mutable_parameters: { iops: "1" } }),
      "INVALID_ARGUMENT",
      /volume_id missing/,
    );
    await rejectsWith(modify("no-such-volume", { iops: "1" }), "NOT_FOUND");
    assert.deepEqual(backing(volume.volume_id)?.mutableParameters, { iops: "100" });
  });

  it("ValidateVolumeCapabilities confirms supported mutable parameters and explains the rest", async () => {
    const { volume } = await create();
    type Answer = { confirmed: { mutable_parameters: Record<string, string> } | null; message: string };
    const validate = (params: Record<string, string>) =>
      csi.call<Answer>("Controller", "ValidateVolumeCapabilities", {
        volume_id: volume.volume_id,
        volume_capabilities: [mountCap()],
        mutable_parameters: params,
      });
    assert.deepEqual((await validate({ iops: "10", tier: "archive" })).confirmed?.mutable_parameters, {
      iops: "10",
      tier: "archive",
    });
    const refused = await validate({ iops: "ten" });
    assert.equal(refused.confirmed, null);
    assert.match(refused.message, /iops="ten"/);
  });

  it("a driver without MODIFY_VOLUME refuses ControllerModifyVolume and mutable parameters on create", async () => {
    const other = await startCsiDriver({
      dir: join(dir, "no-modify"),
      controllerCapabilities: ["CREATE_DELETE_VOLUME", "EXPAND_VOLUME"],
    });
    const c = rawCsiClient(other.endpoint);
    try {
      await rejectsWith(
        c.call("Controller", "ControllerModifyVolume", { volume_id: "x", mutable_parameters: { iops: "1" } }),
        "UNIMPLEMENTED",
        /MODIFY_VOLUME/,
      );
      await rejectsWith(
        c.call("Controller", "CreateVolume", {
          name: "pvc-vac",
          volume_capabilities: [mountCap()],
          mutable_parameters: { iops: "1" },
        }),
        "INVALID_ARGUMENT",
        /MODIFY_VOLUME/,
      );
    } finally {
      c.close();
      await other.close();
    }
  });
});

describe("capacity per topology segment", () => {
  type Capacity = { available_capacity: string; maximum_volume_size: { value: string } | null };
  const capacityIn = async (segments?: Record<string, string>) => {
    const res = await csi.call<Capacity>(
      "Controller",
      "GetCapacity",
      segments ? { accessible_topology: { segments } } : {},
    );
    return { available: Number(res.available_capacity), max: Number(res.maximum_volume_size?.value) };
  };
  const free = async (node: string) => (await capacityIn({ [key]: node })).available;
  const segmentOf = async (node: string) =>
    (await csiAdmin(handle.adminUrl).capacity()).segments.find((s) => s.segment[key] === node);

  it("shrinks as volumes are created or expanded in a segment and grows back as they are deleted", async () => {
    const startA = await free(nodeA);
    const startB = await free(nodeB);
    assert.equal(startB, 3 * GiB - ((await segmentOf(nodeB))?.usedBytes ?? 0));
    const { volume } = await create(onNode(nodeA), 2 * GiB);
    assert.deepEqual(volume.accessible_topology, [{ segments: { [key]: nodeA } }]);
    assert.equal(await free(nodeA), startA - 2 * GiB);
    assert.equal(await free(nodeB), startB);
    await csi.call("Controller", "ControllerExpandVolume", {
      volume_id: volume.volume_id,
      capacity_range: { required_bytes: 5 * GiB },
    });
    assert.equal(await free(nodeA), startA - 5 * GiB);
    assert.equal((await segmentOf(nodeA))?.availableBytes, startA - 5 * GiB);
    await csi.call("Controller", "DeleteVolume", { volume_id: volume.volume_id });
    assert.equal(await free(nodeA), startA);
  });

  it("answers RESOURCE_EXHAUSTED when a volume does not fit its segment, creating nothing", async () => {
    const left = await free(nodeB);
    assert.ok(left >= 2 * GiB && left < 4 * GiB, `node B has ${left} bytes left`);
    const count = handle.driver.listBackingVolumes().length;
    await rejectsWith(
      create(onNode(nodeB), 4 * GiB),
      "RESOURCE_EXHAUSTED",
      /topology segment .*sandbox-node-2/,
    );
    assert.equal(handle.driver.listBackingVolumes().length, count);
    const { volume } = await create(onNode(nodeB), 2 * GiB);
    assert.equal(await free(nodeB), left - 2 * GiB);
    // Growing past the segment's pool is refused too, and changes nothing.
    await rejectsWith(
      csi.call("Controller", "ControllerExpandVolume", {
        volume_id: volume.volume_id,
        capacity_range: { required_bytes: 4 * GiB },
      }),
      "RESOURCE_EXHAUSTED",
    );
    assert.equal(backing(volume.volume_id)?.capacityBytes, 2 * GiB);
    await csi.call("Controller", "DeleteVolume", { volume_id: volume.volume_id });
    assert.equal(await free(nodeB), left);
  });

  it("maximum_volume_size is the configured maximum, or what is left when less", async () => {
    const a = await capacityIn({ [key]: nodeA });
    assert.equal(a.max, Math.min(8 * GiB, a.available));
    const b = await capacityIn({ [key]: nodeB });
    assert.equal(b.max, b.available);
    assert.ok(b.max < 8 * GiB);
  });

  it("without a segment answers the driver-wide pool; a segment of unknown keys has nothing", async () => {
    const report = await csiAdmin(handle.adminUrl).capacity();
    assert.equal((await capacityIn()).available, 100 * GiB - report.usedBytes);
    assert.equal(report.availableBytes, 100 * GiB - report.usedBytes);
    assert.deepEqual(await capacityIn({ "topology.kubernetes.io/zone": "z1" }), { available: 0, max: 0 });
  });

  it("a volume created without requirements takes room on the driver's own node", async () => {
    const before = await free(nodeA);
    const { volume } = await create({}, GiB);
    assert.deepEqual(volume.accessible_topology, [{ segments: { [key]: nodeA } }]);
    assert.equal(await free(nodeA), before - GiB);
    await csi.call("Controller", "DeleteVolume", { volume_id: volume.volume_id });
  });

  it("the admin endpoint lists each node's segment and changes pools at run time", async () => {
    const admin = csiAdmin(handle.adminUrl);
    const report = await admin.capacity();
    assert.deepEqual(
      report.segments.map((s) => s.segment[key]),
      [nodeA, nodeB],
    );
    assert.equal(report.defaultSegmentBytes, 10 * GiB);
    assert.equal(report.maxVolumeBytes, 8 * GiB);
    assert.equal(report.segments.find((s) => s.segment[key] === nodeB)?.totalBytes, 3 * GiB);

    const usedB = (await segmentOf(nodeB))?.usedBytes ?? 0;
    const changed = await admin.setCapacity(usedB + GiB, nodeB);
    assert.equal(changed.segments.find((s) => s.segment[key] === nodeB)?.availableBytes, GiB);
    assert.equal(await free(nodeB), GiB);
    await rejectsWith(create(onNode(nodeB), 2 * GiB), "RESOURCE_EXHAUSTED");
    // A segment no node has yet shows up once it has a pool of its own.
    await admin.setCapacity(5 * GiB, "sandbox-node-9");
    assert.equal(await free("sandbox-node-9"), 5 * GiB);
    assert.ok((await admin.capacity()).segments.some((s) => s.segment[key] === "sandbox-node-9"));
    // Back on the default pool.
    await admin.setCapacity(null, nodeB);
    assert.equal(await free(nodeB), 10 * GiB - usedB);

    for (const body of [
      { totalBytes: -1 },
      { totalBytes: "1" },
      { totalBytes: 1, extra: true },
      [],
      { totalBytes: null },
    ]) {
      const res = await fetch(`${handle.adminUrl}/capacity`, { method: "PUT", body: JSON.stringify(body) });
      assert.equal(res.status, 400, JSON.stringify(body));
    }
    assert.equal((await admin.capacity()).defaultSegmentBytes, 10 * GiB);
  });
});
