// The provisioner's watched copy of the VolumeAttachments, over the sandbox:
// a Released PV's deletion reads the copy (no list of every VolumeAttachment)
// once the copy has reached the PV's revision, a VA in the copy blocks it
// with upstream's message, and a VA the copy has not seen (a copy behind the
// PV's revision, or not synced) is still found by a live list. Deletions that
// find the copy behind share one list instead of listing each.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { CsiClient } from "../../shared/csi/client.ts";
import { EventRecorder } from "../../shared/kube/event-recorder.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { ObjectStore } from "../../shared/kube/object-store.ts";
import { persistentVolumes } from "../../shared/kube/resources.ts";
import type { PersistentVolume, VolumeAttachment } from "../../shared/kube/types.ts";
import { annDynamicallyProvisioned, pvDeletionProtectionFinalizer } from "../../shared/kube/well-known.ts";
import { createLogger } from "../../shared/log.ts";
import { defaultProvisionerOptions } from "../../shared/provisioner/options.ts";
import {
  type AttachmentCopy,
  attachmentCopyFromEnv,
  attachmentCopyOf,
  attachmentSourceOnly,
  lazyAttachmentCopy,
} from "../../shared/provisioner/runtime/attachment-copy.ts";
import { ProvisionerController } from "../../shared/provisioner/runtime/provisioner-controller.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";
import { driverName } from "../helpers/storage-system.ts";

const releasedVolume = (name: string): PersistentVolume => ({
  apiVersion: "v1",
  kind: "PersistentVolume",
  metadata: {
    name,
    annotations: { [annDynamicallyProvisioned]: driverName },
    finalizers: [pvDeletionProtectionFinalizer],
  },
  spec: {
    capacity: { storage: "1Gi" },
    accessModes: ["ReadWriteOnce"],
    persistentVolumeReclaimPolicy: "Delete",
    csi: { driver: driverName, volumeHandle: `handle-${name}` },
    claimRef: { namespace: "default", name: `claim-${name}`, uid: `gone-${name}` },
  },
  status: { phase: "Released" },
});

const attachment = (pv: string, node: string): VolumeAttachment => ({
  apiVersion: "storage.k8s.io/v1",
  kind: "VolumeAttachment",
  metadata: { name: `va-${pv}` },
  spec: { attacher: driverName, nodeName: node, source: { persistentVolumeName: pv } },
});

describe("what the copy keeps of a VolumeAttachment", () => {
  it("identity, revision, attacher, node and the PV; not an inline spec or the status", () => {
    const va: VolumeAttachment = {
      apiVersion: "storage.k8s.io/v1",
      kind: "VolumeAttachment",
      metadata: { name: "va", uid: "u", resourceVersion: "9", annotations: { a: "b" } },
      spec: { attacher: driverName, nodeName: "n1", source: { persistentVolumeName: "pv" } },
      status: { attached: true, attachmentMetadata: { devicePath: "/dev/x" } },
    };
    assert.deepEqual(attachmentSourceOnly(va), {
      apiVersion: "storage.k8s.io/v1",
      kind: "VolumeAttachment",
      metadata: { name: "va", uid: "u", resourceVersion: "9" },
      spec: { attacher: driverName, nodeName: "n1", source: { persistentVolumeName: "pv" } },
    });
    const inline = { ...va, spec: { ...va.spec, source: { inlineVolumeSpec: { csi: {} } } } };
    assert.deepEqual(attachmentSourceOnly(inline).spec.source, {});
  });

  it("PROVISIONER_ATTACHMENT_CACHE=false turns it off; on by default", async () => {
    const options = {
      kubeConfig: undefined as never,
      json: undefined as never,
      log: createLogger({ name: "test", level: "silent" }),
    };
    assert.equal(attachmentCopyFromEnv({ PROVISIONER_ATTACHMENT_CACHE: "false" }, options), undefined);
    const copy = attachmentCopyFromEnv({}, options);
    assert.ok(copy, "on by default");
    await copy.stop(); // never started: nothing to stop
  });
});

