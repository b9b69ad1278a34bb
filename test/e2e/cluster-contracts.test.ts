// The contracts with the rest of a cluster, end to end: every function as its
// own process (as `npm start` runs them, sandbox/system.ts) on the sandbox
// cluster, whose scheduler and kubelets play their upstream parts. A pod of an
// attach-required driver mounts nothing until its node lists the volume in
// status.volumesAttached; deleting it unpublishes, detaches and unlists; claims
// go once nothing uses them (protection); an out-of-service taint detaches at
// once; a WaitForFirstConsumer claim follows the scheduler's node.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { StoredChange } from "../../sandbox/apiserver/store.ts";
import type { BackingVolume, DriverStats } from "../../sandbox/csi/driver.ts";
import { type RunningSystem, startSystem } from "../../sandbox/system.ts";
import { isNotFound } from "../../shared/kube/api-errors.ts";
import {
  nodes,
  persistentVolumeClaims,
  persistentVolumes,
  pods,
  storageClasses,
  volumeAttachments,
} from "../../shared/kube/resources.ts";
import type {
  KubeObject,
  Node,
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
  VolumeAttachment,
} from "../../shared/kube/types.ts";
import { waitFor } from "../helpers/wait-for.ts";

const ns = "default";

/** The parts of a pod's status the kubelet writes that these checks read. */
interface PodStatusView {
  phase?: string;
  conditions?: { type: string; status: string }[];
  containerStatuses?: { state?: { waiting?: { reason?: string } } }[];
}
const statusOf = (p: Pod): PodStatusView => (p.status ?? {}) as PodStatusView;

function claim(name: string, storageClassName: string): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace: ns },
    spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } }, storageClassName },
  };
}

function pod(name: string, claimName: string): Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: ns },
    spec: {
      containers: [{ name: "app", image: "busybox" }],
      volumes: [{ name: "data", persistentVolumeClaim: { claimName } }],
    },
  };
}

