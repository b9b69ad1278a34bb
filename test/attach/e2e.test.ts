// Attaching end to end over the sandbox, all four controllers together: a
// pod scheduled with a provisioned claim gets a VolumeAttachment, the CSI
// driver publishes it, it is attached; the pod goes, the volume is
// unpublished and the attachment removed; the PV's attacher finalizer goes
// with the PV; a second node never gets a single-node volume; and a driver
// without PUBLISH_UNPUBLISH_VOLUME takes the trivial path.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { uniqueVolumeName, volumeAttachmentName } from "../../shared/attach-detach/volume-attachment-name.ts";
import {
  events,
  nodes,
  persistentVolumeClaims,
  persistentVolumes,
  pods,
  volumeAttachments,
} from "../../shared/kube/resources.ts";
import type {
  KubeEvent,
  Node,
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
  VolumeAttachment,
} from "../../shared/kube/types.ts";
import { annControllerManagedAttachDetach } from "../../shared/kube/well-known.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";
import { driverName, type StorageSystem, startStorageSystem } from "../helpers/storage-system.ts";

const attacherFinalizer = `external-attacher/${driverName.replace(/[^a-zA-Z0-9-]/g, "-")}`;

function secondNode(): object[] {
  return [
    {
      apiVersion: "v1",
      kind: "Node",
      metadata: {
        name: "node-b",
        labels: { "topology.hostpath.csi/node": "sandbox-node" },
        annotations: { [annControllerManagedAttachDetach]: "true" },
      },
      spec: {},
      status: { conditions: [{ type: "Ready", status: "True" }] },
    },
    {
      apiVersion: "storage.k8s.io/v1",
      kind: "CSINode",
      metadata: { name: "node-b" },
      spec: {
        drivers: [{ name: driverName, nodeID: "node-b", topologyKeys: ["topology.hostpath.csi/node"] }],
      },
    },
  ];
}

const storageClass = {
  apiVersion: "storage.k8s.io/v1",
  kind: "StorageClass",
  metadata: { name: "fast" },
  provisioner: driverName,
  reclaimPolicy: "Delete",
  volumeBindingMode: "Immediate",
};

function claim(name: string): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace: "default" },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: "1Gi" } },
      storageClassName: "fast",
    },
  };
}

function pod(name: string, claimName: string, nodeName: string): Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "default" },
    spec: {
      nodeName,
      containers: [{ name: "app", image: "busybox" }],
      volumes: [{ name: "data", persistentVolumeClaim: { claimName } }],
    },
  };
}

async function bootstrap(sandbox: TestSandbox, system: StorageSystem): Promise<PersistentVolume> {
  await sandbox.admin.seed([storageClass, ...secondNode()]);
  await system.kube.create(persistentVolumeClaims, claim("data"));
  await system.settle();
  const bound = await system.kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "data", "default");
  return system.kube.get<PersistentVolume>(persistentVolumes, bound.spec.volumeName!);
}

