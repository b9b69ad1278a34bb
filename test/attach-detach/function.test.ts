// The attach/detach function over HTTP and as a process: events in,
// VolumeAttachments out, 400 for bad envelopes, /resync.
import assert from "node:assert/strict";
import { after, before, it } from "node:test";
import request from "supertest";
import { createAttachDetachApp } from "../../functions/attach-detach/app.ts";
import { AttachDetachController } from "../../shared/attach-detach/runtime/attach-detach-controller.ts";
import { EventRecorder } from "../../shared/kube/event-recorder.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { volumeAttachments } from "../../shared/kube/resources.ts";
import type { VolumeAttachment } from "../../shared/kube/types.ts";
import { createLogger } from "../../shared/log.ts";
import { createMetricsRegistry } from "../../shared/metrics.ts";
import { startFunctionProcess } from "../helpers/function-process.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";

let sandbox: TestSandbox;
let kube: KubeJsonClient;

before(async () => {
  sandbox = await startTestSandbox();
  kube = new KubeJsonClient(sandbox.kubeConfig);
});
after(async () => {
  await kube.close();
  await sandbox.close();
});

const objects = [
  {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name: "pv-1" },
    spec: {
      accessModes: ["ReadWriteOnce"],
      capacity: { storage: "1Gi" },
      claimRef: { namespace: "default", name: "c", uid: "uid-c" },
      csi: { driver: "hostpath.csi.k8s.io", volumeHandle: "vol-1" },
    },
    status: { phase: "Bound" },
  },
  {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name: "c", namespace: "default", uid: "uid-c" },
    spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } }, volumeName: "pv-1" },
    status: { phase: "Bound" },
  },
];

const pod = {
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: "p", namespace: "default" },
  spec: { nodeName: "sandbox-node", volumes: [{ name: "d", persistentVolumeClaim: { claimName: "c" } }] },
  status: { phase: "Running" },
};

it("a forwarded pod event creates the VolumeAttachment; bad envelopes are 400; /resync answers", async () => {
  await sandbox.admin.seed([...objects, pod]);
  const app = createAttachDetachApp({
    controller: new AttachDetachController({
      kube,
      events: new EventRecorder(kube, {
        component: "attachdetach-controller",
        logger: { warn: () => undefined },
      }),
    }),
    logger: createLogger({ name: "attach-detach", level: "silent" }),
    metrics: createMetricsRegistry({ defaultMetrics: false }),
  });
  const r = await request(app)
    .post("/")
    .set("content-type", "application/json")
    .send(JSON.stringify({ type: "ADDED", object: pod }));
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.match(r.body.results[0].synced[0].outcome, /attaching pv-1/);
  const vas = (await kube.list<VolumeAttachment>(volumeAttachments)).items;
  assert.deepEqual(
    vas.map((v) => [v.spec.nodeName, v.spec.source.persistentVolumeName]),
    [["sandbox-node", "pv-1"]],
  );
  await request(app).post("/").set("content-type", "application/json").send("nope").expect(400);
  const resync = await request(app).post("/resync");
  assert.equal(resync.status, 200);
  assert.ok(resync.body.result.nodes >= 1);
});

it("`FUNCTION=attach-detach npm run serve` serves", async () => {
  const p = await startFunctionProcess("attach-detach", { KUBECONFIG: sandbox.kubeconfigPath });
  try {
    const r = await fetch(`${p.url}/resync`, { method: "POST" });
    assert.equal(r.status, 200);
    // Upstream's forced-detach counter is registered on the process's /metrics.
    const metrics = await (await fetch(`${p.url}/metrics`)).text();
    assert.match(metrics, /# TYPE attach_detach_controller_attachdetach_controller_forced_detaches counter/);
  } finally {
    assert.equal(await p.stop(), 0);
  }
});