describe("a deletion's attachment check from the copy, over the sandbox", () => {
  let sandbox: TestSandbox;
  let kube: KubeJsonClient;
  let csi: CsiClient;
  let copy: ReturnType<typeof lazyAttachmentCopy>;

  before(async () => {
    sandbox = await startTestSandbox();
    kube = new KubeJsonClient(sandbox.kubeConfig);
    csi = await CsiClient.connect({ endpoint: sandbox.csiEndpoint, timeoutMs: 2000 });
    assert.ok((await csi.capabilities()).publishUnpublishVolume, "the sandbox driver publishes volumes");
    copy = lazyAttachmentCopy({
      kubeConfig: sandbox.kubeConfig,
      json: kube,
      log: createLogger({ name: "test", level: "silent" }),
    });
  });
  after(async () => {
    await copy.stop();
    csi.close();
    await kube.close();
    await sandbox.close();
  });

  const provisioner = (attachments: (() => AttachmentCopy) | undefined) =>
    new ProvisionerController({
      kube,
      csi,
      events: new EventRecorder(kube, { component: `${driverName}_test`, logger: { warn: () => undefined } }),
      driverName,
      options: defaultProvisionerOptions(driverName),
      ...(attachments ? { attachments } : {}),
    });
  const listsOfAttachments = async (): Promise<number> =>
    (await sandbox.admin.counters())["list volumeattachments"] ?? 0;
  const volumeExists = async (name: string): Promise<boolean> =>
    (await kube.list<PersistentVolume>(persistentVolumes)).items.some((v) => v.metadata.name === name);
  const until = async (what: string, ok: () => boolean | Promise<boolean>): Promise<void> => {
    const deadline = Date.now() + 5000;
    while (!(await ok())) {
      assert.ok(Date.now() < deadline, `timed out waiting until ${what}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  };
  const revisionOf = async (name: string): Promise<string | undefined> =>
    (await kube.get<PersistentVolume>(persistentVolumes, name)).metadata.resourceVersion;

  it("no list of VolumeAttachments once the copy has reached the PV's revision", async () => {
    await sandbox.admin.seed([releasedVolume("first"), releasedVolume("second")]);
    const controller = provisioner(copy.get);
    const before = await listsOfAttachments();
    // First use: the copy starts and is not synced yet, so this one lists.
    await controller.syncVolume("first");
    await until("the copy is synced", () => copy.get().synced);
    assert.equal(await listsOfAttachments(), before + 2, "the copy's first list and the deletion's own");
    const rv = await revisionOf("second");
    assert.ok(copy.get().store.covers(rv), "the copy's list came after the PV was released");

    const listsBefore = await listsOfAttachments();
    const report = await controller.syncVolume("second");
    assert.equal(report.error, undefined, JSON.stringify(report));
    assert.equal(await listsOfAttachments(), listsBefore, "no list of VolumeAttachments");
    assert.equal(await volumeExists("second"), false, "deleted");
    assert.equal(await volumeExists("first"), false, "deleted");
  });

  it("a VA in the copy blocks the deletion with upstream's message, without a list", async () => {
    await sandbox.admin.seed([releasedVolume("attached")]);
    await sandbox.admin.seed([attachment("attached", "node-1")]);
    await until("the copy has the VA", () => copy.get().store.get("", "va-attached") !== undefined);
    const listsBefore = await listsOfAttachments();
    const report = await provisioner(copy.get).syncVolume("attached");
    assert.match(report.error ?? "", /persistentvolume attached is still attached to node node-1/);
    assert.equal(await listsOfAttachments(), listsBefore, "no list of VolumeAttachments");
    assert.equal(await volumeExists("attached"), true, "kept while attached");
  });

  it("a VA the copy has not seen (the copy behind the PV's revision) is found by a live list", async () => {
    // A synced copy stuck at a revision before the VA and the PV: read, it would say "not attached".
    const behind = new ObjectStore<VolumeAttachment>({
      indexBy: (va) => va.spec.source.persistentVolumeName ?? "",
    });
    behind.listed("1");
    const lagging = attachmentCopyOf({ store: behind, synced: true }, kube);
    await sandbox.admin.seed([attachment("unseen", "node-2")]);
    await sandbox.admin.seed([releasedVolume("unseen")]);
    const listsBefore = await listsOfAttachments();
    const report = await provisioner(() => lagging).syncVolume("unseen");
    assert.match(report.error ?? "", /persistentvolume unseen is still attached to node node-2/);
    assert.equal(await listsOfAttachments(), listsBefore + 1, "listed live");
    assert.equal(await volumeExists("unseen"), true, "kept while attached");
    assert.ok(behind.get("", "va-unseen"), "the synced copy learned from the list");
  });

  it("a copy not synced is not read: its empty store does not let an attached volume go", async () => {
    const unsynced = attachmentCopyOf({ store: new ObjectStore<VolumeAttachment>(), synced: false }, kube);
    await sandbox.admin.seed([attachment("early", "node-3"), releasedVolume("early")]);
    const report = await provisioner(() => unsynced).syncVolume("early");
    assert.match(report.error ?? "", /persistentvolume early is still attached to node node-3/);
    assert.equal(unsynced.store.size, 0, "a copy not synced does not fill up from the list");
  });

  it("deletions released after the copy's last change share one list, not one each", async () => {
    await until("the copy is synced", () => copy.get().synced);
    const names = Array.from({ length: 20 }, (_, i) => `burst-${i}`);
    // Released after everything the (quiet) VA watch has seen: the copy cannot know it is current.
    await sandbox.admin.seed([...names.map(releasedVolume), releasedVolume("later")]);
    assert.equal(copy.get().store.covers(await revisionOf("burst-0")), false, "the copy is behind the PVs");
    const controller = provisioner(copy.get);
    const listsBefore = await listsOfAttachments();
    const reports = await Promise.all(names.map((n) => controller.syncVolume(n)));
    assert.deepEqual(
      reports.filter((r) => r.error !== undefined),
      [],
    );
    const lists = (await listsOfAttachments()) - listsBefore;
    assert.ok(lists >= 1 && lists <= 2, `one shared list (at most one more for a late joiner), not ${lists}`);
    for (const n of names) assert.equal(await volumeExists(n), false, `${n} deleted`);
    // The copy took that list as its state: a PV released before it is deleted from the copy.
    const listsAfter = await listsOfAttachments();
    assert.equal((await controller.syncVolume("later")).error, undefined);
    assert.equal(await listsOfAttachments(), listsAfter, "no list: the copy covers the PV");
    assert.equal(await volumeExists("later"), false, "deleted");
  });
});
