// The attach path without reads, over the sandbox API server (requests
// counted there) and CSI driver, with real watched copies of the PVs and
// CSINodes: an event's own copy of the VolumeAttachment stands in for the
// GET on a sync's first attempt, the status is written on the VA the
// finalizer PATCH returned, and the PV comes from the copy. A stale event
// copy costs a conflict and a live retry, never a publish decided on it.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { chooseHandler } from "../../shared/attacher/choose-handler.ts";
import { annNodeId } from "../../shared/attacher/constants.ts";
import { attachmentFromEvent, copyMayDecide } from "../../shared/attacher/event-copy.ts";
import { AttacherController } from "../../shared/attacher/runtime/attacher-controller.ts";
import { capabilitiesFrom } from "../../shared/csi/capabilities.ts";
import { CsiClient } from "../../shared/csi/client.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { csiNodes, persistentVolumes, volumeAttachments } from "../../shared/kube/resources.ts";
import type { CSINode, PersistentVolume, VolumeAttachment } from "../../shared/kube/types.ts";
import { startWatchedStore, type WatchedStore } from "../../shared/kube/watched-store.ts";
import { annAttachLock } from "../../shared/kube/well-known.ts";
import { createLogger } from "../../shared/log.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";

const driverName = "hostpath.csi.k8s.io";
const finalizer = "external-attacher/hostpath-csi-k8s-io";
const node = "sandbox-node";

const vaEvent = (name: string, object: VolumeAttachment, action: "add" | "update" = "add") => ({
  action,
  kind: "VolumeAttachment",
  apiVersion: "storage.k8s.io/v1",
  name,
  object: object as unknown as Record<string, unknown>,
});

async function until(what: string, ok: () => boolean | Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await ok()) return;
    await sleep(10);
  }
  assert.fail(`timed out waiting for ${what}`);
}

