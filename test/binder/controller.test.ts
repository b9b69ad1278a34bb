// The binder controller against the sandbox API server over real HTTP:
// rehydration, the write order and count of a bind, releases, the
// provisioning hand-off, Events, and conflict retries on fresh state.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { BinderController } from "../../shared/binder/runtime/binder-controller.ts";
import { EventRecorder } from "../../shared/kube/event-recorder.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { events, persistentVolumeClaims, persistentVolumes } from "../../shared/kube/resources.ts";
import type { KubeEvent, PersistentVolume, PersistentVolumeClaim } from "../../shared/kube/types.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";

let sandbox: TestSandbox;
let kube: KubeJsonClient;
let binder: BinderController;

before(async () => {
  sandbox = await startTestSandbox();
  kube = new KubeJsonClient(sandbox.kubeConfig);
  const recorder = new EventRecorder(kube, {
    component: "persistentvolume-controller",
    logger: { warn: () => undefined },
  });
  binder = new BinderController({ kube, events: recorder });
});
after(async () => {
  await kube.close();
  await sandbox.close();
});
beforeEach(() => sandbox.admin.reset());

function pv(name: string, size: string, extra: Partial<PersistentVolume["spec"]> = {}): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name },
    spec: {
      capacity: { storage: size },
      accessModes: ["ReadWriteOnce"],
      persistentVolumeReclaimPolicy: "Retain",
      csi: { driver: "hostpath.csi.k8s.io", volumeHandle: name },
      ...extra,
    },
  };
}

function pvc(
  name: string,
  size: string,
  extra: Partial<PersistentVolumeClaim["spec"]> = {},
): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace: "default" },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: size } },
      storageClassName: "",
      ...extra,
    },
  };
}

async function settleVolume(name: string): Promise<void> {
  await binder.handleEvent({ action: "add", kind: "PersistentVolume", apiVersion: "v1", name });
}

