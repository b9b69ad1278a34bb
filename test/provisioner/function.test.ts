// The provisioner function over HTTP and as processes: readiness from the
// CSI driver, 400 for bad envelopes, 503 + Retry-After while the driver may
// still be creating a volume, and a real SIGKILL of the process in the middle
// of CreateVolume with the claim deleted afterwards: nothing leaks.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import request from "supertest";
import { createProvisionerApp } from "../../functions/provisioner/app.ts";
import type { FunctionApp } from "../../shared/http/function-app.ts";
import { persistentVolumeClaims, persistentVolumes } from "../../shared/kube/resources.ts";
import type { PersistentVolume, PersistentVolumeClaim } from "../../shared/kube/types.ts";
import { createLogger } from "../../shared/log.ts";
import { createMetricsRegistry } from "../../shared/metrics.ts";
import { startFunctionProcess } from "../helpers/function-process.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";
import { driverName, type StorageSystem, startStorageSystem } from "../helpers/storage-system.ts";

let sandbox: TestSandbox;
let system: StorageSystem;
let app: FunctionApp;

before(async () => {
  sandbox = await startTestSandbox();
  system = await startStorageSystem(sandbox);
  app = createProvisionerApp({
    controller: system.provisioner,
    csi: system.csi,
    logger: createLogger({ name: "provisioner", level: "silent" }),
    metrics: createMetricsRegistry({ defaultMetrics: false }),
  });
});
after(async () => {
  await system.close();
  await sandbox.close();
});
beforeEach(async () => {
  await sandbox.admin.reset();
  await sandbox.csi.clearFaults();
  for (const v of await sandbox.csi.volumes())
    await system.csi.deleteVolume({ volumeId: v.volumeId }).catch(() => undefined);
  await sandbox.admin.seed([
    {
      apiVersion: "storage.k8s.io/v1",
      kind: "StorageClass",
      metadata: { name: "fast" },
      provisioner: driverName,
      reclaimPolicy: "Delete",
      volumeBindingMode: "Immediate",
    },
  ]);
});

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

/** One forwarded watch event, as the forwarder posts it. */
function deliver(type: "ADDED" | "MODIFIED", object: unknown) {
  return request(app)
    .post("/")
    .set("content-type", "application/json")
    .send(JSON.stringify({ type, object }));
}

async function handedOver(name: string): Promise<PersistentVolumeClaim> {
  await system.kube.create(persistentVolumeClaims, claim(name));
  await system.binder.syncClaimByKey("default", name);
  return system.kube.get<PersistentVolumeClaim>(persistentVolumeClaims, name, "default");
}