describe("cluster contracts, end to end over the sandbox cluster", () => {
  let dir: string;
  let system: RunningSystem;
  let driver: string;
  const admin = (path: string, init?: RequestInit): Promise<Response> =>
    fetch(`${system.sandbox.csi.adminUrl}${path}`, init);
  const backing = async (): Promise<BackingVolume[]> =>
    ((await (await admin("/volumes")).json()) as { volumes: BackingVolume[] }).volumes;
  const stats = async (): Promise<DriverStats> => (await (await admin("/stats")).json()) as DriverStats;
  const get = <T extends KubeObject>(
    r: typeof pods,
    name: string,
    namespace?: string,
  ): Promise<T | undefined> =>
    system.kube.get<T>(r, name, namespace).catch((err: unknown) => {
      if (isNotFound(err)) return undefined;
      throw err;
    });
  const gone = async (r: typeof pods, name: string, namespace?: string): Promise<true | undefined> =>
    (await get(r, name, namespace)) === undefined ? true : undefined;
  const entryOf = (pv: PersistentVolume): string =>
    `kubernetes.io/csi/${driver}^${pv.spec.csi?.volumeHandle}`;
  const listedOn = async (node: string): Promise<string[]> =>
    ((await system.kube.get<Node>(nodes, node)).status?.volumesAttached ?? []).map((e) => e.name);

  /** A claim and a pod using it, Running on whichever node the scheduler picked. */
  async function runningPod(
    claimName: string,
    podName: string,
    cls = "attach",
  ): Promise<{ pod: Pod; pv: PersistentVolume }> {
    await system.kube.create(persistentVolumeClaims, claim(claimName, cls));
    await system.kube.create(pods, pod(podName, claimName));
    const running = await waitFor(`pod ${podName} Running`, async () => {
      const p = await get<Pod>(pods, podName, ns);
      return p?.status?.phase === "Running" ? p : undefined;
    });
    const c = await system.kube.get<PersistentVolumeClaim>(persistentVolumeClaims, claimName, ns);
    const pv = await system.kube.get<PersistentVolume>(persistentVolumes, c.spec.volumeName!);
    return { pod: running, pv };
  }

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "ksf-contracts-"));
    system = await startSystem({ dir, resyncSeconds: 2, logLevel: "error" });
    driver = system.driverName;
    await system.kube.create(storageClasses, {
      apiVersion: "storage.k8s.io/v1",
      kind: "StorageClass",
      metadata: { name: "attach" },
      provisioner: driver,
      reclaimPolicy: "Delete",
      volumeBindingMode: "Immediate",
    });
  });

  after(async () => {
    await system?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it("a pod stays ContainerCreating until its node lists the volume in volumesAttached, then runs; deleting it unpublishes, detaches and unlists", async () => {
    // The order of what the API server committed: the node's list must come before the pod runs.
    const order: string[] = [];
    const unsubscribe = system.sandbox.apiServer.store.subscribe((c: StoredChange) => {
      const o = c.object as { status?: { phase?: unknown; volumesAttached?: { name: string }[] } };
      if (c.resource.plural === "pods" && c.object.metadata.name === "app-1" && o.status?.phase === "Running")
        order.push("pod Running");
      if (c.resource.plural === "nodes" && (o.status?.volumesAttached ?? []).length > 0)
        order.push("node lists");
    });
    // ControllerPublishVolume fails until the faults go: the VolumeAttachment cannot attach.
    await admin("/faults", {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        errorProbability: 1,
        errorCodes: ["INTERNAL"],
        methods: ["ControllerPublishVolume"],
      }),
    });
    await admin("/stats", { method: "DELETE" });
    await system.kube.create(persistentVolumeClaims, claim("data-1", "attach"));
    await system.kube.create(pods, pod("app-1", "data-1"));
    const va = await waitFor("a VolumeAttachment with an attach error", async () => {
      const list = await system.kube.list<VolumeAttachment>(volumeAttachments);
      return list.items.find((v) => v.status?.attachError);
    });
    const node = va.spec.nodeName;
    await new Promise((r) => setTimeout(r, 2500));
    const waiting = await system.kube.get<Pod>(pods, "app-1", ns);
    assert.equal(waiting.spec.nodeName, node, "scheduled by the sandbox scheduler");
    assert.equal(waiting.status?.phase, "Pending");
    assert.equal(statusOf(waiting).containerStatuses?.[0]?.state?.waiting?.reason, "ContainerCreating");
    assert.deepEqual(await listedOn(node), [], "nothing listed while the attach fails");
    const early = await stats();
    assert.equal(early.calls.NodeStageVolume ?? 0, 0, "no NodeStageVolume before the attach");
    assert.equal(early.calls.NodePublishVolume ?? 0, 0, "no NodePublishVolume before the attach");

    await admin("/faults", { method: "DELETE" });
    const running = await waitFor("pod app-1 Running", async () => {
      const p = await get<Pod>(pods, "app-1", ns);
      return p?.status?.phase === "Running" ? p : undefined;
    });
    unsubscribe();
    assert.ok(statusOf(running).conditions?.some((c) => c.type === "Ready" && c.status === "True"));
    const c = await system.kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "data-1", ns);
    const pv = await system.kube.get<PersistentVolume>(persistentVolumes, c.spec.volumeName!);
    assert.deepEqual(await listedOn(node), [entryOf(pv)]);
    assert.ok(
      order.indexOf("node lists") >= 0 && order.indexOf("node lists") < order.indexOf("pod Running"),
      order.join(" < "),
    );
    const mounted = (await backing()).find((b) => b.volumeId === pv.spec.csi?.volumeHandle)!;
    assert.deepEqual(mounted.publishedNodes, [node]);
    assert.deepEqual(
      mounted.staged.map((s) => s.node),
      [node],
    );
    assert.equal(mounted.nodePublished.length, 1);

    await system.kube.delete(pods, "app-1", ns);
    await waitFor("pod app-1 gone", () => gone(pods, "app-1", ns));
    await waitFor("the VolumeAttachment gone", () => gone(volumeAttachments, va.metadata.name));
    await waitFor("node unlists the volume", async () =>
      (await listedOn(node)).length === 0 ? true : undefined,
    );
    const after = (await backing()).find((b) => b.volumeId === pv.spec.csi?.volumeHandle)!;
    assert.deepEqual(after.publishedNodes, [], "ControllerUnpublishVolume happened");
    assert.deepEqual(after.staged, [], "NodeUnstageVolume happened");
    assert.deepEqual(after.nodePublished, [], "NodeUnpublishVolume happened");
  });

  it("deleting an unused claim completes in seconds and deletes its volume", async () => {
    const c = await system.kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "data-1", ns);
    assert.ok(
      c.metadata.finalizers?.includes("kubernetes.io/pvc-protection"),
      "admission added pvc-protection",
    );
    const pv = await system.kube.get<PersistentVolume>(persistentVolumes, c.spec.volumeName!);
    const t0 = Date.now();
    await system.kube.delete(persistentVolumeClaims, "data-1", ns);
    await waitFor("claim data-1 gone", () => gone(persistentVolumeClaims, "data-1", ns), 10_000);
    await waitFor("its PV gone", () => gone(persistentVolumes, pv.metadata.name), 10_000);
    assert.ok(Date.now() - t0 < 10_000);
    assert.equal(
      (await backing()).find((b) => b.volumeId === pv.spec.csi?.volumeHandle),
      undefined,
    );
  });

  it("a claim still used by a pod stays Terminating until the pod goes", async () => {
    await runningPod("data-2", "app-2");
    await system.kube.delete(persistentVolumeClaims, "data-2", ns);
    await new Promise((r) => setTimeout(r, 3000));
    const held = await system.kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "data-2", ns);
    assert.ok(held.metadata.deletionTimestamp, "Terminating");
    assert.deepEqual(held.metadata.finalizers, ["kubernetes.io/pvc-protection"]);
    await system.kube.delete(pods, "app-2", ns);
    await waitFor("claim data-2 gone", () => gone(persistentVolumeClaims, "data-2", ns), 15_000);
  });

  it("a WaitForFirstConsumer claim is provisioned on the scheduler's node, with no hand-written annotation", async () => {
    const target = system.sandbox.nodeNames[1]!;
    // allowedTopologies name the driver's topology key, as the provisioner builds requisite topology from it.
    const key = system.sandbox.csi.driver.config.topologyKey;
    await system.kube.create(storageClasses, {
      apiVersion: "storage.k8s.io/v1",
      kind: "StorageClass",
      metadata: { name: "late" },
      provisioner: driver,
      reclaimPolicy: "Delete",
      volumeBindingMode: "WaitForFirstConsumer",
      allowedTopologies: [{ matchLabelExpressions: [{ key, values: [target] }] }],
    });
    const { pod: p, pv } = await runningPod("data-3", "app-3", "late");
    assert.equal(p.spec.nodeName, target);
    const c = await system.kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "data-3", ns);
    assert.equal(c.metadata.annotations?.["volume.kubernetes.io/selected-node"], target);
    const terms = pv.spec.nodeAffinity?.required?.nodeSelectorTerms ?? [];
    assert.ok(
      terms.some((t) => t.matchExpressions?.some((e) => e.values?.includes(target))),
      JSON.stringify(terms),
    );
  });

  it("an out-of-service taint detaches a shut-down node's volumes at once", async () => {
    const { pod: p, pv } = await runningPod("data-4", "app-4");
    const node = p.spec.nodeName!;
    // The node shuts down: its kubelet is gone and still reports the volume in use.
    await system.sandbox.kubelets.find((k) => k.nodeName === node)!.stop();
    await system.kube.delete(pods, "app-4", ns, { gracePeriodSeconds: 0 });
    const va = (await system.kube.list<VolumeAttachment>(volumeAttachments)).items.find(
      (v) => v.spec.source.persistentVolumeName === pv.metadata.name,
    )!;
    await new Promise((r) => setTimeout(r, 4000));
    assert.ok(await get(volumeAttachments, va.metadata.name), "a Ready node still using it keeps it");
    const n = await system.kube.get<Node>(nodes, node);
    await system.kube.replace(nodes, {
      ...n,
      spec: {
        ...n.spec,
        taints: [{ key: "node.kubernetes.io/out-of-service", value: "nodeshutdown", effect: "NoExecute" }],
      },
    });
    const t0 = Date.now();
    await waitFor("the VolumeAttachment gone", () => gone(volumeAttachments, va.metadata.name), 10_000);
    assert.ok(Date.now() - t0 < 10_000);
    // Other pods' volumes on that node (still scheduled there) stay; this one is unlisted.
    assert.ok(!(await listedOn(node)).includes(entryOf(pv)));
    const b = (await backing()).find((x) => x.volumeId === pv.spec.csi?.volumeHandle)!;
    assert.deepEqual(b.publishedNodes, []);
  });
});