describe("binder controller over the sandbox", () => {
  it("binds a claim to the smallest matching volume in four writes, in upstream's order", async () => {
    await kube.create(persistentVolumes, pv("big", "10Gi"));
    await kube.create(persistentVolumes, pv("small", "2Gi"));
    await settleVolume("big");
    await settleVolume("small");
    await kube.create(persistentVolumeClaims, pvc("data", "1Gi"));
    await sandbox.admin.resetCounters();

    const reports = await binder.handleEvent({
      action: "add",
      kind: "PersistentVolumeClaim",
      apiVersion: "v1",
      name: "data",
      namespace: "default",
    });
    assert.equal(reports[0]?.outcome, "bound to volume small");
    const counters = await sandbox.admin.counters();
    assert.deepEqual(
      Object.fromEntries(
        Object.entries(counters).filter(([k]) => !k.startsWith("get") && !k.startsWith("list")),
      ),
      {
        "update persistentvolumes": 1,
        "update persistentvolumes/status": 1,
        "update persistentvolumeclaims": 1,
        "update persistentvolumeclaims/status": 1,
      },
    );
    const claim = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "data", "default");
    const volume = await kube.get<PersistentVolume>(persistentVolumes, "small");
    assert.equal(claim.status?.phase, "Bound");
    assert.equal(claim.spec.volumeName, "small");
    assert.deepEqual(claim.status?.capacity, { storage: "2Gi" });
    assert.equal(claim.metadata.annotations?.["pv.kubernetes.io/bind-completed"], "yes");
    assert.equal(claim.metadata.annotations?.["pv.kubernetes.io/bound-by-controller"], "yes");
    assert.equal(volume.status?.phase, "Bound");
    assert.equal(volume.spec.claimRef?.uid, claim.metadata.uid);
    assert.equal(volume.metadata.annotations?.["pv.kubernetes.io/bound-by-controller"], "yes");

    // A duplicate (late) event changes nothing.
    await sandbox.admin.resetCounters();
    await binder.handleEvent({
      action: "update",
      kind: "PersistentVolumeClaim",
      apiVersion: "v1",
      name: "data",
      namespace: "default",
    });
    const again = await sandbox.admin.counters();
    assert.equal(Object.keys(again).filter((k) => k.startsWith("update")).length, 0);
  });

  it("two events for one claim at once are synced one after the other: one bind, no lost race", async () => {
    await kube.create(persistentVolumes, pv("twice", "1Gi"));
    await settleVolume("twice");
    await kube.create(persistentVolumeClaims, pvc("twice", "1Gi"));
    await sandbox.admin.resetCounters();
    const event = {
      action: "add",
      kind: "PersistentVolumeClaim",
      apiVersion: "v1",
      name: "twice",
      namespace: "default",
    } as const;
    const [first, second] = await Promise.all([binder.handleEvent(event), binder.handleEvent(event)]);
    assert.equal(first[0]?.outcome, "bound to volume twice");
    assert.equal(first[0]?.attempts, 1);
    assert.equal(second[0]?.attempts, 1, "the second sync read the bound state, so it had nothing to retry");
    const counters = await sandbox.admin.counters();
    assert.equal(counters["update persistentvolumes"], 1, JSON.stringify(counters));
    assert.equal(counters["update persistentvolumeclaims/status"], 1, JSON.stringify(counters));
  });

  it("a deleted claim releases its Retain volume, which keeps its claimRef", async () => {
    await kube.create(persistentVolumes, pv("keep", "1Gi"));
    await settleVolume("keep");
    const created = await kube.create(persistentVolumeClaims, pvc("gone", "1Gi"));
    await binder.syncClaimByKey("default", "gone");
    await kube.delete(persistentVolumeClaims, "gone", "default");
    const reports = await binder.handleEvent({
      action: "delete",
      kind: "PersistentVolumeClaim",
      apiVersion: "v1",
      name: "gone",
      namespace: "default",
      object: { ...created, spec: { ...created.spec, volumeName: "keep" } },
    });
    assert.equal(reports[0]?.object, "volume keep");
    const volume = await kube.get<PersistentVolume>(persistentVolumes, "keep");
    assert.equal(volume.status?.phase, "Released");
    assert.equal(volume.spec.claimRef?.name, "gone");
  });

  it("hands a claim with a class to its external provisioner with both annotations and an ExternalProvisioning Event", async () => {
    await sandbox.admin.seed([
      {
        apiVersion: "storage.k8s.io/v1",
        kind: "StorageClass",
        metadata: { name: "fast" },
        provisioner: "hostpath.csi.k8s.io",
        volumeBindingMode: "Immediate",
      },
    ]);
    await kube.create(persistentVolumeClaims, pvc("dyn", "1Gi", { storageClassName: "fast" }));
    // A young claim is handed over without a progress Event ...
    await binder.syncClaimByKey("default", "dyn");
    assert.equal((await kube.list<KubeEvent>(events, { namespace: "default" })).items.length, 0);
    // ... one that has waited a minute hears what it waits for, on every sync (as upstream).
    const later = new BinderController({
      kube,
      events: new EventRecorder(kube, {
        component: "persistentvolume-controller",
        logger: { warn: () => undefined },
      }),
      now: () => new Date(Date.now() + 60_000),
    });
    await later.syncClaimByKey("default", "dyn");
    await later.syncClaimByKey("default", "dyn");
    const claim = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "dyn", "default");
    assert.equal(
      claim.metadata.annotations?.["volume.kubernetes.io/storage-provisioner"],
      "hostpath.csi.k8s.io",
    );
    assert.equal(
      claim.metadata.annotations?.["volume.beta.kubernetes.io/storage-provisioner"],
      "hostpath.csi.k8s.io",
    );
    assert.equal(claim.status?.phase, "Pending");
    const list = await kube.list<KubeEvent>(events, { namespace: "default" });
    assert.equal(list.items.length, 1);
    assert.equal(list.items[0]?.reason, "ExternalProvisioning");
    assert.equal(list.items[0]?.count, 2);
    assert.equal(list.items[0]?.involvedObject.name, "dyn");
  });

  it("finishes a bind that a crash interrupted after the volume write", async () => {
    const claim = await kube.create(persistentVolumeClaims, pvc("half", "1Gi"));
    await kube.create(persistentVolumes, {
      ...pv("half-pv", "1Gi"),
      metadata: { name: "half-pv", annotations: { "pv.kubernetes.io/bound-by-controller": "yes" } },
      spec: {
        ...pv("half-pv", "1Gi").spec,
        claimRef: {
          kind: "PersistentVolumeClaim",
          namespace: "default",
          name: "half",
          uid: claim.metadata.uid,
        },
      },
    });
    await binder.handleEvent({ action: "add", kind: "PersistentVolume", apiVersion: "v1", name: "half-pv" });
    const done = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "half", "default");
    assert.equal(done.status?.phase, "Bound");
    assert.equal(done.spec.volumeName, "half-pv");
  });

  it("re-decides on fresh state after injected conflicts, and gives up with a 409 when they never stop", async () => {
    await kube.create(persistentVolumes, pv("c-pv", "1Gi"));
    await settleVolume("c-pv");
    await kube.create(persistentVolumeClaims, pvc("c", "1Gi"));
    await sandbox.admin.setFaults({ conflictProbability: 0.3, verbs: ["update"], seed: 7 });
    // Each sync keeps the writes that landed and re-decides the rest; redelivery (here: a loop) finishes it.
    let syncs = 0;
    let exhausted = 0;
    while (syncs < 20) {
      syncs++;
      try {
        await binder.syncClaimByKey("default", "c");
      } catch (err) {
        assert.equal((err as { code?: number }).code, 409);
        exhausted++;
      }
      const now = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "c", "default");
      if (now.status?.phase === "Bound") break;
    }
    await sandbox.admin.clearFaults();
    const claim = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "c", "default");
    const volume = await kube.get<PersistentVolume>(persistentVolumes, "c-pv");
    assert.equal(claim.status?.phase, "Bound");
    assert.equal(volume.spec.claimRef?.uid, claim.metadata.uid);
    assert.ok(syncs < 20, `bound after ${syncs} syncs (${exhausted} gave up)`);

    await kube.create(persistentVolumeClaims, pvc("never", "1Gi", { storageClassName: "missing" }));
    await kube.create(persistentVolumes, pv("never-pv", "1Gi", { storageClassName: "missing" }));
    await settleVolume("never-pv");
    await sandbox.admin.setFaults({ conflictProbability: 1, verbs: ["update"] });
    await assert.rejects(
      binder.syncClaimByKey("default", "never"),
      (err: { code?: number }) => err.code === 409,
    );
    await sandbox.admin.clearFaults();
  });

  it("binds a provisioned volume announced by its PV event without listing every volume", async () => {
    const claim = await kube.create(
      persistentVolumeClaims,
      pvc("fast-path", "1Gi", { storageClassName: "fast" }),
    );
    await kube.create(persistentVolumes, {
      ...pv("pvc-fast", "1Gi", { storageClassName: "fast" }),
      metadata: {
        name: "pvc-fast",
        annotations: { "pv.kubernetes.io/provisioned-by": "hostpath.csi.k8s.io" },
      },
      spec: {
        ...pv("pvc-fast", "1Gi", { storageClassName: "fast" }).spec,
        claimRef: {
          kind: "PersistentVolumeClaim",
          namespace: "default",
          name: "fast-path",
          uid: claim.metadata.uid,
        },
      },
    });
    await sandbox.admin.resetCounters();
    await binder.handleEvent({ action: "add", kind: "PersistentVolume", apiVersion: "v1", name: "pvc-fast" });
    const bound = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "fast-path", "default");
    assert.equal(bound.status?.phase, "Bound");
    assert.equal(bound.spec.volumeName, "pvc-fast");
    const counters = await sandbox.admin.counters();
    assert.equal(counters["list persistentvolumes"] ?? 0, 0, JSON.stringify(counters));
  });

  it("explains a Pending claim with every volume's reason", async () => {
    await kube.create(persistentVolumes, pv("tiny", "1Mi"));
    await settleVolume("tiny");
    await kube.create(persistentVolumeClaims, pvc("why", "1Gi"));
    const e = await binder.explain("default", "why");
    assert.equal(e?.volumes[0]?.reason, "too-small");
    assert.match(e?.waitingFor ?? "", /administrator to create a matching PersistentVolume/);
    assert.equal(await binder.explain("default", "nope"), undefined);
  });

  it("a claim deleted between the read and the write is a lost race: read again, not a 500", async () => {
    await kube.create(persistentVolumes, pv("pv-gone", "1Gi"));
    await kube.create(persistentVolumeClaims, pvc("claim-gone", "1Gi"));
    await settleVolume("pv-gone");
    // Claim writes wait 1 s at the server, so the claim can be deleted after the PV took its claimRef.
    await sandbox.admin.setFaults({
      latencyMs: 1000,
      verbs: ["update", "patch"],
      resources: ["persistentvolumeclaims"],
    });
    try {
      const syncing = binder.syncClaimByKey("default", "claim-gone");
      const deadline = Date.now() + 20_000;
      while (!(await kube.get<PersistentVolume>(persistentVolumes, "pv-gone")).spec.claimRef) {
        assert.ok(Date.now() < deadline, "the binder never wrote the PV's claimRef");
        await new Promise((r) => setTimeout(r, 10));
      }
      await kube.delete(persistentVolumeClaims, "claim-gone", "default");
      const report = await syncing;
      assert.doesNotMatch(report.outcome, /bound/i, JSON.stringify(report));
      assert.ok(report.attempts >= 2, JSON.stringify(report));
    } finally {
      await sandbox.admin.clearFaults();
    }
    // The PV names a claim that is gone: the volume's own sync releases it (Retain keeps it).
    await settleVolume("pv-gone");
    const after = await kube.get<PersistentVolume>(persistentVolumes, "pv-gone");
    assert.equal(after.status?.phase, "Released");
  });
});