describe("provisioner function over HTTP", () => {
  it("is ready while the driver answers Probe", async () => {
    await request(app).get("/readyz").expect(200);
    await sandbox.csi.setReady(false);
    await request(app).get("/readyz").expect(503);
    await sandbox.csi.setReady(true);
  });

  it("provisions on a forwarded claim event and answers what it did", async () => {
    const c = await handedOver("http-claim");
    const r = await deliver("MODIFIED", c);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.results[0].synced[0].outcome, `provisioned volume pvc-${c.metadata.uid}`);
  });

  it("a claim event whose own copy is bound, with no intent of ours, is answered without reading anything", async () => {
    const c = await handedOver("bound-copy");
    const bound = { ...c, spec: { ...c.spec, volumeName: "pv-elsewhere" } };
    await sandbox.admin.resetCounters();
    const r = await deliver("MODIFIED", bound);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.results[0].synced[0].outcome, "nothing to do (the event's copy)");
    assert.deepEqual(await sandbox.admin.counters(), {});

    // A copy not shaped like a claim is not judged: the claim is read (and, being Pending, provisioned).
    const odd = { ...bound, metadata: { ...bound.metadata, finalizers: "not-a-list" } };
    const r2 = await deliver("MODIFIED", odd);
    assert.equal(r2.status, 200, JSON.stringify(r2.body));
    assert.equal(r2.body.results[0].synced[0].outcome, `provisioned volume pvc-${c.metadata.uid}`);
  });

  it("a volume event whose own copy needs nothing is answered without reads; a Released copy is read", async () => {
    const pv = (phase: string) => ({
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: {
        name: "pv-copy",
        annotations: { "pv.kubernetes.io/provisioned-by": driverName },
        finalizers: ["external-provisioner.volume.kubernetes.io/finalizer"],
      },
      spec: {
        capacity: { storage: "1Gi" },
        persistentVolumeReclaimPolicy: "Delete",
        csi: { driver: driverName, volumeHandle: "vol-copy" },
      },
      status: { phase },
    });
    await sandbox.admin.resetCounters();
    const bound = await deliver("MODIFIED", pv("Bound"));
    assert.equal(bound.status, 200, JSON.stringify(bound.body));
    assert.equal(bound.body.results[0].synced[0].outcome, "nothing to do (the event's copy)");
    assert.deepEqual(await sandbox.admin.counters(), {});
    const released = await deliver("MODIFIED", pv("Released"));
    assert.equal(released.status, 200, JSON.stringify(released.body));
    assert.equal(released.body.results[0].synced[0].outcome, "volume is gone");
    assert.equal((await sandbox.admin.counters())["get persistentvolumes"], 1);
  });

  it("a volume event older than the provisioner's own write of that PV is answered without reading it", async () => {
    const c = await handedOver("reclaimed");
    const provisioned = await deliver("ADDED", c);
    assert.equal(provisioned.status, 200, JSON.stringify(provisioned.body));
    const pvName = `pvc-${c.metadata.uid}`;
    await system.binder.syncClaimByKey("default", "reclaimed");
    // Released as the binder leaves it once the claim is gone: the copy a deletion starts from.
    const bound = await system.kube.get<PersistentVolume>(persistentVolumes, pvName);
    const released = await system.kube.replace<PersistentVolume>(
      persistentVolumes,
      { ...bound, status: { phase: "Released" } },
      { subresource: "status" },
    );
    // The Released event's sync: DeleteVolume, then the PV's DELETE and our finalizer off.
    const first = await deliver("MODIFIED", released);
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.deepEqual(await sandbox.csi.volumes(), []);
    const after = await system.kube.get<PersistentVolume>(persistentVolumes, pvName).catch(() => undefined);
    assert.ok(!after?.metadata.finalizers?.includes("external-provisioner.volume.kubernetes.io/finalizer"));

    // The same Released copy delivered again (a queued or repeated event): it is older than what
    // the sync wrote, so it is answered from memory; a fresh process would read the PV.
    await sandbox.admin.resetCounters();
    const late = await deliver("MODIFIED", released);
    assert.equal(late.status, 200, JSON.stringify(late.body));
    assert.equal(
      late.body.results[0].synced[0].outcome,
      "the event's copy is older than this process's own write of it",
    );
    assert.deepEqual(await sandbox.admin.counters(), {});
  });

  it("answers 503 with Retry-After while CreateVolume may still be running, and 400 for a bad envelope", async () => {
    const c = await handedOver("slow-claim");
    await sandbox.csi.setFaults({
      errorProbability: 1,
      errorCodes: ["DEADLINE_EXCEEDED"],
      methods: ["CreateVolume"],
      afterProbability: 1,
    });
    const r = await deliver("ADDED", c);
    await sandbox.csi.clearFaults();
    assert.equal(r.status, 503);
    assert.ok(Number(r.headers["retry-after"]) >= 1);
    const intent = await system.kube.get<PersistentVolumeClaim>(
      persistentVolumeClaims,
      "slow-claim",
      "default",
    );
    assert.ok(intent.metadata.finalizers?.includes("storage.kube-storage-functions.io/provisioning"));
    await request(app).post("/").set("content-type", "application/json").send("[1,2").expect(400);
  });
});

describe("provisioner function as a process", () => {
  it("SIGKILL in the middle of CreateVolume, claim deleted, a new process cleans up: nothing leaks", async () => {
    const env = {
      KUBECONFIG: sandbox.kubeconfigPath,
      CSI_ENDPOINT: sandbox.csiEndpoint,
      DRIVER_NAME: driverName,
    };
    const first = await startFunctionProcess("provisioner", env);
    const c = await handedOver("killed");
    await sandbox.csi.setFaults({ latencyMs: 400, methods: ["CreateVolume"] });
    await sandbox.csi.resetStats();
    const inFlight = fetch(`${first.url}/`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ type: "ADDED", object: c }),
    }).catch(() => undefined);
    // Kill once the driver has the call (it is then sleeping its injected latency), however slow the machine is.
    const deadline = Date.now() + 20_000;
    while (!((await sandbox.csi.stats()).calls.CreateVolume ?? 0)) {
      assert.ok(Date.now() < deadline, "the provisioner never called CreateVolume");
      await new Promise((r) => setTimeout(r, 10));
    }
    first.child.kill("SIGKILL");
    await inFlight;
    await first.stop();
    // The driver finishes the orphaned CreateVolume after its injected latency; wait for it however loaded the machine is.
    while ((await sandbox.csi.volumes()).length === 0) {
      assert.ok(Date.now() < deadline, "the dead process left no volume behind in the driver");
      await new Promise((r) => setTimeout(r, 20));
    }
    await sandbox.csi.clearFaults();
    assert.equal((await sandbox.csi.volumes()).length, 1, "exactly one orphaned volume in the driver");
    await system.kube.delete(persistentVolumeClaims, "killed", "default");

    const second = await startFunctionProcess("provisioner", env);
    try {
      for (let i = 0; i < 5 && (await sandbox.csi.volumes()).length > 0; i++) {
        const r = await fetch(`${second.url}/resync`, { method: "POST" });
        assert.equal(r.status, 200);
        await system.binder.resync();
      }
    } finally {
      assert.equal(await second.stop(), 0);
    }
    assert.deepEqual(await sandbox.csi.volumes(), []);
    assert.deepEqual((await system.kube.list(persistentVolumes)).items, []);
    await assert.rejects(system.kube.get(persistentVolumeClaims, "killed", "default"), { code: 404 });
  });
});
