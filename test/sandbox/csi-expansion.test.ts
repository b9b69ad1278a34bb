// Volume expansion on the sandbox CSI driver over real gRPC: the controller
// grows the volume (never shrinks it) and says whether the node must follow,
// the node plugin grows the filesystem of a volume it staged or published,
// the shapes a driver may take (node-only expansion, no node step, no node
// EXPAND_VOLUME), the state kept across a restart, and injected faults on
// the new calls through the admin endpoint.
import assert from "node:assert/strict";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, afterEach, before, describe, it } from "node:test";
import {
  type CsiDriverHandle,
  type StartCsiDriverOptions,
  startCsiDriver,
} from "../../sandbox/csi/server.ts";
import {
  blockCap,
  mountCap,
  type RawCsiClient,
  rawCsiClient,
  rejectsWith,
} from "../helpers/csi-driver-client.ts";
import { csiAdmin } from "../helpers/sandbox.ts";

const MiB = 1024 ** 2;
const GiB = 1024 ** 3;
const nodeA = "sandbox-node";
const nodeB = "sandbox-node-2";

let dir: string;
let handle: CsiDriverHandle;
let controller: RawCsiClient;
let onA: RawCsiClient;
let onB: RawCsiClient;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "ksf-csi-expand-"));
  handle = await startCsiDriver({ dir: join(dir, "csi"), nodes: [nodeA, nodeB], maxVolumeBytes: 10 * GiB });
  controller = rawCsiClient(handle.endpoint);
  onA = rawCsiClient(handle.nodeEndpoints[nodeA]!);
  onB = rawCsiClient(handle.nodeEndpoints[nodeB]!);
});

afterEach(() => handle.driver.clearFaults());

after(async () => {
  for (const c of [controller, onA, onB]) c.close();
  await handle.close();
  await rm(dir, { recursive: true, force: true });
});

let counter = 0;
async function createOn(client: RawCsiClient, bytes: number, block = false): Promise<string> {
  const res = await client.call<{ volume: { volume_id: string } }>("Controller", "CreateVolume", {
    name: `pvc-expand-${++counter}`,
    capacity_range: { required_bytes: bytes },
    volume_capabilities: [block ? blockCap() : mountCap()],
  });
  return res.volume.volume_id;
}
const create = (bytes: number, block = false) => createOn(controller, bytes, block);

type ExpandAnswer = { capacity_bytes: string; node_expansion_required: boolean };
const expandOn = (client: RawCsiClient, id: string, bytes: number) =>
  client.call<ExpandAnswer>("Controller", "ControllerExpandVolume", {
    volume_id: id,
    capacity_range: { required_bytes: bytes },
  });
const expand = (id: string, bytes: number) => expandOn(controller, id, bytes);

const nodeExpand = (client: RawCsiClient, req: object) =>
  client.call<{ capacity_bytes: string }>("Node", "NodeExpandVolume", req);

function backingOf(h: CsiDriverHandle, id: string) {
  const v = h.driver.listBackingVolumes().find((b) => b.volumeId === id);
  assert.ok(v, `volume ${id} is held by the driver`);
  return v;
}
const backing = (id: string) => backingOf(handle, id);

/** ControllerPublish, NodeStage and NodePublish on node A; answers the two paths. */
async function mountOnA(id: string, block = false): Promise<{ staging: string; target: string }> {
  const cap = block ? blockCap() : mountCap();
  const staging = join(dir, "kubelet", nodeA, "plugins", id, "globalmount");
  const target = join(dir, "kubelet", nodeA, "pods", `pod-of-${id}`, "mount");
  await controller.call("Controller", "ControllerPublishVolume", {
    volume_id: id,
    node_id: nodeA,
    volume_capability: cap,
  });
  await onA.call("Node", "NodeStageVolume", {
    volume_id: id,
    staging_target_path: staging,
    volume_capability: cap,
  });
  await onA.call("Node", "NodePublishVolume", {
    volume_id: id,
    staging_target_path: staging,
    target_path: target,
    volume_capability: cap,
  });
  return { staging, target };
}