describe("the attach path reads nothing the event and the copies already hold", () => {
  let sandbox: TestSandbox;
  let kube: KubeJsonClient;
  let csi: CsiClient;
  let pvCopy: WatchedStore<PersistentVolume>;
  let nodeCopy: WatchedStore<CSINode>;
  let attacher: AttacherController;

  before(async () => {
    sandbox = await startTestSandbox();
    kube = new KubeJsonClient(sandbox.kubeConfig);
    csi = await CsiClient.connect({ endpoint: sandbox.csiEndpoint, timeoutMs: 2000 });
  });
  after(async () => {
    await pvCopy?.stop();
    await nodeCopy?.stop();
    csi.close();
    await kube.close();
    await sandbox.close();
  });
  beforeEach(async () => {
    await pvCopy?.stop();
    await nodeCopy?.stop();
    await sandbox.admin.reset();
    await sandbox.csi.clearFaults();
    await sandbox.csi.resetStats();
    const log = createLogger({ name: "test", level: "silent" });
    const common = { kubeConfig: sandbox.kubeConfig, json: kube, log };
    pvCopy = startWatchedStore<PersistentVolume>({ ...common, resource: persistentVolumes });
    nodeCopy = startWatchedStore<CSINode>({ ...common, resource: csiNodes });
    assert.ok(await pvCopy.whenSynced(5000));
    assert.ok(await nodeCopy.whenSynced(5000));
    attacher = new AttacherController({
      kube,
      csi,
      driverName,
      csiNodes: () => nodeCopy,
      persistentVolumes: () => pvCopy,
    });
  });

  async function volume(
    name: string,
    accessModes = ["ReadWriteOnce"],
    copied = true,
  ): Promise<PersistentVolume> {
    const created = await csi.createVolume({
      name,
      capacityRange: { requiredBytes: 1n << 30n },
      volumeCapabilities: [{ mount: { fsType: "ext4" }, accessMode: { mode: "SINGLE_NODE_WRITER" } }],
    });
    const pv = await kube.create<PersistentVolume>(persistentVolumes, {
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: { name },
      spec: {
        capacity: { storage: "1Gi" },
        accessModes,
        persistentVolumeReclaimPolicy: "Retain",
        csi: { driver: driverName, volumeHandle: created.volume!.volumeId, fsType: "ext4" },
      },
    });
    if (copied) await until(`the copy to hold ${name}`, () => pvCopy.store.get("", name) !== undefined);
    await until("the CSINode in the copy", () => nodeCopy.store.get("", node) !== undefined);
    return pv;
  }

  function createAttachment(name: string, pvName: string): Promise<VolumeAttachment> {
    return kube.create<VolumeAttachment>(volumeAttachments, {
      apiVersion: "storage.k8s.io/v1",
      kind: "VolumeAttachment",
      metadata: { name },
      spec: { attacher: driverName, nodeName: node, source: { persistentVolumeName: pvName } },
    });
  }

  const publishes = async () => (await sandbox.csi.stats()).calls.ControllerPublishVolume ?? 0;

  it("an ADDED event with its current copy: PATCH PV, PATCH VA, PUT status, and not one GET", async () => {
    await volume("pv-a");
    const created = await createAttachment("va-a", "pv-a");
    await sandbox.admin.resetCounters();

    const [attached] = await attacher.handleEvent(vaEvent("va-a", created));
    assert.equal(attached?.outcome, `attached to node ${node}`);
    assert.deepEqual(await sandbox.admin.counters(), {
      "patch persistentvolumes": 1,
      "patch volumeattachments": 1,
      "update volumeattachments/status": 1,
    });
    const va = await kube.get<VolumeAttachment>(volumeAttachments, "va-a");
    assert.equal(va.status?.attached, true);
    assert.deepEqual(va.metadata.finalizers, [finalizer]);
    assert.equal(va.metadata.annotations?.[annNodeId], node);

    // The forwarder folds the events of our own writes into one, carrying the attached VA.
    await sandbox.admin.resetCounters();
    const [again] = await attacher.handleEvent(vaEvent("va-a", va, "update"));
    assert.equal(again?.outcome, "already attached");
    assert.deepEqual(await sandbox.admin.counters(), {}, "not even a read");
  });

  it("a stale copy: the finalizer PATCH conflicts, the retry reads live, attaches, keeps the other write", async () => {
    await volume("pv-b");
    const stale = await createAttachment("va-b", "pv-b");
    // Someone else writes the VA after the event was sent.
    await kube.patch(volumeAttachments, "va-b", undefined, { metadata: { labels: { team: "x" } } }, "merge");
    await sandbox.admin.resetCounters();

    const [attached] = await attacher.handleEvent(vaEvent("va-b", stale));
    assert.equal(attached?.outcome, `attached to node ${node}`);
    const counters = await sandbox.admin.counters();
    assert.equal(counters["patch volumeattachments"], 2, "the stale PATCH, then the one on the live VA");
    assert.equal(counters["get volumeattachments"], 1, "the retry reads the VA live");
    assert.equal(counters["get persistentvolumes"], 1, "and the PV: the copies were behind");
    const va = await kube.get<VolumeAttachment>(volumeAttachments, "va-b");
    assert.equal(va.status?.attached, true);
    assert.deepEqual(va.metadata.finalizers, [finalizer]);
    assert.equal(va.metadata.labels?.team, "x");
    assert.equal(await publishes(), 1);
  });

  it("a copy naming another node than the stored VA (garbled or forged): nothing is published there; the retry attaches to the stored node", async () => {
    await volume("pv-f");
    await kube.create<CSINode>(csiNodes, {
      apiVersion: "storage.k8s.io/v1",
      kind: "CSINode",
      metadata: { name: "elsewhere" },
      spec: { drivers: [{ name: driverName, nodeID: "elsewhere-id", topologyKeys: [] }] },
    });
    await until("the other CSINode in the copy", () => nodeCopy.store.get("", "elsewhere") !== undefined);
    const stored = await createAttachment("va-f", "pv-f");
    const garbled = { ...stored, spec: { ...stored.spec, nodeName: "elsewhere" } };

    const [attached] = await attacher.handleEvent(vaEvent("va-f", garbled));
    assert.equal(attached?.outcome, `attached to node ${node}`);
    const calls = (await sandbox.csi.stats()).calls;
    assert.equal(calls.ControllerPublishVolume, 1, "one publish, to the stored node only");
    const va = await kube.get<VolumeAttachment>(volumeAttachments, "va-f");
    assert.equal(va.status?.attached, true);
    assert.equal(va.metadata.annotations?.[annNodeId], node);
  });

  it("a copy that lacks another controller's finalizer (garbled or forged, at the stored revision): the finalizer stays", async () => {
    await volume("pv-g");
    await createAttachment("va-g", "pv-g");
    const keep = "example.com/keep";
    const stored = await kube.patch<VolumeAttachment>(
      volumeAttachments,
      "va-g",
      undefined,
      { metadata: { finalizers: [keep] } },
      "merge",
    );
    const { finalizers: _dropped, ...metadata } = stored.metadata;
    const forged = { ...stored, metadata };

    const [attached] = await attacher.handleEvent(vaEvent("va-g", forged));
    assert.equal(attached?.outcome, `attached to node ${node}`);
    const va = await kube.get<VolumeAttachment>(volumeAttachments, "va-g");
    assert.equal(va.status?.attached, true);
    assert.deepEqual([...(va.metadata.finalizers ?? [])].sort(), [keep, finalizer].sort());
  });

  it("a copy of a VA deleted since: nothing is published, the retry finds it gone", async () => {
    await volume("pv-c");
    const stale = await createAttachment("va-c", "pv-c");
    await kube.delete(volumeAttachments, "va-c");

    const [gone] = await attacher.handleEvent(vaEvent("va-c", stale));
    assert.equal(gone?.outcome, "volumeattachment is gone");
    assert.equal(await publishes(), 0);
  });

  it("a copy older than what this process wrote of the VA is skipped without a read; a recreated VA is not", async () => {
    await volume("pv-s");
    const created = await createAttachment("va-s", "pv-s");
    const [attached] = await attacher.handleEvent(vaEvent("va-s", created));
    assert.equal(attached?.outcome, `attached to node ${node}`);
    const published = await publishes();
    await sandbox.admin.resetCounters();

    // The ADDED event delivered again (or late): it shows a VA this process has since attached.
    const [late] = await attacher.handleEvent(vaEvent("va-s", created));
    assert.equal(late?.outcome, "the event's copy is older than this process's own write of it");
    assert.deepEqual(await sandbox.admin.counters(), {}, "not even a read");
    assert.equal(await publishes(), published);

    // Deleted and created again under the name: another uid, so its copy is taken as usual.
    await kube.patch(volumeAttachments, "va-s", undefined, { metadata: { finalizers: null } }, "merge");
    await kube.delete(volumeAttachments, "va-s");
    await until("va-s to be gone", async () => {
      try {
        await kube.get(volumeAttachments, "va-s");
        return false;
      } catch {
        return true;
      }
    });
    const recreated = await createAttachment("va-s", "pv-s");
    assert.notEqual(recreated.metadata.uid, created.metadata.uid);
    const [again] = await attacher.handleEvent(vaEvent("va-s", recreated));
    assert.equal(again?.outcome, `attached to node ${node}`);
  });

  it("a copy holding our finalizer would publish with no write first: the VA is read live", async () => {
    await volume("pv-d");
    await createAttachment("va-d", "pv-d");
    const held = await kube.patch<VolumeAttachment>(
      volumeAttachments,
      "va-d",
      undefined,
      { metadata: { finalizers: [finalizer], annotations: { [annNodeId]: node } } },
      "merge",
    );
    // Detached and released by another instance meanwhile: deleted, finalizer gone, so the VA is gone.
    await kube.delete(volumeAttachments, "va-d");
    await kube.patch(volumeAttachments, "va-d", undefined, { metadata: { finalizers: null } }, "merge");
    await sandbox.admin.resetCounters();

    const [gone] = await attacher.handleEvent(vaEvent("va-d", held, "update"));
    assert.equal(gone?.outcome, "volumeattachment is gone");
    assert.equal((await sandbox.admin.counters())["get volumeattachments"], 1);
    assert.equal(await publishes(), 0);
  });

  it("the PV copy: a finalizer already in it needs no PV write; a single-node PV is read live until the copy has reached the VA", async () => {
    await volume("pv-e");
    const first = await createAttachment("va-e1", "pv-e");
    await attacher.handleEvent(vaEvent("va-e1", first));
    await until("the copy to show our PV finalizer", () =>
      Boolean(pvCopy.store.get("", "pv-e")?.metadata.finalizers?.includes(finalizer)),
    );

    // Another attachment of the same PV (RWO): the copy's finalizer spares the PATCH, but the
    // copy has not seen a PV event since this VA was created, so the lock could be newer than it.
    const second = await createAttachment("va-e2", "pv-e");
    await sandbox.admin.resetCounters();
    const [behind] = await attacher.handleEvent(vaEvent("va-e2", second));
    assert.equal(behind?.outcome, `attached to node ${node}`);
    assert.deepEqual(await sandbox.admin.counters(), {
      "get persistentvolumes": 1,
      "patch volumeattachments": 1,
      "update volumeattachments/status": 1,
    });

    // Once a PV event past the VA's revision has reached the copy, the copy stands in.
    const third = await createAttachment("va-e3", "pv-e");
    await volume("pv-other");
    assert.ok(pvCopy.store.covers(third.metadata.resourceVersion));
    await sandbox.admin.resetCounters();
    const [copied] = await attacher.handleEvent(vaEvent("va-e3", third));
    assert.equal(copied?.outcome, `attached to node ${node}`);
    assert.deepEqual(await sandbox.admin.counters(), {
      "patch volumeattachments": 1,
      "update volumeattachments/status": 1,
    });
  });

  it("a PV the copy lacks is read live, and its finalizer PATCHed on what was read", async () => {
    // The copy stops following the API: it is synced, but will never hold pv-f.
    await pvCopy.stop();
    await volume("pv-f", ["ReadWriteOnce"], false);
    const created = await createAttachment("va-f", "pv-f");
    await sandbox.admin.resetCounters();
    const [attached] = await attacher.handleEvent(vaEvent("va-f", created));
    assert.equal(attached?.outcome, `attached to node ${node}`);
    assert.deepEqual(await sandbox.admin.counters(), {
      "get persistentvolumes": 1,
      "patch persistentvolumes": 1,
      "patch volumeattachments": 1,
      "update volumeattachments/status": 1,
    });
  });

  it("a copy that would refuse the attach (locked to another node) is read again live: a lagging copy records no failure", async () => {
    await volume("pv-g");
    await kube.patch(
      persistentVolumes,
      "pv-g",
      undefined,
      { metadata: { annotations: { [annAttachLock]: "other-node" } } },
      "merge",
    );
    await until(
      "the copy to show the lock",
      () => pvCopy.store.get("", "pv-g")?.metadata.annotations?.[annAttachLock] === "other-node",
    );
    // The copy falls behind; the lock moves to this VA's node.
    await pvCopy.stop();
    await kube.patch(
      persistentVolumes,
      "pv-g",
      undefined,
      { metadata: { annotations: { [annAttachLock]: node } } },
      "merge",
    );
    const created = await createAttachment("va-g", "pv-g");
    await sandbox.admin.resetCounters();
    const [attached] = await attacher.handleEvent(vaEvent("va-g", created));
    assert.equal(attached?.outcome, `attached to node ${node}`);
    assert.equal((await sandbox.admin.counters())["get persistentvolumes"], 1);
  });
});

