// Provisioning end to end over the sandbox: real HTTP to the API server, real
// gRPC to the sandbox CSI driver. PVC → CreateVolume → PV → bound; deletion
// through DeleteVolume; Retain keeps everything; and the leak proofs: a
// provisioner dying at every step while the claim is deleted mid-way, and a
// driver that fails 10 % of its calls, leave no backing volume without a PV.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { events, persistentVolumeClaims, persistentVolumes } from "../../shared/kube/resources.ts";
import type {
  KubeEvent,
  PersistentVolume,
  PersistentVolumeClaim,
  StorageClass,
} from "../../shared/kube/types.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";
import { driverName, type StorageSystem, startStorageSystem } from "../helpers/storage-system.ts";

let sandbox: TestSandbox;
let system: StorageSystem;

function storageClass(name: string, reclaimPolicy: "Delete" | "Retain"): StorageClass {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: { name },
    provisioner: driverName,
    reclaimPolicy,
    volumeBindingMode: "Immediate",
    parameters: { "csi.storage.k8s.io/fstype": "ext4", tier: "gold" },
  };
}

function claim(name: string, cls: string, size = "1Gi"): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace: "default" },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: size } },
      storageClassName: cls,
    },
  };
}

before(async () => {
  sandbox = await startTestSandbox();
  system = await startStorageSystem(sandbox);
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
  await sandbox.admin.seed([storageClass("fast", "Delete"), storageClass("keep", "Retain")]);
});

async function getClaim(name: string): Promise<PersistentVolumeClaim | undefined> {
  return system.kube
    .get<PersistentVolumeClaim>(persistentVolumeClaims, name, "default")
    .catch(() => undefined);
}

/** Every backing volume in the driver is recorded by a PV (the leak check). */
async function assertNoLeakedVolumes(): Promise<void> {
  const volumes = await sandbox.csi.volumes();
  const pvs = (await system.kube.list<PersistentVolume>(persistentVolumes)).items;
  const recorded = new Set(pvs.map((pv) => pv.spec.csi?.volumeHandle));
  const leaked = volumes.filter((v) => !recorded.has(v.volumeId));
  assert.deepEqual(
    leaked.map((v) => v.name),
    [],
    "backing volumes without a PV",
  );
}

