// Managed-cluster mode end to end (issue 19): only the functions that replace
// a driver's CSI sidecars run (admission, provisioner, attacher, resizer;
// sandbox/system.ts sidecarFunctions), over the sandbox's scheduler and
// kubelets. Our binder, attach-detach and protection do not run: this test
// plays kube-controller-manager in their place and writes exactly what its
// controllers write (pkg/controller/volume/persistentvolume, attachdetach,
// pvcprotection, pvprotection), so any dependency of our sidecar functions
// on something only our own controllers write shows up here as a stall.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { BackingVolume } from "../../sandbox/csi/driver.ts";
import { type RunningSystem, sidecarFunctions, startSystem } from "../../sandbox/system.ts";
import { uniqueVolumeName, volumeAttachmentName } from "../../shared/attach-detach/volume-attachment-name.ts";
import { isConflict, isNotFound } from "../../shared/kube/api-errors.ts";
import {
  events,
  nodes,
  persistentVolumeClaims,
  persistentVolumes,
  pods,
  storageClasses,
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
import {
  annBetaStorageProvisioner,
  annBindCompleted,
  annBoundByController,
  annSelectedNode,
  annStorageProvisioner,
  provisioningFinalizer,
  pvcProtectionFinalizer,
  pvProtectionFinalizer,
} from "../../shared/kube/well-known.ts";
import { waitFor } from "../helpers/wait-for.ts";

const ns = "default";
const GiB = 1024 ** 3;
const className = "managed-immediate";

/** Read, change, write back conditionally, again on a lost race: how kcm's controllers write. */
async function update<T>(read: () => Promise<T>, write: (current: T) => Promise<unknown>): Promise<void> {
  for (let i = 0; i < 20; i++) {
    try {
      await write(await read());
      return;
    } catch (err) {
      if (!isConflict(err)) throw err;
    }
  }
  throw new Error("update: 20 conflicts in a row");
}

describe("managed-cluster mode: our sidecar functions beside a (test-played) kube-controller-manager", () => {
  let dir: string;
  let system: RunningSystem;
  let driver: string;

  const getClaim = (name: string) => system.kube.get<PersistentVolumeClaim>(persistentVolumeClaims, name, ns);
  const getVolume = (name: string) => system.kube.get<PersistentVolume>(persistentVolumes, name);
  const backingVolumes = async (): Promise<BackingVolume[]> => {
    const res = await fetch(`${system.sandbox.csi.adminUrl}/volumes`);
    return ((await res.json()) as { volumes: BackingVolume[] }).volumes;
  };
  const backing = async (id: string): Promise<BackingVolume | undefined> =>
    (await backingVolumes()).find((v) => v.volumeId === id);
  const gone = (read: () => Promise<unknown>) => async (): Promise<true | undefined> => {
    try {
      await read();
      return undefined;
    } catch (err) {
      if (isNotFound(err)) return true;
      throw err;
    }
  };

  // ---- kube-controller-manager, played by the test ----

  /**
   * PV controller, syncUnboundClaim → provisionClaim: setClaimProvisioner writes both annotations
   * (Update) unless the GA one already names the provisioner. True when it wrote.
   */
  async function kcmHandOver(name: string): Promise<boolean> {
    let wrote = false;
    await update(
      () => getClaim(name),
      async (c) => {
        const a = c.metadata.annotations ?? {};
        if (a[annStorageProvisioner] === driver) return;
        wrote = true;
        c.metadata.annotations = {
          ...a,
          [annStorageProvisioner]: driver,
          [annBetaStorageProvisioner]: driver,
        };
        await system.kube.replace(persistentVolumeClaims, c);
      },
    );
    return wrote;
  }

  /**
   * PV controller, syncUnboundClaim with the provisioned PV found by its claimRef → bind():
   * the volume's phase Bound (its claimRef is already the claim's, so its spec is left as is),
   * then the claim's volumeName with bound-by-controller and bind-completed, then the claim's
   * status Bound with the volume's access modes and capacity.
   */
  async function kcmBind(name: string): Promise<PersistentVolume> {
    const claim = await getClaim(name);
    const pv = await waitFor(`a PV provisioned for ${name}`, async () => {
      const list = await system.kube.list<PersistentVolume>(persistentVolumes);
      return list.items.find((v) => v.spec.claimRef?.uid === claim.metadata.uid);
    });
    await update(
      () => getVolume(pv.metadata.name),
      async (v) => {
        v.status = { ...v.status, phase: "Bound" };
        await system.kube.replace(persistentVolumes, v, { subresource: "status" });
      },
    );
    await update(
      () => getClaim(name),
      async (c) => {
        c.spec.volumeName = pv.metadata.name;
        c.metadata.annotations = {
          ...c.metadata.annotations,
          [annBoundByController]: "yes",
          [annBindCompleted]: "yes",
        };
        await system.kube.replace(persistentVolumeClaims, c);
      },
    );
    await update(
      () => getClaim(name),
      async (c) => {
        c.status = {
          ...c.status,
          phase: "Bound",
          accessModes: pv.spec.accessModes,
          capacity: { ...pv.spec.capacity },
        };
        await system.kube.replace(persistentVolumeClaims, c, { subresource: "status" });
      },
    );
    return getVolume(pv.metadata.name);
  }

  /** Attach/detach controller's attach: the CSI attacher's VolumeAttachment, then, once attached, the node's list. */
  async function kcmAttach(pv: PersistentVolume, nodeName: string): Promise<VolumeAttachment> {
    const handle = pv.spec.csi?.volumeHandle ?? "";
    const name = volumeAttachmentName(handle, driver, nodeName);
    await system.kube.create<VolumeAttachment>(volumeAttachments, {
      apiVersion: "storage.k8s.io/v1",
      kind: "VolumeAttachment",
      metadata: { name },
      spec: { attacher: driver, nodeName, source: { persistentVolumeName: pv.metadata.name } },
    });
    const attached = await waitFor(`VolumeAttachment ${name} attached by our attacher`, async () => {
      const va = await system.kube.get<VolumeAttachment>(volumeAttachments, name);
      return va.status?.attached === true ? va : undefined;
    });
    // The node status updater: the whole atomic list, devicePath "" for CSI.
    const node = await system.kube.get<Node>(nodes, nodeName);
    const entry = { name: uniqueVolumeName(driver, handle), devicePath: "" };
    const list = [...(node.status?.volumesAttached ?? []).filter((a) => a.name !== entry.name), entry];
    await system.kube.patch(nodes, nodeName, undefined, { status: { volumesAttached: list } }, "strategic", {
      subresource: "status",
    });
    return attached;
  }

  /** Attach/detach controller's detach: once the kubelet no longer has it in use, out of the node's list, then delete. */
  async function kcmDetach(pv: PersistentVolume, nodeName: string): Promise<void> {
    const unique = uniqueVolumeName(driver, pv.spec.csi?.volumeHandle ?? "");
    await waitFor(`${unique} out of ${nodeName}'s volumesInUse`, async () => {
      const node = await system.kube.get<Node>(nodes, nodeName);
      return (node.status?.volumesInUse ?? []).includes(unique) ? undefined : true;
    });
    const node = await system.kube.get<Node>(nodes, nodeName);
    const rest = (node.status?.volumesAttached ?? []).filter((a) => a.name !== unique);
    await system.kube.patch(
      nodes,
      nodeName,
      undefined,
      { status: { volumesAttached: rest.length > 0 ? rest : null } },
      "strategic",
      { subresource: "status" },
    );
    await system.kube.delete(
      volumeAttachments,
      volumeAttachmentName(pv.spec.csi?.volumeHandle ?? "", driver, nodeName),
    );
  }

  /** pvc-protection / pv-protection: a deleting object loses the finalizer once nothing holds it. */
  async function kcmUnprotect(
    read: () => Promise<PersistentVolumeClaim | PersistentVolume>,
    finalizer: string,
  ) {
    const r = read as () => Promise<PersistentVolumeClaim>;
    await update(r, async (o) => {
      if (!(o.metadata.finalizers ?? []).includes(finalizer)) return;
      o.metadata.finalizers = (o.metadata.finalizers ?? []).filter((f) => f !== finalizer);
      await system.kube.replace(
        o.kind === "PersistentVolume" ? persistentVolumes : persistentVolumeClaims,
        o,
      );
    });
  }

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "ksf-managed-"));
    system = await startSystem({
      dir,
      resyncSeconds: 2,
      logLevel: "error",
      capacity: false,
      functions: sidecarFunctions,
      env: {
        RETRY_INTERVAL_START_SECONDS: "1",
        RETRY_INTERVAL_MAX_SECONDS: "5",
        // The claim is created before its class on purpose (below); admission's class list, cached
        // 5 s by default, would otherwise still miss the class when the expansion comes.
        ADMISSION_CACHE_TTL_MS: "0",
      },
    });
    driver = system.driverName;
  });

  after(async () => {
    await system?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it("runs only the sidecar replacements", () => {
    assert.deepEqual(system.functions.map((f) => f.name).sort(), [
      "admission",
      "attacher",
      "provisioner",
      "resizer",
    ]);
  });

  it("a claim is provisioned, bound by kcm, attached, grown to 2Gi and deleted, with our binder and attach-detach absent", async () => {
    // Created before its class exists, so our admission webhook cannot hand it over: the hand-over is kcm's alone.
    await system.kube.create<PersistentVolumeClaim>(persistentVolumeClaims, {
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: { name: "data", namespace: ns },
      spec: {
        accessModes: ["ReadWriteOnce"],
        resources: { requests: { storage: "1Gi" } },
        storageClassName: className,
      },
    });
    const created = await getClaim("data");
    assert.equal(created.metadata.annotations?.[annStorageProvisioner], undefined);
    assert.ok(!(created.metadata.finalizers ?? []).includes(provisioningFinalizer));
    await system.kube.create(storageClasses, {
      apiVersion: "storage.k8s.io/v1",
      kind: "StorageClass",
      metadata: { name: className },
      provisioner: driver,
      reclaimPolicy: "Delete",
      volumeBindingMode: "Immediate",
      allowVolumeExpansion: true,
    });

    // 1. kcm's binder hands the claim over; our provisioner creates the volume and the PV; kcm binds.
    const before = (await backingVolumes()).length;
    assert.equal(await kcmHandOver("data"), true);
    const pv = await kcmBind("data");
    const handle = pv.spec.csi?.volumeHandle ?? "";
    assert.equal(pv.spec.csi?.driver, driver);
    assert.equal(pv.spec.claimRef?.name, "data");
    assert.equal(pv.spec.persistentVolumeReclaimPolicy, "Delete");
    assert.equal(pv.status?.phase, "Bound");
    const bound = await waitFor("claim Bound without our intent finalizer", async () => {
      const c = await getClaim("data");
      return c.status?.phase === "Bound" && !(c.metadata.finalizers ?? []).includes(provisioningFinalizer)
        ? c
        : undefined;
    });
    assert.equal(bound.spec.volumeName, pv.metadata.name);
    assert.equal(bound.metadata.annotations?.[annBindCompleted], "yes");
    assert.equal(bound.status?.capacity?.storage, "1Gi");
    assert.equal((await backing(handle))?.capacityBytes, GiB, "the volume exists on the driver");
    assert.equal((await backingVolumes()).length, before + 1, "one volume, made once");
    const claimEvents = (await system.kube.list<KubeEvent>(events, { namespace: ns })).items
      .filter((e) => e.involvedObject.uid === bound.metadata.uid)
      .map((e) => e.reason);
    assert.ok(claimEvents.includes("ProvisioningSucceeded"), claimEvents.join(", "));

    // 2. The sandbox scheduler places a pod; kcm's attach/detach creates the VolumeAttachment; our attacher attaches.
    await system.kube.create<Pod>(pods, {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "user", namespace: ns },
      spec: {
        containers: [{ name: "app", image: "busybox" }],
        volumes: [{ name: "data", persistentVolumeClaim: { claimName: "data" } }],
      },
    });
    const nodeName = await waitFor("pod scheduled", async () => {
      const p = await system.kube.get<Pod>(pods, "user", ns);
      return p.spec.nodeName || undefined;
    });
    const va = await kcmAttach(pv, nodeName);
    assert.ok(
      (va.metadata.finalizers ?? []).some((f) => f.startsWith("external-attacher/")),
      "attacher's finalizer",
    );
    assert.ok(
      (await backing(handle))?.publishedNodes.includes(nodeName),
      "ControllerPublishVolume to the node",
    );
    await waitFor("pod Running", async () => {
      const p = await system.kube.get<Pod>(pods, "user", ns);
      return p.status?.phase === "Running" ? true : undefined;
    });
    assert.ok(
      (await backing(handle))?.nodePublished.some((p) => p.node === nodeName),
      "the kubelet mounted it",
    );

    // 3. Expansion: our resizer grows the volume, the kubelet the filesystem.
    await system.kube.patch(
      persistentVolumeClaims,
      "data",
      ns,
      { spec: { resources: { requests: { storage: "2Gi" } } } },
      "merge",
    );
    const grown = await waitFor("claim at 2Gi", async () => {
      const c = await getClaim("data");
      return c.status?.capacity?.storage === "2Gi" &&
        c.status.allocatedResourceStatuses?.storage === undefined
        ? c
        : undefined;
    });
    assert.equal(grown.status?.allocatedResources?.storage, "2Gi");
    assert.equal((await getVolume(pv.metadata.name)).spec.capacity?.storage, "2Gi");
    assert.equal((await backing(handle))?.capacityBytes, 2 * GiB);
    assert.equal((await backing(handle))?.nodeCapacityBytes, 2 * GiB);

    // 4. Teardown: pod, then kcm detaches (our attacher unpublishes), the claim goes, kcm releases the PV,
    // our provisioner deletes the volume and the PV.
    await system.kube.delete(pods, "user", ns);
    await waitFor(
      "pod gone",
      gone(() => system.kube.get<Pod>(pods, "user", ns)),
    );
    await kcmDetach(pv, nodeName);
    await waitFor(
      "VolumeAttachment gone (our attacher detached and dropped its finalizer)",
      gone(() => system.kube.get<VolumeAttachment>(volumeAttachments, va.metadata.name)),
    );
    assert.deepEqual((await backing(handle))?.publishedNodes, [], "ControllerUnpublishVolume");

    await system.kube.delete(persistentVolumeClaims, "data", ns);
    await kcmUnprotect(() => getClaim("data"), pvcProtectionFinalizer);
    await waitFor(
      "claim gone",
      gone(() => getClaim("data")),
    );
    // Upstream's provisioner deletes only a Released volume, and only kcm releases it: a resync later it is all still there.
    await new Promise((r) => setTimeout(r, 2500));
    assert.ok(await backing(handle), "the volume waits for kcm's Released");
    assert.equal((await getVolume(pv.metadata.name)).metadata.deletionTimestamp, undefined);
    // The PV controller's syncVolume: the claimRef's claim is gone, so the volume is Released.
    await update(
      () => getVolume(pv.metadata.name),
      async (v) => {
        v.status = { ...v.status, phase: "Released" };
        await system.kube.replace(persistentVolumes, v, { subresource: "status" });
      },
    );
    await waitFor("backing volume deleted by our provisioner", async () =>
      (await backing(handle)) === undefined ? true : undefined,
    );
    // pv-protection lets a deleting PV go once it is not Bound.
    await waitFor("PV deleting", async () =>
      (await getVolume(pv.metadata.name)).metadata.deletionTimestamp ? true : undefined,
    );
    await kcmUnprotect(() => getVolume(pv.metadata.name), pvProtectionFinalizer);
    await waitFor(
      "PV gone",
      gone(() => getVolume(pv.metadata.name)),
    );
    assert.equal((await backingVolumes()).length, before);
  });

  it("admission's hand-over at creation is what kcm would write: kcm then writes nothing, and the claim binds the same", async () => {
    await system.kube.create<PersistentVolumeClaim>(persistentVolumeClaims, {
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: { name: "early", namespace: ns },
      spec: {
        accessModes: ["ReadWriteOnce"],
        resources: { requests: { storage: "1Gi" } },
        storageClassName: className,
      },
    });
    const created = await getClaim("early");
    assert.equal(created.metadata.annotations?.[annStorageProvisioner], driver);
    assert.equal(created.metadata.annotations?.[annBetaStorageProvisioner], driver);
    // setClaimProvisioner finds its value there and makes no write.
    assert.equal(await kcmHandOver("early"), false);
    const pv = await kcmBind("early");
    const c = await waitFor("claim Bound", async () => {
      const got = await getClaim("early");
      return got.status?.phase === "Bound" ? got : undefined;
    });
    assert.equal(c.spec.volumeName, pv.metadata.name);
    assert.ok(await backing(pv.spec.csi?.volumeHandle ?? ""), "the volume exists on the driver");
  });

  it("a WaitForFirstConsumer claim: the scheduler picks the node, kcm hands over, our provisioner creates it there", async () => {
    await system.kube.create(storageClasses, {
      apiVersion: "storage.k8s.io/v1",
      kind: "StorageClass",
      metadata: { name: "managed-wffc" },
      provisioner: driver,
      reclaimPolicy: "Delete",
      volumeBindingMode: "WaitForFirstConsumer",
    });
    await system.kube.create<PersistentVolumeClaim>(persistentVolumeClaims, {
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: { name: "late", namespace: ns },
      spec: {
        accessModes: ["ReadWriteOnce"],
        resources: { requests: { storage: "1Gi" } },
        storageClassName: "managed-wffc",
      },
    });
    // Admission hands over no WaitForFirstConsumer claim: that stays kcm's, after the scheduler's choice.
    assert.equal((await getClaim("late")).metadata.annotations?.[annStorageProvisioner], undefined);
    await system.kube.create<Pod>(pods, {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "late-user", namespace: ns },
      spec: {
        containers: [{ name: "app", image: "busybox" }],
        volumes: [{ name: "data", persistentVolumeClaim: { claimName: "late" } }],
      },
    });
    const selected = await waitFor("the scheduler's selected-node", async () => {
      const c = await getClaim("late");
      return c.metadata.annotations?.[annSelectedNode];
    });
    assert.equal(await kcmHandOver("late"), true);
    const pv = await kcmBind("late");
    const v = await backing(pv.spec.csi?.volumeHandle ?? "");
    assert.ok(v, "the volume exists on the driver");
    const nodeName = await waitFor("pod scheduled", async () => {
      const p = await system.kube.get<Pod>(pods, "late-user", ns);
      return p.spec.nodeName || undefined;
    });
    assert.equal(nodeName, selected, "the pod goes where the volume was made");
    assert.ok(
      v.accessibleTopology.some((t) => Object.values(t).includes(selected)),
      `created in the selected node's segment: ${JSON.stringify(v.accessibleTopology)}`,
    );
    await kcmAttach(pv, nodeName);
    await waitFor("pod Running", async () => {
      const p = await system.kube.get<Pod>(pods, "late-user", ns);
      return p.status?.phase === "Running" ? true : undefined;
    });
  });
});