describe("ControllerExpandVolume", () => {
  it("grows a mount volume, asks for node expansion, and keeps the filesystem size until the node grows it", async () => {
    const id = await create(100 * MiB);
    assert.deepEqual(await expand(id, 300 * MiB), {
      capacity_bytes: String(300 * MiB),
      node_expansion_required: true,
    });
    assert.equal(backing(id).capacityBytes, 300 * MiB);
    assert.equal(backing(id).nodeCapacityBytes, 100 * MiB);
    // The admin endpoint shows the same, as an out-of-process test reads it.
    const viaAdmin = (await csiAdmin(handle.adminUrl).volumes()).find((v) => v.volumeId === id);
    assert.equal(viaAdmin?.capacityBytes, 300 * MiB);
    assert.equal(viaAdmin?.nodeCapacityBytes, 100 * MiB);
  });

  it("never shrinks: a smaller or equal request answers the current size", async () => {
    const id = await create(200 * MiB);
    assert.equal((await expand(id, 50 * MiB)).capacity_bytes, String(200 * MiB));
    assert.equal((await expand(id, 200 * MiB)).capacity_bytes, String(200 * MiB));
    assert.equal(backing(id).capacityBytes, 200 * MiB);
  });

  it("grows a block volume's backing file and needs nothing on the node", async () => {
    const id = await create(10 * MiB, true);
    assert.deepEqual(await expand(id, 40 * MiB), {
      capacity_bytes: String(40 * MiB),
      node_expansion_required: false,
    });
    assert.equal((await stat(backing(id).path)).size, 40 * MiB);
    assert.equal(backing(id).nodeCapacityBytes, 40 * MiB);
  });

  it("answers INVALID_ARGUMENT without a volume id, NOT_FOUND for an unknown volume, OUT_OF_RANGE above the maximum", async () => {
    const id = await create(MiB);
    await rejectsWith(
      controller.call("Controller", "ControllerExpandVolume", { capacity_range: { required_bytes: MiB } }),
      "INVALID_ARGUMENT",
      /volume_id missing/,
    );
    await rejectsWith(expand("no-such-volume", 2 * MiB), "NOT_FOUND");
    await rejectsWith(
      controller.call("Controller", "ControllerExpandVolume", {
        volume_id: id,
        capacity_range: { required_bytes: 2 * MiB },
        volume_capability: blockCap(),
      }),
      "INVALID_ARGUMENT",
      /mount volume, not block/,
    );
    await rejectsWith(expand(id, 11 * GiB), "OUT_OF_RANGE", /maximum volume size/);
    assert.equal(backing(id).capacityBytes, MiB);
  });
});

describe("NodeExpandVolume", () => {
  it("grows the filesystem of a published volume to the device's size and answers it", async () => {
    const id = await create(100 * MiB);
    const { staging, target } = await mountOnA(id);
    await expand(id, 250 * MiB);
    assert.equal(backing(id).nodeCapacityBytes, 100 * MiB);
    const res = await nodeExpand(onA, {
      volume_id: id,
      volume_path: target,
      staging_target_path: staging,
      capacity_range: { required_bytes: 250 * MiB },
      volume_capability: mountCap(),
    });
    assert.equal(res.capacity_bytes, String(250 * MiB));
    assert.equal(backing(id).nodeCapacityBytes, 250 * MiB);
    // Repeating it is a no-op with the same answer; so is the staging path.
    assert.equal(
      (await nodeExpand(onA, { volume_id: id, volume_path: target })).capacity_bytes,
      String(250 * MiB),
    );
    assert.equal(
      (await nodeExpand(onA, { volume_id: id, volume_path: staging })).capacity_bytes,
      String(250 * MiB),
    );
  });

  it("refuses what hostpath refuses: ids, paths, capabilities and sizes", async () => {
    const id = await create(100 * MiB);
    const { target } = await mountOnA(id);
    await rejectsWith(nodeExpand(onA, { volume_path: target }), "INVALID_ARGUMENT", /volume_id missing/);
    await rejectsWith(nodeExpand(onA, { volume_id: id }), "INVALID_ARGUMENT", /volume_path missing/);
    await rejectsWith(
      nodeExpand(onA, { volume_id: id, volume_path: "relative" }),
      "INVALID_ARGUMENT",
      /absolute/,
    );
    await rejectsWith(nodeExpand(onA, { volume_id: "no-such-volume", volume_path: target }), "NOT_FOUND");
    // Not there on that node: another node's plugin, or a path it never made.
    await rejectsWith(nodeExpand(onB, { volume_id: id, volume_path: target }), "NOT_FOUND", /sandbox-node-2/);
    await rejectsWith(nodeExpand(onA, { volume_id: id, volume_path: join(dir, "elsewhere") }), "NOT_FOUND");
    await rejectsWith(
      nodeExpand(onA, { volume_id: id, volume_path: target, volume_capability: blockCap() }),
      "INVALID_ARGUMENT",
      /mount volume, not block/,
    );
    // Above what the controller gave the device.
    await rejectsWith(
      nodeExpand(onA, { volume_id: id, volume_path: target, capacity_range: { required_bytes: 200 * MiB } }),
      "OUT_OF_RANGE",
      /ControllerExpandVolume first/,
    );
    assert.equal(backing(id).nodeCapacityBytes, 100 * MiB);
    assert.equal(backing(id).capacityBytes, 100 * MiB);
  });
});

