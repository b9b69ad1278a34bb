// Attaching end to end over the sandbox: real HTTP to the API server, real
// gRPC to the sandbox CSI driver (which tracks where each volume is
// published). A PV pointing at a real backing volume and a VolumeAttachment
// made by hand → ControllerPublishVolume → status attached; deletion →
// ControllerUnpublishVolume → the VA goes; the PV's finalizer goes with the
// PV. Also: the trivial handler for a driver without PUBLISH_UNPUBLISH_VOLUME,
// a failing publish (attachError, 503, backoff), a missing publish Secret,
// detach without the CSINode, and the ListVolumes reconciler repairing what
// the driver lost or did without telling.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import request from "supertest";
import { createAttacherApp } from "../../functions/attacher/app.ts";
import { annAttachFailures, annAttachRetryAfter, annNodeId } from "../../shared/attacher/constants.ts";
import { AttacherController } from "../../shared/attacher/runtime/attacher-controller.ts";
import { CsiClient } from "../../shared/csi/client.ts";
import { RetryLaterError } from "../../shared/http/errors.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { csiNodes, persistentVolumes, secrets, volumeAttachments } from "../../shared/kube/resources.ts";
import type { PersistentVolume, VolumeAttachment } from "../../shared/kube/types.ts";
import { createLogger } from "../../shared/log.ts";
import { createMetricsRegistry } from "../../shared/metrics.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";

const driverName = "hostpath.csi.k8s.io";
const finalizer = "external-attacher/hostpath-csi-k8s-io";
const node = "sandbox-node";

interface Cluster {
  sandbox: TestSandbox;
  kube: KubeJsonClient;
  csi: CsiClient;
  attacher: AttacherController;
  close(): Promise<void>;
}

async function startCluster(options: Parameters<typeof startTestSandbox>[0] = {}): Promise<Cluster> {
  const sandbox = await startTestSandbox(options);
  const kube = new KubeJsonClient(sandbox.kubeConfig);
  const csi = await CsiClient.connect({ endpoint: sandbox.csiEndpoint, timeoutMs: 2000 });
  const attacher = new AttacherController({ kube, csi, driverName });
  return {
    sandbox,
    kube,
    csi,
    attacher,
    close: async () => {
      csi.close();
      await kube.close();
      await sandbox.close();
    },
  };
}

/** A real backing volume in the driver, and a static CSI PV recording it. */
async function volume(
  c: Cluster,
  name: string,
  extra: Partial<PersistentVolume["spec"]["csi"]> = {},
): Promise<PersistentVolume> {
  const created = await c.csi.createVolume({
    name,
    capacityRange: { requiredBytes: 1n << 30n },
    volumeCapabilities: [{ mount: { fsType: "ext4" }, accessMode: { mode: "SINGLE_NODE_WRITER" } }],
  });
  return c.kube.create<PersistentVolume>(persistentVolumes, {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name },
    spec: {
      capacity: { storage: "1Gi" },
      accessModes: ["ReadWriteOnce"],
      persistentVolumeReclaimPolicy: "Retain",
      mountOptions: ["noatime"],
      csi: {
        driver: driverName,
        volumeHandle: created.volume!.volumeId,
        fsType: "ext4",
        volumeAttributes: { purpose: "e2e" },
        ...extra,
      },
    },
  });
}

function attachment(name: string, pvName: string, attacher = driverName): VolumeAttachment {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name },
    spec: { attacher, nodeName: node, source: { persistentVolumeName: pvName } },
  };
}

const vaEvent = (
  name: string,
  action: "add" | "update" | "delete" = "update",
  object?: VolumeAttachment,
) => ({
  action,
  kind: "VolumeAttachment",
  apiVersion: "storage.k8s.io/v1",
  name,
  ...(object ? { object: object as unknown as Record<string, unknown> } : {}),
});
const pvEvent = (name: string) => ({
  action: "update" as const,
  kind: "PersistentVolume",
  apiVersion: "v1",
  name,
});

async function getVa(c: Cluster, name: string): Promise<VolumeAttachment | undefined> {
  return c.kube.get<VolumeAttachment>(volumeAttachments, name).catch(() => undefined);
}

async function publishedNodes(c: Cluster, volumeId: string): Promise<string[] | undefined> {
  return (await c.sandbox.csi.volumes()).find((v) => v.volumeId === volumeId)?.publishedNodes;
}

async function writeCounters(c: Cluster): Promise<Record<string, number>> {
  const all = await c.sandbox.admin.counters();
  return Object.fromEntries(
    Object.entries(all).filter(([k]) => !k.startsWith("get ") && !k.startsWith("list ")),
  );
}

