// biome-ignore-all lint/suspicious/noTemplateCurlyInString: StorageClass secret templates spell ${...} literally
// The provisioner function and a claim with a VolumeAttributesClass, over
// the sandbox: real HTTP to the function and the API server, real gRPC to
// the sandbox driver (which advertises MODIFY_VOLUME and records the mutable
// parameters it was created with). The class's parameters reach the driver,
// the PV records the class and the modify secret, the binder binds and
// copies the class into the claim's status; a missing class or another
// driver's class fails with upstream's text and is retried.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import request from "supertest";
import { createProvisionerApp } from "../../functions/provisioner/app.ts";
import type { FunctionApp } from "../../shared/http/function-app.ts";
import {
  events,
  persistentVolumeClaims,
  persistentVolumes,
  volumeAttributesClasses,
} from "../../shared/kube/resources.ts";
import type {
  KubeEvent,
  PersistentVolume,
  PersistentVolumeClaim,
  VolumeAttributesClass,
} from "../../shared/kube/types.ts";
import { provisioningFinalizer } from "../../shared/kube/well-known.ts";
import { createLogger } from "../../shared/log.ts";
import { createMetricsRegistry } from "../../shared/metrics.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";
import { driverName, type StorageSystem, startStorageSystem } from "../helpers/storage-system.ts";

let sandbox: TestSandbox;
let system: StorageSystem;
let app: FunctionApp;

function vac(name: string, driver: string, parameters: Record<string, string>): VolumeAttributesClass {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttributesClass",
    metadata: { name },
    driverName: driver,
    parameters,
  };
}

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
      parameters: {
        tier: "standard",
        "csi.storage.k8s.io/controller-modify-secret-name": "modify-${pvc.name}",
        "csi.storage.k8s.io/controller-modify-secret-namespace": "${pvc.namespace}",
      },
    },
  ]);
});

function claim(name: string, vacName: string): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace: "default" },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: "1Gi" } },
      storageClassName: "fast",
      volumeAttributesClassName: vacName,
    },
  };
}

/** The claim created and handed to the driver by the binder, as the function would receive it. */
async function handedOver(name: string, vacName: string): Promise<PersistentVolumeClaim> {
  await system.kube.create(persistentVolumeClaims, claim(name, vacName));
  await system.binder.syncClaimByKey("default", name);
  return system.kube.get<PersistentVolumeClaim>(persistentVolumeClaims, name, "default");
}

async function post(c: PersistentVolumeClaim): Promise<{ outcome: string }> {
  const r = await request(app)
    .post("/")
    .set("content-type", "application/json")
    .send(JSON.stringify({ type: "MODIFIED", object: c }));
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.results[0].synced[0];
}

async function failedMessages(): Promise<string[]> {
  const list = await system.kube.list<KubeEvent>(events, { namespace: "default" });
  return list.items.filter((e) => e.reason === "ProvisioningFailed").map((e) => String(e.message));
}