describe("driver shapes", () => {
  const started: CsiDriverHandle[] = [];
  const clients: RawCsiClient[] = [];
  after(async () => {
    for (const c of clients) c.close();
    await Promise.all(started.map((h) => h.close()));
  });
  async function other(name: string, options: Omit<StartCsiDriverOptions, "dir">) {
    const h = await startCsiDriver({ dir: join(dir, name), ...options });
    started.push(h);
    const c = rawCsiClient(h.endpoint);
    clients.push(c);
    return { h, c };
  }

  it("node-only expansion (no controller EXPAND_VOLUME): NodeExpandVolume grows the volume itself", async () => {
    const { h, c } = await other("node-only", {
      controllerCapabilities: ["CREATE_DELETE_VOLUME", "GET_CAPACITY"],
      nodeCapabilities: ["EXPAND_VOLUME"],
    });
    const id = await createOn(c, 100 * MiB);
    await rejectsWith(expandOn(c, id, 200 * MiB), "UNIMPLEMENTED", /EXPAND_VOLUME/);
    const target = join(dir, "node-only-target");
    await c.call("Node", "NodePublishVolume", {
      volume_id: id,
      target_path: target,
      volume_capability: mountCap(),
    });
    const res = await nodeExpand(c, {
      volume_id: id,
      volume_path: target,
      capacity_range: { required_bytes: 200 * MiB },
    });
    assert.equal(res.capacity_bytes, String(200 * MiB));
    assert.equal(backingOf(h, id).capacityBytes, 200 * MiB);
    assert.equal(backingOf(h, id).nodeCapacityBytes, 200 * MiB);
  });

  it("nodeExpansionKinds decides node_expansion_required per kind", async () => {
    const { h, c } = await other("kinds", { nodeExpansionKinds: ["block"] });
    const mount = await createOn(c, MiB);
    const block = await createOn(c, MiB, true);
    assert.equal((await expandOn(c, mount, 2 * MiB)).node_expansion_required, false);
    assert.equal(backingOf(h, mount).nodeCapacityBytes, 2 * MiB);
    assert.equal((await expandOn(c, block, 2 * MiB)).node_expansion_required, true);
    assert.equal(backingOf(h, block).nodeCapacityBytes, MiB);
  });

  it("a node plugin without EXPAND_VOLUME is never asked to expand, and refuses NodeExpandVolume", async () => {
    const { h, c } = await other("no-node-expand", { nodeCapabilities: ["STAGE_UNSTAGE_VOLUME"] });
    const id = await createOn(c, MiB);
    assert.equal((await expandOn(c, id, 2 * MiB)).node_expansion_required, false);
    assert.equal(backingOf(h, id).nodeCapacityBytes, 2 * MiB);
    await rejectsWith(
      nodeExpand(c, { volume_id: id, volume_path: join(dir, "anywhere") }),
      "UNIMPLEMENTED",
      /EXPAND_VOLUME/,
    );
  });

  it("OFFLINE expansion: advertised, and ControllerExpandVolume refuses a volume in use with FAILED_PRECONDITION", async () => {
    const { h, c } = await other("offline", { volumeExpansion: "OFFLINE" });
    const caps = await c.call<{ capabilities: { volume_expansion?: { type: string } }[] }>(
      "Identity",
      "GetPluginCapabilities",
    );
    assert.deepEqual(
      caps.capabilities.flatMap((cap) => (cap.volume_expansion ? [cap.volume_expansion.type] : [])),
      ["OFFLINE"],
    );
    const id = await createOn(c, MiB);
    await c.call("Controller", "ControllerPublishVolume", {
      volume_id: id,
      node_id: h.driver.config.nodeId,
      volume_capability: mountCap(),
    });
    await rejectsWith(expandOn(c, id, 2 * MiB), "FAILED_PRECONDITION", /in use on node\(s\) sandbox-node/);
    assert.equal(backingOf(h, id).capacityBytes, MiB);
    // A request it need not act on is still fine; once unpublished it grows.
    assert.equal((await expandOn(c, id, MiB)).capacity_bytes, String(MiB));
    await c.call("Controller", "ControllerUnpublishVolume", {
      volume_id: id,
      node_id: h.driver.config.nodeId,
    });
    assert.equal((await expandOn(c, id, 2 * MiB)).capacity_bytes, String(2 * MiB));
  });

  it("keeps the sizes and mutable parameters across a restart", async () => {
    const at = join(dir, "restart");
    let h = await startCsiDriver({ dir: at });
    let c = rawCsiClient(h.endpoint);
    const res = await c.call<{ volume: { volume_id: string } }>("Controller", "CreateVolume", {
      name: "pvc-restart",
      capacity_range: { required_bytes: MiB },
      volume_capabilities: [mountCap()],
      mutable_parameters: { iops: "3000" },
    });
    const id = res.volume.volume_id;
    await expandOn(c, id, 5 * MiB);
    await c.call("Controller", "ControllerModifyVolume", {
      volume_id: id,
      mutable_parameters: { tier: "premium" },
    });
    c.close();
    await h.close();
    h = await startCsiDriver({ dir: at });
    c = rawCsiClient(h.endpoint);
    try {
      const v = backingOf(h, id);
      assert.equal(v.capacityBytes, 5 * MiB);
      assert.equal(v.nodeCapacityBytes, MiB);
      assert.deepEqual(v.mutableParameters, { iops: "3000", tier: "premium" });
    } finally {
      c.close();
      await h.close();
    }
  });
});

