// /metrics after a provisioning: the upstream-compatible counters moved
// (controller_persistentvolumeclaim_provision_total, csi_sidecar_operations_seconds)
// next to the function's own request metrics.
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import request from "supertest";
import { createProvisionerApp } from "../../functions/provisioner/app.ts";
import { CsiClient } from "../../shared/csi/client.ts";
import { EventRecorder } from "../../shared/kube/event-recorder.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { persistentVolumeClaims } from "../../shared/kube/resources.ts";
import type { PersistentVolumeClaim } from "../../shared/kube/types.ts";
import { createLogger } from "../../shared/log.ts";
import { createMetricsRegistry } from "../../shared/metrics.ts";
import { defaultProvisionerOptions } from "../../shared/provisioner/options.ts";
import { ProvisionerController } from "../../shared/provisioner/runtime/provisioner-controller.ts";
import { provisionerMetrics } from "../../shared/provisioner/runtime/provisioner-metrics.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";

const driverName = "hostpath.csi.k8s.io";
let sandbox: TestSandbox;
let kube: KubeJsonClient;
let csi: CsiClient;

before(async () => {
  sandbox = await startTestSandbox();
  kube = new KubeJsonClient(sandbox.kubeConfig);
});
after(async () => {
  csi?.close();
  await kube.close();
  await sandbox.close();
});

it("after a provisioning, /metrics shows the provision counter, the CSI call histogram and the request counter", async () => {
  // One registry for everything this process serves, as in main.ts.
  const registry = createMetricsRegistry({ defaultMetrics: false });
  csi = await CsiClient.connect({ endpoint: sandbox.csiEndpoint, registry });
  const controller = new ProvisionerController({
    kube,
    csi,
    events: new EventRecorder(kube, { component: "test", logger: { warn: () => undefined } }),
    driverName,
    options: defaultProvisionerOptions(driverName),
    metrics: provisionerMetrics(registry),
  });
  const app = createProvisionerApp({
    controller,
    csi,
    logger: createLogger({ name: "provisioner", level: "silent" }),
    metrics: registry,
  });
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
  const claim: PersistentVolumeClaim = {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: {
      name: "measured",
      namespace: "default",
      annotations: { "volume.kubernetes.io/storage-provisioner": driverName },
    },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: "1Gi" } },
      storageClassName: "fast",
    },
  };
  const created = await kube.create(persistentVolumeClaims, claim);
  const before = (await request(app).get("/metrics")).text;
  assert.doesNotMatch(before, /controller_persistentvolumeclaim_provision_total\{[^}]*\} 1/);
  await request(app)
    .post("/")
    .set("content-type", "application/json")
    .send(JSON.stringify({ type: "ADDED", object: created }))
    .expect(200);

  const text = (await request(app).get("/metrics")).text;
  assert.match(text, /controller_persistentvolumeclaim_provision_total\{class="fast",source=""\} 1/);
  assert.match(
    text,
    /controller_persistentvolumeclaim_provision_duration_seconds_count\{class="fast",source=""\} 1/,
  );
  assert.match(
    text,
    /csi_sidecar_operations_seconds_count\{driver_name="hostpath\.csi\.k8s\.io",method_name="\/csi\.v1\.Controller\/CreateVolume",grpc_status_code="OK"\} 1/,
  );
  assert.match(text, /function_requests_total\{[^}]*function="provisioner"[^}]*outcome="ok"[^}]*\} 1/);
});
