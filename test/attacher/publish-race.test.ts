// A publish that lands after the attachment was released must be taken back:
// instance A waits inside a slow ControllerPublishVolume while the VA is
// deleted and instance B detaches it (its unpublish finds nothing yet) and
// drops the finalizer, so the VA is gone. Found by the chaos run.
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import { AttacherController } from "../../shared/attacher/runtime/attacher-controller.ts";
import { CsiClient } from "../../shared/csi/client.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { persistentVolumes, volumeAttachments } from "../../shared/kube/resources.ts";
import type { VolumeAttachment } from "../../shared/kube/types.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";

const driverName = "hostpath.csi.k8s.io";
let sandbox: TestSandbox;
let kube: KubeJsonClient;
let csi: CsiClient;

before(async () => {
  sandbox = await startTestSandbox();
  kube = new KubeJsonClient(sandbox.kubeConfig);
  csi = await CsiClient.connect({ endpoint: sandbox.csiEndpoint, timeoutMs: 10_000 });
});

after(async () => {
  csi.close();
  await kube.close();
  await sandbox.close();
});

it("publish lands after another instance detached and released the VA: unpublished again, nothing left published", async () => {
  const a = new AttacherController({ kube, csi, driverName });
  const b = new AttacherController({ kube, csi, driverName });
  const created = await csi.createVolume({
    name: "race",
    capacityRange: { requiredBytes: 1n << 30n },
    volumeCapabilities: [{ mount: { fsType: "ext4" }, accessMode: { mode: "SINGLE_NODE_WRITER" } }],
  });
  const handle = created.volume?.volumeId ?? "";
  await kube.create(persistentVolumes, {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name: "pv-race" },
    spec: {
      capacity: { storage: "1Gi" },
      accessModes: ["ReadWriteOnce"],
      persistentVolumeReclaimPolicy: "Retain",
      csi: { driver: driverName, volumeHandle: handle },
    },
  });
  await kube.create(volumeAttachments, {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name: "va-race" },
    spec: { attacher: driverName, nodeName: "sandbox-node", source: { persistentVolumeName: "pv-race" } },
  });
  await sandbox.csi.setFaults({ latencyMs: 1500, methods: ["ControllerPublishVolume"] });
  await sandbox.csi.resetStats();
  const attaching = a.syncAttachment("va-race");
  const deadline = Date.now() + 20_000;
  while (!((await sandbox.csi.stats()).calls.ControllerPublishVolume ?? 0)) {
    assert.ok(Date.now() < deadline, "A never called ControllerPublishVolume");
    await new Promise((r) => setTimeout(r, 10));
  }
  // A is inside the slow publish, the VA holds its finalizer. The pod goes; B detaches.
  await kube.delete(volumeAttachments, "va-race");
  const detached = await b.syncAttachment("va-race");
  assert.match(detached.outcome, /detached from node/);
  await assert.rejects(kube.get(volumeAttachments, "va-race"), { code: 404 });

  const report = await attaching;
  await sandbox.csi.clearFaults();
  assert.match(report.outcome, /after the attachment was released; unpublished again/);
  const volume = (await sandbox.csi.volumes()).find((v) => v.volumeId === handle);
  assert.ok(volume, "the backing volume exists");
  assert.deepEqual(volume.publishedNodes, [], "the volume is still published with no VolumeAttachment");
});

it("the released VA was created again and attached meanwhile: the late publish's unpublish is followed by a publish for the new VA", async () => {
  const a = new AttacherController({ kube, csi, driverName });
  const b = new AttacherController({ kube, csi, driverName });
  const created = await csi.createVolume({
    name: "race-2",
    capacityRange: { requiredBytes: 1n << 30n },
    volumeCapabilities: [{ mount: { fsType: "ext4" }, accessMode: { mode: "SINGLE_NODE_WRITER" } }],
  });
  const handle = created.volume?.volumeId ?? "";
  await kube.create(persistentVolumes, {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name: "pv-race-2" },
    spec: {
      capacity: { storage: "1Gi" },
      accessModes: ["ReadWriteOnce"],
      persistentVolumeReclaimPolicy: "Retain",
      csi: { driver: driverName, volumeHandle: handle },
    },
  });
  const attachment = {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name: "va-race-2" },
    spec: { attacher: driverName, nodeName: "sandbox-node", source: { persistentVolumeName: "pv-race-2" } },
  };
  await kube.create(volumeAttachments, attachment);
  await sandbox.csi.setFaults({ latencyMs: 1500, methods: ["ControllerPublishVolume"] });
  await sandbox.csi.resetStats();
  const attaching = a.syncAttachment("va-race-2");
  const deadline = Date.now() + 20_000;
  while (!((await sandbox.csi.stats()).calls.ControllerPublishVolume ?? 0)) {
    assert.ok(Date.now() < deadline, "A never called ControllerPublishVolume");
    await new Promise((r) => setTimeout(r, 10));
  }
  await kube.delete(volumeAttachments, "va-race-2");
  assert.match((await b.syncAttachment("va-race-2")).outcome, /detached from node/);
  // A new pod on the same node: the same VA name again, attached by B at once (fast driver now).
  await kube.create(volumeAttachments, attachment);
  await sandbox.csi.clearFaults();
  assert.match((await b.syncAttachment("va-race-2")).outcome, /attached to node/);

  const report = await attaching;
  assert.match(report.outcome, /unpublished again; the new attachment: attached to node/);
  const va = await kube.get<VolumeAttachment>(volumeAttachments, "va-race-2");
  assert.equal(va.status?.attached, true);
  const volume = (await sandbox.csi.volumes()).find((v) => v.volumeId === handle);
  assert.deepEqual(
    volume?.publishedNodes,
    ["sandbox-node"],
    "the new VA says attached: the volume must be published",
  );
});
