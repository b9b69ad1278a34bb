// The sandbox kubelet against the real sandbox (API server over HTTP, CSI
// node plugins over gRPC): a pod of an attach-required volume stays Pending
// in ContainerCreating until node status lists the volume as attached (the
// test plays the attacher and the attach/detach controller), then is staged,
// published and Running; deleting it gracefully unpublishes, unstages,
// drops it from volumesInUse and removes the pod.
import assert from "node:assert/strict";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { KubeConfig } from "@kubernetes/client-node";
import { type KubeletStep, type Sandbox, startSandbox } from "../../sandbox/start.ts";
import { uniqueVolumeName, volumeAttachmentName } from "../../shared/attach-detach/volume-attachment-name.ts";
import { isNotFound } from "../../shared/kube/api-errors.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import {
  csiDrivers,
  events,
  nodes,
  persistentVolumeClaims,
  persistentVolumes,
  pods,
  volumeAttachments,
} from "../../shared/kube/resources.ts";
import type {
  KubeEvent,
  KubeObject,
  Node,
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
} from "../../shared/kube/types.ts";
import { mountCap, type RawCsiClient, rawCsiClient } from "../helpers/csi-driver-client.ts";
import { eventually } from "../helpers/eventually.ts";

const driver = "hostpath.csi.k8s.io";
const node = "sandbox-node-2";

let dir: string;
let sandbox: Sandbox;
let kube: KubeJsonClient;
let csi: RawCsiClient;
const steps: KubeletStep[] = [];

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "ksf-kubelet-"));
  sandbox = await startSandbox({ dir, onKubeletStep: (s) => steps.push(s) });
  const kc = new KubeConfig();
  kc.loadFromFile(sandbox.kubeconfigPath);
  kube = new KubeJsonClient(kc);
  csi = rawCsiClient(sandbox.csi.endpoint);
});
after(async () => {
  csi.close();
  await kube.close();
  await sandbox.close();
  await rm(dir, { recursive: true, force: true });
});

async function getPod(name: string): Promise<Pod | undefined> {
  try {
    return await kube.get<Pod>(pods, name, "default");
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

/** A volume in the driver and a claim bound to its PV, both ways, as the provisioner and binder leave them. */
async function boundClaim(name: string): Promise<{ handle: string; pv: string }> {
  const created = await csi.call<{ volume: { volume_id: string } }>("Controller", "CreateVolume", {
    name: `vol-${name}`,
    volume_capabilities: [mountCap()],
  });
  const handle = created.volume.volume_id;
  const pvName = `pv-${name}`;
  const claim = await kube.create<PersistentVolumeClaim>(persistentVolumeClaims, {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace: "default" },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: "1Gi" } },
      volumeName: pvName,
      storageClassName: "",
    },
  });
  const pv = await kube.create<PersistentVolume>(persistentVolumes, {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name: pvName },
    spec: {
      accessModes: ["ReadWriteOnce"],
      capacity: { storage: "1Gi" },
      csi: { driver, volumeHandle: handle, fsType: "ext4", volumeAttributes: { from: "test" } },
      claimRef: { kind: "PersistentVolumeClaim", namespace: "default", name, uid: claim.metadata.uid },
      persistentVolumeReclaimPolicy: "Retain",
      storageClassName: "",
    },
  });
  await kube.replace(persistentVolumes, { ...pv, status: { phase: "Bound" } }, { subresource: "status" });
  await kube.replace(
    persistentVolumeClaims,
    { ...claim, status: { phase: "Bound", accessModes: ["ReadWriteOnce"], capacity: { storage: "1Gi" } } },
    { subresource: "status" },
  );
  return { handle, pv: pvName };
}

async function createPod(name: string, claim: string, nodeName = node): Promise<Pod> {
  return kube.create<Pod>(pods, {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "default" },
    spec: {
      nodeName,
      containers: [{ name: "app", image: "busybox" }],
      volumes: [{ name: "data", persistentVolumeClaim: { claimName: claim } }],
    },
  });
}

/** What the attacher and the attach/detach controller would do for the volume on the node. */
/** The driver does every `method` call's work, then answers `code`: the answer is lost. */
function loseAnswers(method: string, code: "DEADLINE_EXCEEDED" | "UNAVAILABLE"): void {
  sandbox.csi.driver.setFaults({
    methods: [method],
    errorProbability: 1,
    errorCodes: [code],
    afterProbability: 1,
  });
}