describe("faults on the new calls", () => {
  it("fail ControllerExpandVolume, ControllerModifyVolume and NodeExpandVolume with the chosen code, through the admin endpoint", async () => {
    const admin = csiAdmin(handle.adminUrl);
    const id = await create(100 * MiB);
    const { target } = await mountOnA(id);

    await admin.setFaults({
      errorProbability: 1,
      errorCodes: ["INVALID_ARGUMENT"],
      methods: ["ControllerExpandVolume"],
    });
    await rejectsWith(expand(id, 200 * MiB), "INVALID_ARGUMENT", /injected/);
    assert.equal(backing(id).capacityBytes, 100 * MiB);

    await admin.setFaults({
      errorProbability: 1,
      errorCodes: ["FAILED_PRECONDITION"],
      methods: ["/csi.v1.Controller/ControllerModifyVolume"],
    });
    await rejectsWith(
      controller.call("Controller", "ControllerModifyVolume", {
        volume_id: id,
        mutable_parameters: { iops: "10" },
      }),
      "FAILED_PRECONDITION",
      /injected/,
    );
    assert.deepEqual(backing(id).mutableParameters, {});
    // Other calls are untouched.
    await expand(id, 200 * MiB);

    // UNAVAILABLE after the work: the filesystem grew, the caller never heard.
    await admin.setFaults({
      errorProbability: 1,
      errorCodes: ["UNAVAILABLE"],
      afterProbability: 1,
      methods: ["NodeExpandVolume"],
    });
    await rejectsWith(nodeExpand(onA, { volume_id: id, volume_path: target }), "UNAVAILABLE", /injected/);
    assert.equal(backing(id).nodeCapacityBytes, 200 * MiB);
    assert.deepEqual((await admin.stats()).injected.NodeExpandVolume, { before: 0, after: 1 });
  });
});
