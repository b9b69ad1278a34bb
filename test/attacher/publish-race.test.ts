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

/** A Retain PV on a real driver volume and its VA to sandbox-node; returns the volume handle. */
async function volumeWithAttachment(name: string): Promise<{ handle: string; attachment: VolumeAttachment }> {
  const created = await csi.createVolume({
    name,
    capacityRange: { requiredBytes: 1n << 30n },
    volumeCapabilities: [{ mount: { fsType: "ext4" }, accessMode: { mode: "SINGLE_NODE_WRITER" } }],
  });
  const handle = created.volume?.volumeId ?? "";
  await kube.create(persistentVolumes, {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name: `pv-${name}` },
    spec: {
      capacity: { storage: "1Gi" },
      accessModes: ["ReadWriteOnce"],
      persistentVolumeReclaimPolicy: "Retain",
      csi: { driver: driverName, volumeHandle: handle },
    },
  });
  const attachment: VolumeAttachment = {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name: `va-${name}` },
    spec: { attacher: driverName, nodeName: "sandbox-node", source: { persistentVolumeName: `pv-${name}` } },
  };
  await kube.create(volumeAttachments, attachment);
  return { handle, attachment };
}

/** Slows ControllerPublishVolume down and starts `sync`; resolves once the driver has the call. */
async function startSlowPublish<T>(sync: () => Promise<T>): Promise<{ result: Promise<T> }> {
  await sandbox.csi.setFaults({ latencyMs: 1500, methods: ["ControllerPublishVolume"] });
  await sandbox.csi.resetStats();
  const result = sync();
  const deadline = Date.now() + 20_000;
  while (!((await sandbox.csi.stats()).calls.ControllerPublishVolume ?? 0)) {
    assert.ok(Date.now() < deadline, "the attacher never called ControllerPublishVolume");
    await new Promise((r) => setTimeout(r, 10));
  }
  return { result };
}

it("publish lands after another instance detached and released the VA: unpublished again, nothing left published", async () => {
  const a = new AttacherController({ kube, csi, driverName });
  const b = new AttacherController({ kube, csi, driverName });
  const { handle } = await volumeWithAttachment("race");
  const { result: attaching } = await startSlowPublish(() => a.syncAttachment("va-race"));
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
  const { handle, attachment } = await volumeWithAttachment("race-2");
  const { result: attaching } = await startSlowPublish(() => a.syncAttachment("va-race-2"));
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