describe("which event copies may decide (pure)", () => {
  const handler = chooseHandler(
    capabilitiesFrom(
      [{ service: { type: "CONTROLLER_SERVICE" } }],
      [{ rpc: { type: "PUBLISH_UNPUBLISH_VOLUME" } }],
    ),
    { driverName },
  );
  const now = new Date("2026-01-01T00:00:00Z");
  const va = (metadata: Record<string, unknown> = {}, status?: Record<string, unknown>) => ({
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name: "va-1", uid: "u-1", resourceVersion: "7", ...metadata },
    spec: { attacher: driverName, nodeName: node, source: { persistentVolumeName: "pv-1" } },
    ...(status ? { status } : {}),
  });

  it("only a well-formed copy of that very VA, sourced from a PV, is taken", () => {
    assert.ok(attachmentFromEvent("va-1", va()));
    const rows: [string, unknown][] = [
      ["another name", va({ name: "va-2" })],
      ["no resourceVersion", va({ resourceVersion: "" })],
      ["no uid", va({ uid: undefined })],
      ["finalizers not strings", va({ finalizers: [1] })],
      ["annotations not strings", va({ annotations: { a: 1 } })],
      ["attached not a boolean", va({}, { attached: "yes" })],
      [
        "inline spec",
        { ...va(), spec: { attacher: driverName, nodeName: node, source: { inlineVolumeSpec: {} } } },
      ],
      ["not an object", "va-1"],
    ];
    for (const [why, object] of rows) assert.equal(attachmentFromEvent("va-1", object), undefined, why);
  });

  it("a copy decides nothing that could publish or unpublish without a conditional write first", () => {
    const decide = (o: unknown) =>
      copyMayDecide(handler, attachmentFromEvent("va-1", o) as VolumeAttachment, { now, force: false });
    assert.equal(decide(va()), true, "attach: the finalizer PATCH on the copy comes first");
    assert.equal(decide(va({}, { attached: true })), true, "already attached: nothing to do");
    assert.equal(decide(va({ finalizers: [finalizer] })), false, "attach with our finalizer: publish next");
    const deleting = { finalizers: [finalizer], deletionTimestamp: "2026-01-01T00:00:00Z" };
    assert.equal(decide(va(deleting, { attached: true })), false, "detach");
    assert.equal(
      decide(va({ deletionTimestamp: "2026-01-01T00:00:00Z" }, { attached: true })),
      false,
      "mark detached: re-reads and writes without deciding again",
    );
  });
});