/** Waits for an Event about `pod` whose message matches. */
async function podEvent(what: string, pod: string, message: RegExp): Promise<KubeEvent> {
  return eventually(what, async () => {
    const list = await kube.list<KubeEvent>(events, { namespace: "default" });
    return list.items.find((e) => e.involvedObject.name === pod && message.test(e.message ?? ""));
  });
}

async function attach(handle: string, pv: string, on = node): Promise<void> {
  await csi.call("Controller", "ControllerPublishVolume", {
    volume_id: handle,
    node_id: on,
    volume_capability: mountCap(),
  });
  const va = await kube.create<KubeObject>(volumeAttachments, {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name: volumeAttachmentName(handle, driver, on) },
    spec: { attacher: driver, nodeName: on, source: { persistentVolumeName: pv } },
  });
  await kube.replace(
    volumeAttachments,
    { ...va, status: { attached: true, attachmentMetadata: { devicePath: "/dev/sandbox" } } },
    { subresource: "status" },
  );
  await kube.patch(
    nodes,
    on,
    undefined,
    { status: { volumesAttached: [{ name: uniqueVolumeName(driver, handle), devicePath: "" }] } },
    "merge",
    { subresource: "status" },
  );
}

const waitingReason = (pod: Pod | undefined) =>
  (pod?.status?.containerStatuses as { state: { waiting?: { reason: string } } }[] | undefined)?.[0]?.state
    .waiting?.reason;

const backing = (handle: string) =>
  sandbox.csi.driver.listBackingVolumes().find((v) => v.volumeId === handle)!;