async function resetCluster(c: Cluster): Promise<void> {
  await c.sandbox.admin.reset();
  await c.sandbox.csi.clearFaults();
  for (const v of await c.sandbox.csi.volumes()) {
    await c.csi.controllerUnpublishVolume({ volumeId: v.volumeId }).catch(() => undefined);
    await c.csi.deleteVolume({ volumeId: v.volumeId }).catch(() => undefined);
  }
}

describe("CSI handler over the sandbox", () => {
  let c: Cluster;
  before(async () => {
    c = await startCluster();
  });
  after(() => c.close());
  beforeEach(() => resetCluster(c));

  it("attach → ControllerPublish → attached with metadata; delete → unpublish → gone; PV finalizer goes with the PV", async () => {
    const pv = await volume(c, "pv-a");
    const volumeId = pv.spec.csi!.volumeHandle;
    await c.kube.create(volumeAttachments, attachment("va-a", "pv-a"));

    const [attached] = await c.attacher.handleEvent(vaEvent("va-a", "add"));
    assert.equal(attached?.outcome, `attached to node ${node}`);
    assert.deepEqual(await publishedNodes(c, volumeId), [node]);
    const va = (await getVa(c, "va-a"))!;
    assert.equal(va.status?.attached, true);
    assert.match(va.status?.attachmentMetadata?.volumePath ?? "", new RegExp(volumeId));
    assert.equal(va.status?.attachError, undefined);
    assert.deepEqual(va.metadata.finalizers, [finalizer]);
    assert.equal(va.metadata.annotations?.[annNodeId], node);
    const protectedPv = await c.kube.get<PersistentVolume>(persistentVolumes, "pv-a");
    assert.deepEqual(protectedPv.metadata.finalizers, [finalizer]);

    // A duplicate event writes nothing and calls nothing.
    const writes = await writeCounters(c);
    const publishes = (await c.sandbox.csi.stats()).calls.ControllerPublishVolume;
    const [again] = await c.attacher.handleEvent(vaEvent("va-a"));
    assert.equal(again?.outcome, "already attached");
    assert.deepEqual(await writeCounters(c), writes);
    assert.equal((await c.sandbox.csi.stats()).calls.ControllerPublishVolume, publishes);

    // Deleting: the finalizer holds the VA until the volume is unpublished.
    const held = await c.kube.delete(volumeAttachments, "va-a");
    assert.ok(held?.metadata.deletionTimestamp);
    const [detached] = await c.attacher.handleEvent(vaEvent("va-a"));
    assert.equal(detached?.outcome, `detached from node ${node}`);
    assert.deepEqual(await publishedNodes(c, volumeId), []);
    assert.equal(await getVa(c, "va-a"), undefined, "the VA is gone once our finalizer is");

    // The VA's DELETED event looks at the PV: not being deleted, so the finalizer stays.
    const [pvCheck] = await c.attacher.handleEvent(vaEvent("va-a", "delete", va));
    assert.equal(pvCheck?.outcome, "not being deleted");
    assert.deepEqual((await c.kube.get<PersistentVolume>(persistentVolumes, "pv-a")).metadata.finalizers, [
      finalizer,
    ]);

    // PV events that show no deletion are decided from the event alone.
    await c.sandbox.admin.resetCounters();
    const [skipped] = await c.attacher.handleEvent({ ...pvEvent("pv-a"), object: protectedPv });
    assert.equal(skipped?.outcome, "not being deleted with the attacher finalizer");
    assert.deepEqual(await c.sandbox.admin.counters(), {}, "not even a read");

    // Deleting the PV later: nothing references it, so the attacher lets it go.
    const dying = await c.kube.delete(persistentVolumes, "pv-a");
    assert.ok(dying?.metadata.deletionTimestamp);
    const [released] = await c.attacher.handleEvent({ ...pvEvent("pv-a"), object: dying });
    assert.equal(released?.outcome, "removed the attacher finalizer");
    await assert.rejects(c.kube.get(persistentVolumes, "pv-a"), { code: 404 });
  });

  it("a PV deleted while attached keeps its finalizer until the detach, then goes with it", async () => {
    await volume(c, "pv-b");
    await c.kube.create(volumeAttachments, attachment("va-b", "pv-b"));
    await c.attacher.syncAttachment("va-b");
    await c.kube.delete(persistentVolumes, "pv-b");
    const [kept] = await c.attacher.handleEvent(pvEvent("pv-b"));
    assert.equal(kept?.outcome, "still needed by VolumeAttachment va-b");
    // A new attachment of a dying PV is refused, with upstream's text.
    await c.kube.create(volumeAttachments, attachment("va-b2", "pv-b"));
    await assert.rejects(c.attacher.syncAttachment("va-b2"), RetryLaterError);
    assert.equal(
      (await getVa(c, "va-b2"))?.status?.attachError?.message,
      'PersistentVolume "pv-b" is marked for deletion',
    );
    await c.kube.delete(volumeAttachments, "va-b2");
    await c.attacher.syncAttachment("va-b2");

    await c.kube.delete(volumeAttachments, "va-b");
    const [detached] = await c.attacher.handleEvent(vaEvent("va-b"));
    assert.match(
      detached?.outcome ?? "",
      /detached from node sandbox-node; volume pv-b: removed the attacher finalizer/,
    );
    await assert.rejects(c.kube.get(persistentVolumes, "pv-b"), { code: 404 });
  });

  it("an injected publish failure: attachError with the gRPC code, 503, backoff; then the retry attaches and clears both", async () => {
    const pv = await volume(c, "pv-f");
    await c.kube.create(volumeAttachments, attachment("va-f", "pv-f"));
    const app = createAttacherApp({
      controller: c.attacher,
      csi: c.csi,
      logger: createLogger({ name: "attacher", level: "silent" }),
      metrics: createMetricsRegistry({ defaultMetrics: false }),
    });
    await c.sandbox.csi.setFaults({
      errorProbability: 1,
      errorCodes: ["INTERNAL"],
      methods: ["ControllerPublishVolume"],
    });
    const va = (await getVa(c, "va-f"))!;
    const r = await request(app)
      .post("/")
      .set("content-type", "application/json")
      .send(JSON.stringify({ type: "ADDED", object: va }));
    assert.equal(r.status, 503, JSON.stringify(r.body));
    assert.equal(r.headers["retry-after"], "1");
    const failed = (await getVa(c, "va-f"))!;
    assert.equal(failed.status?.attached, false);
    assert.match(failed.status?.attachError?.message ?? "", /^rpc error: code = Internal desc = /);
    assert.equal(failed.status?.attachError?.errorCode, 13);
    assert.ok(failed.status?.attachError?.time);
    assert.equal(failed.metadata.annotations?.[annAttachFailures], "1");
    assert.deepEqual(failed.metadata.finalizers, [finalizer], "the finalizer went on before the publish");
    assert.deepEqual(await publishedNodes(c, pv.spec.csi!.volumeHandle), []);

    // The status write is an event of its own: it finds the attachment backing off.
    await c.sandbox.csi.clearFaults();
    const [waiting] = await c.attacher.handleEvent(vaEvent("va-f"));
    assert.match(waiting?.outcome ?? "", /^backing off until /);

    const later = new AttacherController({
      kube: c.kube,
      csi: c.csi,
      driverName,
      now: () => new Date(Date.now() + 5_000),
    });
    const [attached] = await later.handleEvent(vaEvent("va-f"));
    assert.equal(attached?.outcome, `attached to node ${node}`);
    const done = (await getVa(c, "va-f"))!;
    assert.equal(done.status?.attached, true);
    assert.equal(done.status?.attachError, undefined);
    assert.equal(done.metadata.annotations?.[annAttachFailures], undefined);
    assert.equal(done.metadata.annotations?.[annAttachRetryAfter], undefined);
  });

  it("a missing controllerPublishSecretRef Secret is an attach error until the Secret exists", async () => {
    await volume(c, "pv-s", { controllerPublishSecretRef: { name: "creds", namespace: "default" } });
    await c.kube.create(volumeAttachments, attachment("va-s", "pv-s"));
    await assert.rejects(c.attacher.syncAttachment("va-s"), RetryLaterError);
    assert.equal(
      (await getVa(c, "va-s"))?.status?.attachError?.message,
      'failed to load secret "default/creds": secrets "creds" not found',
    );
    await c.kube.create(secrets, {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "creds", namespace: "default" },
      data: { token: Buffer.from("t0ps3cret").toString("base64") },
    });
    const later = new AttacherController({
      kube: c.kube,
      csi: c.csi,
      driverName,
      now: () => new Date(Date.now() + 5_000),
    });
    assert.equal((await later.syncAttachment("va-s")).outcome, `attached to node ${node}`);
  });

  it("detach works after the node's CSINode is gone, through the node id recorded at attach", async () => {
    const pv = await volume(c, "pv-n");
    await c.kube.create(volumeAttachments, attachment("va-n", "pv-n"));
    await c.attacher.syncAttachment("va-n");
    await c.kube.delete(csiNodes, node);
    await c.kube.delete(volumeAttachments, "va-n");
    assert.equal((await c.attacher.syncAttachment("va-n")).outcome, `detached from node ${node}`);
    assert.deepEqual(await publishedNodes(c, pv.spec.csi!.volumeHandle), []);
    assert.equal(await getVa(c, "va-n"), undefined);
  });

  it("ignores other drivers' attachments, from the event alone", async () => {
    await volume(c, "pv-o");
    const other = attachment("va-o", "pv-o", "other.csi.example.com");
    await c.kube.create(volumeAttachments, other);
    await c.sandbox.admin.resetCounters();
    const [r] = await c.attacher.handleEvent(vaEvent("va-o", "add", other));
    assert.equal(r?.outcome, `attacher is other.csi.example.com, not ${driverName}`);
    assert.deepEqual(await c.sandbox.admin.counters(), {}, "not even a read");
    const resync = await c.attacher.resync();
    assert.equal(resync.attachments, 0);
    assert.equal((await getVa(c, "va-o"))?.status?.attached, false);
  });

  it("the ListVolumes reconciler re-publishes a volume the driver lost and completes one it published silently", async () => {
    const lost = await volume(c, "pv-lost");
    await c.kube.create(volumeAttachments, attachment("va-lost", "pv-lost"));
    await c.attacher.syncAttachment("va-lost");
    // The driver loses the publish behind Kubernetes' back; status still says attached.
    await c.csi.controllerUnpublishVolume({ volumeId: lost.spec.csi!.volumeHandle, nodeId: node });
    assert.deepEqual(await publishedNodes(c, lost.spec.csi!.volumeHandle), []);

    // A publish that timed out after the driver did the work: error recorded, backing off.
    const silent = await volume(c, "pv-silent");
    await c.kube.create(volumeAttachments, attachment("va-silent", "pv-silent"));
    await c.sandbox.csi.setFaults({
      errorProbability: 1,
      errorCodes: ["DEADLINE_EXCEEDED"],
      methods: ["ControllerPublishVolume"],
      afterProbability: 1,
    });
    await assert.rejects(c.attacher.syncAttachment("va-silent"), RetryLaterError);
    await c.sandbox.csi.clearFaults();
    assert.deepEqual(await publishedNodes(c, silent.spec.csi!.volumeHandle), [node]);
    assert.equal((await getVa(c, "va-silent"))?.status?.attached, false);

    const report = await c.attacher.resync();
    assert.deepEqual(report.errors, []);
    assert.deepEqual([...report.reconciled].sort(), ["va-lost", "va-silent"]);
    assert.deepEqual(await publishedNodes(c, lost.spec.csi!.volumeHandle), [node]);
    assert.equal((await getVa(c, "va-lost"))?.status?.attached, true);
    const completed = (await getVa(c, "va-silent"))!;
    assert.equal(completed.status?.attached, true);
    assert.equal(completed.status?.attachError, undefined);

    const quiet = await c.attacher.resync();
    assert.deepEqual(quiet.reconciled, [], "a second pass finds nothing to repair");
  });
});