describe("provisioning over the sandbox", () => {
  it("PVC → CreateVolume → PV → bound, with upstream's objects and Events", async () => {
    const created = await system.kube.create(persistentVolumeClaims, claim("data", "fast"));
    await system.settle();
    const bound = (await getClaim("data"))!;
    const pvName = `pvc-${created.metadata.uid}`;
    assert.equal(bound.status?.phase, "Bound");
    assert.equal(bound.spec.volumeName, pvName);
    assert.deepEqual(bound.metadata.finalizers ?? [], [], "the intent finalizer is gone once bound");
    const pv = await system.kube.get<PersistentVolume>(persistentVolumes, pvName);
    assert.equal(pv.metadata.annotations?.["pv.kubernetes.io/provisioned-by"], driverName);
    assert.deepEqual(pv.metadata.finalizers, ["external-provisioner.volume.kubernetes.io/finalizer"]);
    assert.equal(pv.spec.csi?.driver, driverName);
    assert.equal(pv.spec.csi?.fsType, "ext4");
    assert.equal(pv.spec.persistentVolumeReclaimPolicy, "Delete");
    assert.equal(pv.spec.storageClassName, "fast");
    assert.equal(pv.spec.claimRef?.uid, created.metadata.uid);
    assert.deepEqual(pv.spec.capacity, { storage: "1Gi" });
    assert.ok(
      pv.spec.nodeAffinity?.required?.nodeSelectorTerms.length,
      "node affinity from accessible topology",
    );
    const backing = await sandbox.csi.volumes();
    assert.deepEqual(
      backing.map((v) => [v.name, v.volumeId === pv.spec.csi?.volumeHandle]),
      [[pvName, true]],
    );
    assert.deepEqual(
      backing[0]?.parameters,
      { tier: "gold" },
      "csi.storage.k8s.io/ keys never reach the driver",
    );
    const reasons = (await system.kube.list<KubeEvent>(events, { namespace: "default" })).items
      .map((e) => e.reason)
      .sort();
    // Provisioned within seconds: only the outcome is an Event (progress Events wait for slow claims).
    assert.deepEqual(reasons, ["ProvisioningSucceeded"]);
  });

  it("deleting the claim releases the PV, deletes the backing volume, then the PV", async () => {
    await system.kube.create(persistentVolumeClaims, claim("temp", "fast"));
    await system.settle();
    assert.equal((await sandbox.csi.volumes()).length, 1);
    await system.kube.delete(persistentVolumeClaims, "temp", "default");
    await system.settle();
    assert.deepEqual((await system.kube.list(persistentVolumes)).items, []);
    assert.deepEqual(await sandbox.csi.volumes(), []);
  });

  it("clones a claim: the source is protected while the clone is pending, the clone gets the source's volume as content", async () => {
    await system.kube.create(persistentVolumeClaims, claim("source", "fast"));
    await system.settle();
    const sourcePv = (await system.kube.list<PersistentVolume>(persistentVolumes)).items[0]!;
    await system.kube.create(persistentVolumeClaims, {
      ...claim("copy", "fast"),
      spec: { ...claim("copy", "fast").spec, dataSource: { kind: "PersistentVolumeClaim", name: "source" } },
    });
    await system.binder.syncClaimByKey("default", "copy");
    await sandbox.csi.setFaults({
      errorProbability: 1,
      errorCodes: ["UNAVAILABLE"],
      methods: ["CreateVolume"],
      afterProbability: 0,
    });
    await system.provisioner.syncClaim("default", "copy").catch(() => undefined);
    await sandbox.csi.clearFaults();
    assert.ok(
      (await getClaim("source"))?.metadata.finalizers?.includes(
        "provisioner.storage.kubernetes.io/cloning-protection",
      ),
    );
    await system.settle();
    assert.equal((await getClaim("copy"))?.status?.phase, "Bound");
    assert.ok(
      !(await getClaim("source"))?.metadata.finalizers?.includes(
        "provisioner.storage.kubernetes.io/cloning-protection",
      ),
    );
    const copy = (await sandbox.csi.volumes()).find((v) => v.name !== sourcePv.metadata.name);
    assert.deepEqual(copy?.contentSource, { volumeId: sourcePv.spec.csi?.volumeHandle });
  });

  it("a CreateVolume that lands after another instance released the claim, with the PV write failing, is taken back", async () => {
    // Found by the chaos run: instance A reads the claim (intent set) and calls CreateVolume, which
    // the driver runs late; meanwhile the claim is deleted and cleaned up, so its intent is gone.
    await system.kube.create(persistentVolumeClaims, claim("late", "fast"));
    await system.binder.syncClaimByKey("default", "late");
    const handed = await getClaim("late");
    assert.ok(handed);
    // The intent as the provisioner records it before any CreateVolume.
    await system.kube.replace(persistentVolumeClaims, {
      ...handed,
      metadata: { ...handed.metadata, finalizers: ["storage.kube-storage-functions.io/provisioning"] },
    });
    await sandbox.csi.setFaults({ latencyMs: 400, methods: ["CreateVolume"] });
    await sandbox.admin.setFaults({
      errorProbability: 1,
      verbs: ["create"],
      resources: ["persistentvolumes"],
    });
    const slow = system.provisioner.syncClaim("default", "late").then(
      () => "done",
      (err: unknown) => String(err),
    );
    // While CreateVolume waits at the driver, the claim loses its intent and goes away.
    await new Promise((r) => setTimeout(r, 150));
    const current = await getClaim("late");
    assert.ok(current);
    await system.kube.replace(persistentVolumeClaims, {
      ...current,
      metadata: { ...current.metadata, finalizers: [] },
    });
    await system.kube.delete(persistentVolumeClaims, "late", "default");
    assert.match(await slow, /PersistentVolume|500|Internal/i, "the PV write failed");
    await sandbox.admin.setFaults({});
    await sandbox.csi.clearFaults();
    assert.deepEqual(await sandbox.csi.volumes(), [], "the volume nothing records was deleted again");
  });

  it("a provisioner Secret our RBAC may not read: ProvisioningFailed with the API's reason, no volume; provisioned once it may", async () => {
    await sandbox.admin.seed([
      {
        ...storageClass("secretive", "Delete"),
        parameters: {
          "csi.storage.k8s.io/provisioner-secret-name": "creds",
          "csi.storage.k8s.io/provisioner-secret-namespace": "default",
        },
      },
      {
        apiVersion: "v1",
        kind: "Secret",
        metadata: { name: "creds", namespace: "default" },
        data: { token: Buffer.from("t").toString("base64") },
      },
    ]);
    await sandbox.admin.setFaults({
      errorProbability: 1,
      errorCode: 403,
      verbs: ["get"],
      resources: ["secrets"],
    });
    await system.kube.create(persistentVolumeClaims, claim("locked", "secretive"));
    await system.settle();
    assert.equal((await getClaim("locked"))?.status?.phase, "Pending");
    assert.deepEqual(await sandbox.csi.volumes(), [], "no CreateVolume without the Secret");
    const failed = (await system.kube.list<KubeEvent>(events, { namespace: "default" })).items.filter(
      (e) => e.reason === "ProvisioningFailed",
    );
    assert.ok(failed.length > 0, "a ProvisioningFailed Event");
    assert.equal(failed[0]?.type, "Warning");
    assert.match(
      failed[0]?.message ?? "",
      /error getting secret creds in namespace default: secrets "creds" is forbidden/,
    );

    await sandbox.admin.setFaults({});
    // The failure's backoff (upstream's, from 1 s) is waited out, as the next resync would.
    for (let i = 0; i < 40 && (await getClaim("locked"))?.status?.phase !== "Bound"; i++) {
      await new Promise((r) => setTimeout(r, 250));
      await system.settle();
    }
    assert.equal((await getClaim("locked"))?.status?.phase, "Bound");
    assert.equal((await sandbox.csi.volumes()).length, 1);
  });

  it("Retain keeps both the PV (Released) and the backing volume", async () => {
    await system.kube.create(persistentVolumeClaims, claim("precious", "keep"));
    await system.settle();
    await system.kube.delete(persistentVolumeClaims, "precious", "default");
    await system.settle();
    const pvs = (await system.kube.list<PersistentVolume>(persistentVolumes)).items;
    assert.equal(pvs.length, 1);
    assert.equal(pvs[0]?.status?.phase, "Released");
    assert.deepEqual(pvs[0]?.metadata.finalizers ?? [], []);
    assert.equal((await sandbox.csi.volumes()).length, 1);
  });
});