describe("attach end to end (CSI handler)", () => {
  let sandbox: TestSandbox;
  let system: StorageSystem;
  before(async () => {
    sandbox = await startTestSandbox();
    system = await startStorageSystem(sandbox);
  });
  after(async () => {
    await system.close();
    await sandbox.close();
  });
  beforeEach(() => sandbox.admin.reset());

  it("pod → VolumeAttachment → ControllerPublish → attached; pod gone → unpublished, attachment gone; PV finalizer goes with the PV", async () => {
    const pv = await bootstrap(sandbox, system);
    await system.kube.create(pods, pod("app", "data", "sandbox-node"));
    await system.settle();

    const vaName = volumeAttachmentName(pv.spec.csi!.volumeHandle, driverName, "sandbox-node");
    const va = await system.kube.get<VolumeAttachment>(volumeAttachments, vaName);
    assert.equal(va.spec.attacher, driverName);
    assert.equal(va.spec.source.persistentVolumeName, pv.metadata.name);
    assert.equal(va.status?.attached, true);
    assert.ok(va.metadata.finalizers?.includes(attacherFinalizer));
    assert.equal(va.metadata.annotations?.["csi.alpha.kubernetes.io/node-id"], "sandbox-node");
    const backing = (await sandbox.csi.volumes()).find((v) => v.volumeId === pv.spec.csi!.volumeHandle);
    assert.deepEqual(backing?.publishedNodes, ["sandbox-node"]);
    const withFinalizer = await system.kube.get<PersistentVolume>(persistentVolumes, pv.metadata.name);
    assert.ok(withFinalizer.metadata.finalizers?.includes(attacherFinalizer));
    const attachedEvents = (await system.kube.list<KubeEvent>(events, { namespace: "default" })).items.filter(
      (e) => e.reason === "SuccessfulAttachVolume",
    );
    assert.equal(attachedEvents.length, 1);
    assert.equal(
      attachedEvents[0]?.message,
      `AttachVolume.Attach succeeded for volume "${pv.metadata.name}"`,
    );
    assert.equal(attachedEvents[0]?.involvedObject.name, "app");
    // The kubelet mounts it only once the node lists it.
    const listed = uniqueVolumeName(driverName, pv.spec.csi!.volumeHandle);
    const attachedOnNode = async () =>
      ((await system.kube.get<Node>(nodes, "sandbox-node")).status?.volumesAttached ?? []).filter(
        (v) => v.name === listed,
      );
    assert.deepEqual(await attachedOnNode(), [{ name: listed, devicePath: "" }]);

    await system.kube.delete(pods, "app", "default");
    await system.settle();
    await assert.rejects(system.kube.get(volumeAttachments, vaName), { code: 404 });
    assert.deepEqual(await attachedOnNode(), []);
    assert.deepEqual(
      (await sandbox.csi.volumes()).find((v) => v.volumeId === pv.spec.csi!.volumeHandle)?.publishedNodes,
      [],
    );
    // Detached, the attacher's PV finalizer stays (as upstream) until the PV is deleted.
    assert.ok(
      (
        await system.kube.get<PersistentVolume>(persistentVolumes, pv.metadata.name)
      ).metadata.finalizers?.includes(attacherFinalizer),
    );

    await system.kube.delete(persistentVolumeClaims, "data", "default");
    await system.settle();
    assert.deepEqual((await system.kube.list(persistentVolumes)).items, []);
    assert.deepEqual(await sandbox.csi.volumes(), []);
  });

  it("a second pod on another node with the same RWO claim gets Multi-Attach and no second attachment", async () => {
    const pv = await bootstrap(sandbox, system);
    await system.kube.create(pods, pod("first", "data", "sandbox-node"));
    await system.settle();
    await system.kube.create(pods, pod("second", "data", "node-b"));
    await system.settle();
    const attachments = (await system.kube.list<VolumeAttachment>(volumeAttachments)).items;
    assert.deepEqual(
      attachments.map((a) => a.spec.nodeName),
      ["sandbox-node"],
    );
    const warnings = (await system.kube.list<KubeEvent>(events, { namespace: "default" })).items.filter(
      (e) => e.reason === "FailedAttachVolume",
    );
    assert.equal(warnings.length, 1);
    assert.equal(warnings[0]?.involvedObject.name, "second");
    assert.equal(warnings[0]?.type, "Warning");
    assert.equal(
      warnings[0]?.message,
      `Multi-Attach error for volume "${pv.metadata.name}" Volume is already used by pod(s) first`,
    );

    // Once the first pod is gone and the volume detached, the second node gets it.
    await system.kube.delete(pods, "first", "default");
    await system.settle();
    const after = (await system.kube.list<VolumeAttachment>(volumeAttachments)).items;
    assert.deepEqual(
      after.map((a) => [a.spec.nodeName, a.status?.attached]),
      [["node-b", true]],
    );
    assert.deepEqual(
      (await sandbox.csi.volumes()).find((v) => v.volumeId === pv.spec.csi!.volumeHandle)?.publishedNodes,
      ["node-b"],
    );
  });

  it("non-graceful node shutdown: a volume the node still reports in use stays attached; the out-of-service taint detaches it at once", async () => {
    const pv = await bootstrap(sandbox, system);
    const handle = pv.spec.csi!.volumeHandle;
    const listed = uniqueVolumeName(driverName, handle);
    await system.kube.create(pods, pod("app", "data", "node-b"));
    await system.settle();
    const vaName = volumeAttachmentName(handle, driverName, "node-b");
    assert.equal((await system.kube.get<VolumeAttachment>(volumeAttachments, vaName)).status?.attached, true);
    // What node-b's kubelet would report while the volume is mounted.
    const n = await system.kube.get<Node>(nodes, "node-b");
    assert.deepEqual(n.status?.volumesAttached, [{ name: listed, devicePath: "" }]);
    await system.kube.replace(
      nodes,
      { ...n, status: { ...n.status, volumesInUse: [listed] } },
      { subresource: "status" },
    );

    // The node shuts down; its pod is force deleted. Healthy as far as the API says: the volume waits.
    await system.kube.delete(pods, "app", "default");
    await system.settle();
    await system.kube.get(volumeAttachments, vaName);
    assert.deepEqual((await sandbox.csi.volumes()).find((v) => v.volumeId === handle)?.publishedNodes, [
      "node-b",
    ]);

    const down = await system.kube.get<Node>(nodes, "node-b");
    await system.kube.replace(nodes, {
      ...down,
      spec: {
        ...down.spec,
        taints: [{ key: "node.kubernetes.io/out-of-service", value: "nodeshutdown", effect: "NoExecute" }],
      },
    });
    await system.settle();
    await assert.rejects(system.kube.get(volumeAttachments, vaName), { code: 404 });
    assert.deepEqual((await sandbox.csi.volumes()).find((v) => v.volumeId === handle)?.publishedNodes, []);
    assert.equal((await system.kube.get<Node>(nodes, "node-b")).status?.volumesAttached, undefined);
  });
});

describe("attach end to end (trivial handler: driver without PUBLISH_UNPUBLISH_VOLUME)", () => {
  let sandbox: TestSandbox;
  let system: StorageSystem;
  before(async () => {
    sandbox = await startTestSandbox({
      csi: { controllerCapabilities: ["CREATE_DELETE_VOLUME", "LIST_VOLUMES", "GET_CAPACITY"] },
    });
    system = await startStorageSystem(sandbox);
  });
  after(async () => {
    await system.close();
    await sandbox.close();
  });

  it("marks the attachment attached without finalizers or publish calls", async () => {
    const pv = await bootstrap(sandbox, system);
    await system.kube.create(pods, pod("app", "data", "sandbox-node"));
    await system.settle();
    const va = await system.kube.get<VolumeAttachment>(
      volumeAttachments,
      volumeAttachmentName(pv.spec.csi!.volumeHandle, driverName, "sandbox-node"),
    );
    assert.equal(va.status?.attached, true);
    assert.deepEqual(va.metadata.finalizers ?? [], []);
    assert.deepEqual((await sandbox.csi.volumes())[0]?.publishedNodes, []);
    assert.equal((await sandbox.csi.stats()).calls?.ControllerPublishVolume ?? 0, 0);
  });
});