describe("provisioner function: VolumeAttributesClass over the sandbox", () => {
  it("the class's parameters reach the driver, the PV records the class and the modify secret, the claim binds", async () => {
    await system.kube.create(
      volumeAttributesClasses,
      vac("gold", driverName, { iops: "3000", tier: "premium" }),
    );
    const c = await handedOver("data", "gold");
    const pvName = `pvc-${c.metadata.uid}`;
    assert.equal((await post(c)).outcome, `provisioned volume ${pvName}`);

    const backing = await sandbox.csi.volumes();
    assert.deepEqual(
      backing.map((v) => [v.name, v.parameters, v.mutableParameters]),
      [[pvName, { tier: "standard" }, { iops: "3000", tier: "premium" }]],
      "mutable parameters from the class; the modify secret keys never reach the driver",
    );
    const pv = await system.kube.get<PersistentVolume>(persistentVolumes, pvName);
    assert.equal(pv.spec.volumeAttributesClassName, "gold");
    assert.equal(
      pv.metadata.annotations?.["volume.kubernetes.io/controller-modify-secret-name"],
      "modify-data",
    );
    assert.equal(
      pv.metadata.annotations?.["volume.kubernetes.io/controller-modify-secret-namespace"],
      "default",
    );

    await system.settle();
    const bound = await system.kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "data", "default");
    assert.equal(bound.status?.phase, "Bound");
    assert.equal(bound.spec.volumeName, pvName);
    assert.equal(bound.status?.currentVolumeAttributesClassName, "gold");
  });

  it("a missing class: ProvisioningFailed with client-go's text, nothing created, retried once it exists", async () => {
    const c = await handedOver("later", "silver");
    // One event: the intent, then the request, which fails.
    assert.equal((await post(c)).outcome, "provisioning failed");
    assert.deepEqual(await failedMessages(), [
      'failed to provision volume with StorageClass "fast": volumeattributesclasses.storage.k8s.io "silver" not found',
    ]);
    assert.deepEqual(await sandbox.csi.volumes(), []);
    const after = await system.kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "later", "default");
    assert.equal(
      after.metadata.finalizers?.includes(provisioningFinalizer) ?? false,
      false,
      "no intent left",
    );

    // The class appears; after the backoff (1 s for a first failure) the claim is provisioned.
    await system.kube.create(volumeAttributesClasses, vac("silver", driverName, { iops: "500" }));
    await new Promise((resolve) => setTimeout(resolve, 1100));
    await system.settle();
    const bound = await system.kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "later", "default");
    assert.equal(bound.status?.phase, "Bound");
    assert.deepEqual(
      (await sandbox.csi.volumes()).map((v) => v.mutableParameters),
      [{ iops: "500" }],
    );
  });

  it("another driver's class: upstream's error, nothing created", async () => {
    await system.kube.create(volumeAttributesClasses, vac("foreign", "other.csi.example.com", { iops: "1" }));
    const c = await handedOver("foreign-claim", "foreign");
    assert.equal((await post(c)).outcome, "provisioning failed");
    assert.deepEqual(await failedMessages(), [
      `failed to provision volume with StorageClass "fast": VAC foreign referenced in PVC is for driver other.csi.example.com which does not match driver name ${driverName}`,
    ]);
    assert.deepEqual(await sandbox.csi.volumes(), []);
  });
});

describe("provisioner function: VolumeAttributesClass with a driver that cannot modify volumes", () => {
  let plain: TestSandbox;
  let plainSystem: StorageSystem;
  before(async () => {
    plain = await startTestSandbox({
      csi: {
        controllerCapabilities: [
          "CREATE_DELETE_VOLUME",
          "PUBLISH_UNPUBLISH_VOLUME",
          "LIST_VOLUMES",
          "EXPAND_VOLUME",
        ],
      },
    });
    plainSystem = await startStorageSystem(plain);
  });
  after(async () => {
    await plainSystem.close();
    await plain.close();
  });

  it("fails before reading the class, with upstream's capability error", async () => {
    await plain.admin.seed([
      {
        apiVersion: "storage.k8s.io/v1",
        kind: "StorageClass",
        metadata: { name: "fast" },
        provisioner: driverName,
        reclaimPolicy: "Delete",
        volumeBindingMode: "Immediate",
      },
    ]);
    await plainSystem.kube.create(volumeAttributesClasses, vac("gold", driverName, { iops: "3000" }));
    await plainSystem.kube.create(persistentVolumeClaims, claim("data", "gold"));
    await plainSystem.settle();
    const list = await plainSystem.kube.list<KubeEvent>(events, { namespace: "default" });
    const messages = list.items
      .filter((e) => e.reason === "ProvisioningFailed")
      .map((e) => String(e.message));
    assert.deepEqual(messages, [
      'failed to provision volume with StorageClass "fast": CSI driver does not support VolumeAttributesClass: controller MODIFY_VOLUME capability is not reported',
    ]);
    assert.deepEqual(await plain.csi.volumes(), []);
    const c = await plainSystem.kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "data", "default");
    assert.equal(c.status?.phase, "Pending");
  });
});
