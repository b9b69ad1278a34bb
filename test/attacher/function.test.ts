// The attacher function over HTTP and as a process: readiness from the CSI
// driver, forwarded VolumeAttachment events in and reports out, 400 for bad
// envelopes, kinds it does not handle, /resync; then the real process
// (FUNCTION=attacher) attaching and detaching, its CSI metrics, and refusing
// to start against the wrong driver.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import request from "supertest";
import { createAttacherApp } from "../../functions/attacher/app.ts";
import { AttacherController } from "../../shared/attacher/runtime/attacher-controller.ts";
import { CsiClient } from "../../shared/csi/client.ts";
import type { FunctionApp } from "../../shared/http/function-app.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { ObjectStore } from "../../shared/kube/object-store.ts";
import { csiNodes, persistentVolumes, volumeAttachments } from "../../shared/kube/resources.ts";
import type { CSINode, PersistentVolume, VolumeAttachment } from "../../shared/kube/types.ts";
import { startWatchedStore } from "../../shared/kube/watched-store.ts";
import { createLogger } from "../../shared/log.ts";
import { createMetricsRegistry } from "../../shared/metrics.ts";
import { startFunctionProcess } from "../helpers/function-process.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";

const driverName = "hostpath.csi.k8s.io";
const node = "sandbox-node";

let sandbox: TestSandbox;
let kube: KubeJsonClient;
let csi: CsiClient;
let app: FunctionApp;

before(async () => {
  sandbox = await startTestSandbox();
  kube = new KubeJsonClient(sandbox.kubeConfig);
  csi = await CsiClient.connect({ endpoint: sandbox.csiEndpoint, timeoutMs: 2000 });
  app = createAttacherApp({
    controller: new AttacherController({ kube, csi, driverName }),
    csi,
    logger: createLogger({ name: "attacher", level: "silent" }),
    metrics: createMetricsRegistry({ defaultMetrics: false }),
  });
});
after(async () => {
  csi.close();
  await kube.close();
  await sandbox.close();
});
beforeEach(async () => {
  await sandbox.admin.reset();
  await sandbox.csi.clearFaults();
  await sandbox.csi.setReady(true);
  for (const v of await sandbox.csi.volumes()) {
    await csi.controllerUnpublishVolume({ volumeId: v.volumeId }).catch(() => undefined);
    await csi.deleteVolume({ volumeId: v.volumeId }).catch(() => undefined);
  }
});

/** A backing volume, its PV and a VolumeAttachment for it; returns the VA as created. */
async function attachmentFor(name: string): Promise<{ va: VolumeAttachment; volumeId: string }> {
  const created = await csi.createVolume({
    name,
    capacityRange: { requiredBytes: 1n << 30n },
    volumeCapabilities: [{ mount: { fsType: "ext4" }, accessMode: { mode: "SINGLE_NODE_WRITER" } }],
  });
  const volumeId = created.volume!.volumeId;
  await kube.create<PersistentVolume>(persistentVolumes, {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name },
    spec: {
      capacity: { storage: "1Gi" },
      accessModes: ["ReadWriteOnce"],
      csi: { driver: driverName, volumeHandle: volumeId, fsType: "ext4" },
    },
  });
  const va = await kube.create<VolumeAttachment>(volumeAttachments, {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name: `va-${name}` },
    spec: { attacher: driverName, nodeName: node, source: { persistentVolumeName: name } },
  });
  return { va, volumeId };
}

async function publishedNodes(volumeId: string): Promise<string[] | undefined> {
  return (await sandbox.csi.volumes()).find((v) => v.volumeId === volumeId)?.publishedNodes;
}

function post(target: FunctionApp | string, body: unknown) {
  return request(target).post("/").set("content-type", "application/json").send(JSON.stringify(body));
}