describe("sandbox kubelet", () => {
  it("mounts an attach-required volume only once node status lists it, runs the pod, and tears it down on deletion", async () => {
    const { handle, pv } = await boundClaim("data-1");
    const unique = uniqueVolumeName(driver, handle);
    const created = await createPod("app-1", "data-1");
    const uid = created.metadata.uid!;

    const inUse = await eventually("volumesInUse", async () => {
      const n = await kube.get<Node>(nodes, node);
      return n.status?.volumesInUse?.includes(unique) ? n.status.volumesInUse : undefined;
    });
    assert.deepEqual(inUse, [unique]);
    await eventually("ContainerCreating", async () =>
      waitingReason(await getPod("app-1")) === "ContainerCreating" ? true : undefined,
    );
    // Nothing is mounted while node status does not list the volume.
    await sleep(800);
    const pending = await getPod("app-1");
    assert.equal(pending?.status?.phase, "Pending");
    assert.equal(waitingReason(pending), "ContainerCreating");
    assert.deepEqual(backing(handle).staged, []);

    await attach(handle, pv);
    const running = await eventually("Running", async () => {
      const p = await getPod("app-1");
      return p?.status?.phase === "Running" ? p : undefined;
    });
    const conditions = ((running.status?.conditions ?? []) as { type: string; status: string }[]).map((c) => [
      c.type,
      c.status,
    ]);
    for (const type of ["PodScheduled", "Initialized", "ContainersReady", "Ready"]) {
      assert.ok(
        conditions.some(([t, s]) => t === type && s === "True"),
        `${type} True in ${JSON.stringify(conditions)}`,
      );
    }
    assert.match(String(running.status?.podIP), /^10\.244\.2\.\d+$/);
    assert.equal(running.status?.hostIP, "10.0.0.3");
    const volume = backing(handle);
    const root = join(dir, "kubelet", node);
    assert.equal(volume.staged.length, 1);
    assert.equal(volume.staged[0]!.node, node);
    assert.match(
      volume.staged[0]!.path,
      new RegExp(`^${root}/plugins/kubernetes.io/csi/${driver}/[0-9a-f]{64}/globalmount$`),
    );
    assert.deepEqual(
      volume.nodePublished.map((p) => [p.node, p.targetPath, p.stagingPath]),
      [[node, join(root, "pods", uid, "volumes/kubernetes.io~csi", pv, "mount"), volume.staged[0]!.path]],
    );
    assert.ok((await stat(volume.nodePublished[0]!.targetPath)).isDirectory());

    steps.length = 0;
    const marked = await kube.delete(pods, "app-1", "default");
    assert.ok(marked?.metadata.deletionTimestamp, "a graceful delete leaves the pod for its kubelet");
    await eventually("pod gone", async () => ((await getPod("app-1")) === undefined ? true : undefined));
    assert.deepEqual(backing(handle).staged, []);
    assert.deepEqual(backing(handle).nodePublished, []);
    const after = await kube.get<Node>(nodes, node);
    assert.equal(after.status?.volumesInUse, undefined);
    assert.deepEqual(
      steps.map((s) => s.step),
      ["unpublished", "unstaged", "volumes-in-use", "pod-deleted"],
    );
  });

  it("keeps a volume staged while another pod on the node still uses it", async () => {
    const { handle, pv } = await boundClaim("shared");
    await attach(handle, pv, "sandbox-node");
    const running = async (name: string) =>
      eventually(`${name} Running`, async () =>
        (await getPod(name))?.status?.phase === "Running" ? true : undefined,
      );
    await createPod("first", "shared", "sandbox-node");
    await createPod("second", "shared", "sandbox-node");
    await running("first");
    await running("second");
    assert.equal(backing(handle).staged.length, 1, "one staging for both pods");
    assert.equal(backing(handle).nodePublished.length, 2, "one publication per pod");

    await kube.delete(pods, "first", "default");
    await eventually("first gone", async () => ((await getPod("first")) === undefined ? true : undefined));
    assert.equal(backing(handle).nodePublished.length, 1);
    assert.equal(backing(handle).staged.length, 1, "still staged for the second pod");
    assert.deepEqual((await kube.get<Node>(nodes, "sandbox-node")).status?.volumesInUse, [
      uniqueVolumeName(driver, handle),
    ]);

    await kube.delete(pods, "second", "default");
    await eventually("second gone", async () => ((await getPod("second")) === undefined ? true : undefined));
    assert.deepEqual(backing(handle).staged, []);
    assert.deepEqual(backing(handle).nodePublished, []);
    assert.equal((await kube.get<Node>(nodes, "sandbox-node")).status?.volumesInUse, undefined);
  });

  it("skips the attach wait for a driver whose CSIDriver says attachRequired: false", async () => {
    // attachRequired is immutable, as upstream's: the CSIDriver is created anew, then restored.
    type Driver = KubeObject & { spec: Record<string, unknown> };
    const csiDriver = await kube.get<Driver>(csiDrivers, driver);
    const recreate = async (attachRequired: boolean): Promise<void> => {
      await kube.delete(csiDrivers, driver);
      await kube.create<Driver>(csiDrivers, {
        apiVersion: csiDriver.apiVersion,
        kind: csiDriver.kind,
        metadata: { name: driver, labels: csiDriver.metadata.labels },
        spec: { ...csiDriver.spec, attachRequired },
      });
    };
    await recreate(false);
    try {
      const { handle } = await boundClaim("data-2");
      // The sandbox driver still wants its ControllerPublish before a node stage.
      await csi.call("Controller", "ControllerPublishVolume", {
        volume_id: handle,
        node_id: "sandbox-node",
        volume_capability: mountCap(),
      });
      await createPod("app-2", "data-2", "sandbox-node");
      await eventually("Running", async () =>
        (await getPod("app-2"))?.status?.phase === "Running" ? true : undefined,
      );
      const n = await kube.get<Node>(nodes, "sandbox-node");
      assert.equal(n.status?.volumesInUse, undefined, "a volume that needs no attach is not reported in use");
      assert.equal(backing(handle).nodePublished.length, 1);
      await kube.delete(pods, "app-2", "default");
      await eventually("pod gone", async () => ((await getPod("app-2")) === undefined ? true : undefined));
      assert.deepEqual(backing(handle).staged, []);
    } finally {
      await recreate(true);
    }
  });

  it("records FailedMount when NodeStageVolume fails, retries with backoff, and runs the pod once it works", async () => {
    const { handle, pv } = await boundClaim("data-4");
    sandbox.csi.driver.setFaults({
      methods: ["NodeStageVolume"],
      errorProbability: 1,
      errorCodes: ["INTERNAL"],
    });
    try {
      await createPod("app-4", "data-4");
      await attach(handle, pv);
      const failed = await eventually("FailedMount", async () => {
        const list = await kube.list<KubeEvent>(events, { namespace: "default" });
        return list.items.find((e) => e.reason === "FailedMount" && e.involvedObject.name === "app-4");
      });
      assert.equal(failed.type, "Warning");
      assert.match(
        failed.message ?? "",
        new RegExp(
          `^MountVolume\\.MountDevice failed for volume "${pv}" : .*NodeStageVolume: injected fault INTERNAL`,
        ),
      );
      assert.equal((await getPod("app-4"))?.status?.phase, "Pending");
    } finally {
      sandbox.csi.driver.clearFaults();
    }
    await eventually("Running", async () =>
      (await getPod("app-4"))?.status?.phase === "Running" ? true : undefined,
    );
    await kube.delete(pods, "app-4", "default");
    await eventually("pod gone", async () => ((await getPod("app-4")) === undefined ? true : undefined));
  });

  it("tears down a publish whose answer was lost (DEADLINE_EXCEEDED after the work) when the pod goes before a retry", async () => {
    // Found by the chaos run (issue 18): upstream marks such a mount uncertain and unmounts it on teardown.
    const { handle, pv } = await boundClaim("data-6");
    loseAnswers("NodePublishVolume", "DEADLINE_EXCEEDED");
    try {
      await createPod("app-6", "data-6");
      await attach(handle, pv);
      await eventually("published on the driver despite the error", async () =>
        backing(handle).nodePublished.length > 0 ? true : undefined,
      );
      assert.equal((await getPod("app-6"))?.status?.phase, "Pending");
      await kube.delete(pods, "app-6", "default");
      await eventually("pod gone", async () => ((await getPod("app-6")) === undefined ? true : undefined));
    } finally {
      sandbox.csi.driver.clearFaults();
    }
    assert.deepEqual(backing(handle).nodePublished, []);
    assert.deepEqual(backing(handle).staged, []);
  });

  it("unstages a stage whose answer was lost (DEADLINE_EXCEEDED after the work) when the pod goes, and keeps the volume in use until then", async () => {
    // Upstream's uncertain device mount: the kubelet cannot tell whether the volume is staged, so it unstages it.
    const { handle, pv } = await boundClaim("data-8");
    loseAnswers("NodeStageVolume", "DEADLINE_EXCEEDED");
    try {
      await createPod("app-8", "data-8");
      await attach(handle, pv);
      await eventually("staged on the driver despite the error", async () =>
        backing(handle).staged.length > 0 ? true : undefined,
      );
      assert.equal((await getPod("app-8"))?.status?.phase, "Pending");
      const status = (await kube.get<Node>(nodes, node)).status;
      assert.ok(
        (status?.volumesInUse ?? []).some((v) => v.endsWith(handle)),
        "an uncertain stage keeps the volume in use: no detach under it",
      );
      await kube.delete(pods, "app-8", "default");
      await eventually("pod gone", async () => ((await getPod("app-8")) === undefined ? true : undefined));
    } finally {
      sandbox.csi.driver.clearFaults();
    }
    assert.deepEqual(backing(handle).staged, []);
  });

  it("forgets an uncertain stage once the driver answers a final error, and does not unstage it when the pod goes", async () => {
    // Upstream's markDeviceErrorState: a final error says nothing is staged, so the device is marked unmounted.
    const { handle, pv } = await boundClaim("data-9");
    loseAnswers("NodeStageVolume", "DEADLINE_EXCEEDED");
    try {
      await createPod("app-9", "data-9");
      await attach(handle, pv);
      await eventually("staged on the driver despite the error", async () =>
        backing(handle).staged.length > 0 ? true : undefined,
      );
      sandbox.csi.driver.setFaults({
        methods: ["NodeStageVolume"],
        errorProbability: 1,
        errorCodes: ["INTERNAL"],
      });
      await podEvent("a final NodeStageVolume error", "app-9", /injected fault INTERNAL/);
      await kube.delete(pods, "app-9", "default");
      await eventually("pod gone", async () => ((await getPod("app-9")) === undefined ? true : undefined));
    } finally {
      sandbox.csi.driver.clearFaults();
    }
    const status = (await kube.get<Node>(nodes, node)).status;
    assert.ok(!(status?.volumesInUse ?? []).some((v) => v.endsWith(handle)), "out of volumesInUse");
    assert.ok(
      !steps.some((s) => s.step === "unstaged" && s.volume.endsWith(handle)),
      "no NodeUnstageVolume for a stage the driver said it did not make",
    );
    assert.equal(backing(handle).staged.length, 1, "the lost first answer's stage is still on the driver");
  });

  it("forgets an uncertain publish once the driver answers a final error, and does not unpublish it when the pod goes", async () => {
    // Upstream's markVolumeErrorState. The timeout comes before the driver did anything, as a driver
    // that then answers a final error has nothing published.
    const { handle, pv } = await boundClaim("data-10");
    sandbox.csi.driver.setFaults({
      methods: ["NodePublishVolume"],
      errorProbability: 1,
      errorCodes: ["DEADLINE_EXCEEDED"],
      afterProbability: 0,
    });
    try {
      await createPod("app-10", "data-10");
      await attach(handle, pv);
      await podEvent("an uncertain NodePublishVolume", "app-10", /DEADLINE_EXCEEDED|DeadlineExceeded/);
      sandbox.csi.driver.setFaults({
        methods: ["NodePublishVolume"],
        errorProbability: 1,
        errorCodes: ["INTERNAL"],
      });
      await podEvent("a final NodePublishVolume error", "app-10", /injected fault INTERNAL/);
      await kube.delete(pods, "app-10", "default");
      await eventually("pod gone", async () => ((await getPod("app-10")) === undefined ? true : undefined));
    } finally {
      sandbox.csi.driver.clearFaults();
    }
    assert.ok(
      !steps.some((s) => s.step === "unpublished" && s.volume.endsWith(handle)),
      "no NodeUnpublishVolume for a publish the driver said it did not make",
    );
    assert.deepEqual(backing(handle).nodePublished, []);
    assert.deepEqual(backing(handle).staged, [], "the stage, which was certain, is torn down");
  });

  it("publishes again a mount left uncertain by a lost answer, and runs the pod", async () => {
    const { handle, pv } = await boundClaim("data-7");
    loseAnswers("NodePublishVolume", "UNAVAILABLE");
    try {
      await createPod("app-7", "data-7");
      await attach(handle, pv);
      await eventually("published on the driver despite the error", async () =>
        backing(handle).nodePublished.length > 0 ? true : undefined,
      );
      assert.equal((await getPod("app-7"))?.status?.phase, "Pending");
    } finally {
      sandbox.csi.driver.clearFaults();
    }
    await eventually("Running", async () =>
      (await getPod("app-7"))?.status?.phase === "Running" ? true : undefined,
    );
    await kube.delete(pods, "app-7", "default");
    await eventually("pod gone", async () => ((await getPod("app-7")) === undefined ? true : undefined));
    assert.deepEqual(backing(handle).nodePublished, []);
  });

  it("does nothing while its node is not Ready (a node that is down), and carries on once it is", async () => {
    const setReady = async (status: string) => {
      const n = await kube.get<Node>(nodes, "sandbox-node");
      const conditions = (n.status?.conditions ?? []).map((c) => (c.type === "Ready" ? { ...c, status } : c));
      await kube.replace(nodes, { ...n, status: { ...n.status, conditions } }, { subresource: "status" });
    };
    await setReady("False");
    try {
      await kube.create<Pod>(pods, {
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: "app-5", namespace: "default" },
        spec: { nodeName: "sandbox-node", containers: [{ name: "app", image: "busybox" }] },
      });
      await sleep(800);
      assert.equal(
        (await getPod("app-5"))?.status?.containerStatuses,
        undefined,
        "no kubelet wrote a status",
      );
    } finally {
      await setReady("True");
    }
    await eventually("Running", async () =>
      (await getPod("app-5"))?.status?.phase === "Running" ? true : undefined,
    );
    await kube.delete(pods, "app-5", "default");
    await eventually("pod gone", async () => ((await getPod("app-5")) === undefined ? true : undefined));
  });

  it("keeps a pod whose claim is not bound in ContainerCreating, with nothing in use", async () => {
    await kube.create<PersistentVolumeClaim>(persistentVolumeClaims, {
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: { name: "unbound", namespace: "default" },
      spec: {
        accessModes: ["ReadWriteOnce"],
        resources: { requests: { storage: "1Gi" } },
        storageClassName: "",
      },
    });
    await createPod("app-3", "unbound", "sandbox-node");
    await eventually("ContainerCreating", async () =>
      waitingReason(await getPod("app-3")) === "ContainerCreating" ? true : undefined,
    );
    await sleep(500);
    assert.equal((await getPod("app-3"))?.status?.phase, "Pending");
    assert.equal((await kube.get<Node>(nodes, "sandbox-node")).status?.volumesInUse, undefined);
    await kube.delete(pods, "app-3", "default");
    await eventually("pod gone", async () => ((await getPod("app-3")) === undefined ? true : undefined));
  });
});