type Crash = {
  name: string;
  /** Make the step fail the way a dying provisioner leaves it. */
  inject(): Promise<void>;
};

const crashes: Crash[] = [
  {
    name: "after the intent is recorded, before CreateVolume reaches the driver",
    inject: () =>
      sandbox.csi.setFaults({
        errorProbability: 1,
        errorCodes: ["UNAVAILABLE"],
        methods: ["CreateVolume"],
        afterProbability: 0,
      }),
  },
  {
    name: "after the driver created the volume, before the answer arrived",
    inject: () =>
      sandbox.csi.setFaults({
        errorProbability: 1,
        errorCodes: ["DEADLINE_EXCEEDED"],
        methods: ["CreateVolume"],
        afterProbability: 1,
      }),
  },
  {
    name: "after CreateVolume, before the PV is saved",
    inject: () =>
      sandbox.admin.setFaults({
        errorProbability: 1,
        errorCode: 503,
        verbs: ["create"],
        resources: ["persistentvolumes"],
      }),
  },
  {
    name: "after the PV is saved, before the claim is bound",
    inject: () =>
      sandbox.admin.setFaults({
        errorProbability: 1,
        errorCode: 503,
        verbs: ["update"],
        resources: ["persistentvolumeclaims"],
      }),
  },
];

describe("no leaked volume when the provisioner dies at any step", () => {
  for (const crash of crashes) {
    for (const deleteMidway of [true, false]) {
      it(`${crash.name}${deleteMidway ? ", claim deleted mid-way" : ""}`, async () => {
        await system.kube.create(persistentVolumeClaims, claim("victim", "fast"));
        // The binder hands the claim over; the first provisioner gets as far as the crash lets it.
        await system.binder.syncClaimByKey("default", "victim");
        await crash.inject();
        await system.provisioner.syncClaim("default", "victim").catch(() => undefined);
        await system.binder.syncClaimByKey("default", "victim").catch(() => undefined);
        await sandbox.admin.clearFaults();
        await sandbox.csi.clearFaults();
        if (deleteMidway) await system.kube.delete(persistentVolumeClaims, "victim", "default");
        // A new process takes over; events and resyncs run until nothing changes.
        system.provisioner = system.newProvisioner();
        await system.settle();
        if (deleteMidway) {
          assert.equal(await getClaim("victim"), undefined, "the claim is gone");
          assert.deepEqual(await sandbox.csi.volumes(), [], "no backing volume is left");
          assert.deepEqual((await system.kube.list(persistentVolumes)).items, []);
        } else {
          assert.equal((await getClaim("victim"))?.status?.phase, "Bound");
          assert.equal((await sandbox.csi.volumes()).length, 1, "exactly one backing volume");
        }
        await assertNoLeakedVolumes();
      });
    }
  }
});

describe("a driver failing 10 % of its calls", () => {
  it("still provisions every claim and deletes every volume, with nothing leaked", async () => {
    await sandbox.csi.setFaults({
      errorProbability: 0.1,
      errorCodes: ["UNAVAILABLE", "DEADLINE_EXCEEDED"],
      seed: 42,
    });
    const names = Array.from({ length: 12 }, (_, i) => `flaky-${i}`);
    for (const n of names) await system.kube.create(persistentVolumeClaims, claim(n, "fast"));
    await system.settle({ maxRounds: 60 });
    for (const n of names) assert.equal((await getClaim(n))?.status?.phase, "Bound", n);
    assert.equal((await sandbox.csi.volumes()).length, names.length);
    await assertNoLeakedVolumes();
    for (const n of names) await system.kube.delete(persistentVolumeClaims, n, "default");
    await system.settle({ maxRounds: 60 });
    assert.deepEqual((await system.kube.list(persistentVolumes)).items, []);
    assert.deepEqual(await sandbox.csi.volumes(), []);
  });
});