describe("trivial handler over a sandbox without PUBLISH_UNPUBLISH_VOLUME", () => {
  let c: Cluster;
  before(async () => {
    c = await startCluster({ csi: { controllerCapabilities: ["CREATE_DELETE_VOLUME", "LIST_VOLUMES"] } });
  });
  after(() => c.close());
  beforeEach(() => resetCluster(c));

  it("marks the attachment attached without a publish or a finalizer; deleting it is instant", async () => {
    assert.equal((await c.attacher.handler()).kind, "trivial");
    const pv = await volume(c, "pv-t");
    await c.kube.create(volumeAttachments, attachment("va-t", "pv-t"));
    const [r] = await c.attacher.handleEvent(vaEvent("va-t", "add"));
    assert.equal(r?.outcome, "marked attached (the driver does not publish volumes)");
    const va = (await getVa(c, "va-t"))!;
    assert.deepEqual(va.status, { attached: true });
    assert.deepEqual(va.metadata.finalizers ?? [], []);
    assert.deepEqual(await publishedNodes(c, pv.spec.csi!.volumeHandle), []);
    assert.equal((await c.sandbox.csi.stats()).calls.ControllerPublishVolume ?? 0, 0);
    assert.deepEqual(
      (await c.kube.get<PersistentVolume>(persistentVolumes, "pv-t")).metadata.finalizers ?? [],
      [],
    );
    const [pvReport] = await c.attacher.handleEvent(pvEvent("pv-t"));
    assert.equal(pvReport?.outcome, "the trivial handler keeps no PV finalizer");

    assert.equal(await c.kube.delete(volumeAttachments, "va-t"), undefined, "no finalizer holds it");
    const resync = await c.attacher.resync();
    assert.deepEqual(resync, { handler: "trivial", attachments: 0, volumes: 0, reconciled: [], errors: [] });
  });
});