describe("attacher function over HTTP", () => {
  it("is ready while the driver answers Probe", async () => {
    await request(app).get("/readyz").expect(200);
    await sandbox.csi.setReady(false);
    await request(app).get("/readyz").expect(503);
    await sandbox.csi.setReady(true);
    await request(app).get("/readyz").expect(200);
  });

  it("attaches on a forwarded VolumeAttachment event and answers what it did", async () => {
    const { va, volumeId } = await attachmentFor("http");
    const r = await post(app, { type: "ADDED", object: va });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body.results[0].synced, [
      { object: "volumeattachment va-http", outcome: `attached to node ${node}` },
    ]);
    assert.deepEqual(await publishedNodes(volumeId), [node]);
  });

  it("ignores kinds it does not handle, answers 400 for a bad envelope, runs /resync", async () => {
    const pod = { apiVersion: "v1", kind: "Pod", metadata: { name: "p", namespace: "default" }, spec: {} };
    const ignored = await post(app, { type: "ADDED", object: pod });
    assert.equal(ignored.status, 200);
    assert.match(ignored.body.results[0].ignored, /v1\/Pod is not handled by attacher/);
    await request(app).post("/").set("content-type", "application/json").send("[1,2").expect(400);

    await attachmentFor("resync");
    const r = await request(app).post("/resync").expect(200);
    assert.equal(r.body.function, "attacher");
    assert.deepEqual(
      {
        handler: r.body.result.handler,
        attachments: r.body.result.attachments,
        errors: r.body.result.errors,
      },
      { handler: "csi", attachments: 1, errors: [] },
    );
    const va = await kube.get<VolumeAttachment>(volumeAttachments, "va-resync");
    assert.equal(va.status?.attached, true, "the resync attached what no event announced");
  });
});

describe("attacher with a watched copy of the CSINodes", () => {
  it("takes each attach's node ID from the copy: no CSINode GET; a node the copy lacks is read from the API", async () => {
    const copy = startWatchedStore<CSINode>({
      kubeConfig: sandbox.kubeConfig,
      json: kube,
      resource: csiNodes,
      log: createLogger({ name: "test", level: "silent" }),
    });
    try {
      assert.equal(await copy.whenSynced(10_000), true);
      const controller = new AttacherController({ kube, csi, driverName, csiNodes: () => copy });
      const { va } = await attachmentFor("copied-node");
      await sandbox.admin.resetCounters();
      const [report] = await controller.handleEvent({
        action: "add",
        kind: "VolumeAttachment",
        apiVersion: "storage.k8s.io/v1",
        name: va.metadata.name,
        object: va as unknown as Record<string, unknown>,
      });
      assert.equal(report?.outcome, `attached to node ${node}`);
      const counters = await sandbox.admin.counters();
      assert.equal(counters["get csinodes"] ?? 0, 0, JSON.stringify(counters));

      const empty = { synced: true, store: new ObjectStore<CSINode>() };
      const live = new AttacherController({ kube, csi, driverName, csiNodes: () => empty });
      const { va: other } = await attachmentFor("live-node");
      await sandbox.admin.resetCounters();
      const [again] = await live.handleEvent({
        action: "add",
        kind: "VolumeAttachment",
        apiVersion: "storage.k8s.io/v1",
        name: other.metadata.name,
        object: other as unknown as Record<string, unknown>,
      });
      assert.equal(again?.outcome, `attached to node ${node}`);
      assert.equal((await sandbox.admin.counters())["get csinodes"], 1);
    } finally {
      await copy.stop();
    }
  });
});

describe("attacher function as a process", () => {
  it("attaches and detaches through FUNCTION=attacher, with CSI metrics; refuses the wrong DRIVER_NAME", async () => {
    const env = {
      KUBECONFIG: sandbox.kubeconfigPath,
      CSI_ENDPOINT: sandbox.csiEndpoint,
      DRIVER_NAME: driverName,
    };
    const fn = await startFunctionProcess("attacher", env);
    try {
      const { va, volumeId } = await attachmentFor("proc");
      const attached = await post(fn.url, { type: "ADDED", object: va });
      assert.equal(attached.status, 200, `${JSON.stringify(attached.body)} ${fn.stderr()}`);
      assert.deepEqual(await publishedNodes(volumeId), [node]);

      const deleting = await kube.delete(volumeAttachments, "va-proc");
      assert.ok(deleting);
      const detached = await post(fn.url, { type: "MODIFIED", object: deleting });
      assert.equal(detached.body.results[0].synced[0].outcome, `detached from node ${node}`);
      assert.deepEqual(await publishedNodes(volumeId), []);
      await assert.rejects(kube.get(volumeAttachments, "va-proc"), { code: 404 });

      const metrics = await request(fn.url).get("/metrics").expect(200);
      assert.match(
        metrics.text,
        /csi_sidecar_operations_seconds_count\{[^}]*method_name="\/csi\.v1\.Controller\/ControllerPublishVolume"[^}]*\} 1/,
      );
      assert.match(metrics.text, /method_name="\/csi\.v1\.Controller\/ControllerUnpublishVolume"/);
    } finally {
      assert.equal(await fn.stop(), 0);
    }
    await assert.rejects(
      startFunctionProcess("attacher", { ...env, DRIVER_NAME: "other.csi.example.com" }),
      /DRIVER_NAME is other\.csi\.example\.com but the driver at CSI_ENDPOINT is hostpath\.csi\.k8s\.io/,
    );
  });
});
