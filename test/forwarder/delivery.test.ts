// The forwarder against the sandbox API server, delivering to real HTTP
// receivers that parse every request with shared/events: event types,
// objects, CloudEvent attributes, routes, and the startup replay.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { createKubeClients } from "../../shared/kube/client.ts";
import type { KubeJsonClient } from "../../shared/kube/json-client.ts";
import {
  nodes,
  persistentVolumeClaims,
  persistentVolumes,
  storageClasses,
} from "../../shared/kube/resources.ts";
import type { KubeObject } from "../../shared/kube/types.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";
import {
  keyOf,
  pv,
  pvc,
  type Receiver,
  startReceiver,
  startTestForwarder,
  storageClass,
  waitFor,
  waitForIdle,
} from "./helpers.ts";

let sandbox: TestSandbox;
let kube: KubeJsonClient;

before(async () => {
  sandbox = await startTestSandbox();
  kube = createKubeClients(sandbox.kubeConfig).json;
});

after(async () => {
  await kube.close();
  await sandbox.close();
});

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function eventsFor(receiver: Receiver, key: string) {
  return receiver.delivered().filter((e) => keyOf(e) === key);
}

test("add, update and delete arrive as ApiServerSource CloudEvents the functions' parser accepts", async () => {
  const volumes = await startReceiver();
  const cluster = await startReceiver();
  const forwarder = startTestForwarder({
    kubeConfig: sandbox.kubeConfig,
    routes: [
      { url: volumes.url, kinds: ["PersistentVolumeClaim", "PersistentVolume"] },
      { url: cluster.url, kinds: ["StorageClass", "Node"] },
    ],
  });
  try {
    await forwarder.ready;
    assert.equal(forwarder.stats().synced, true);

    const created = await kube.create(persistentVolumeClaims, pvc("data", "default", { app: "db" }));
    const updated = await kube.replace(persistentVolumeClaims, {
      ...created,
      metadata: { ...created.metadata, labels: { app: "db", tier: "gold" } },
    });
    await kube.delete(persistentVolumeClaims, "data", "default");
    const volume = await kube.create(persistentVolumes, pv("pv-1"));
    const fast = await kube.create(storageClasses, storageClass("fast"));

    await waitFor(
      () => eventsFor(volumes, "PersistentVolumeClaim/default/data").length === 3,
      "claim events",
    );
    await waitFor(() => eventsFor(volumes, "PersistentVolume//pv-1").length === 1, "volume add");
    await waitFor(() => eventsFor(cluster, "StorageClass//fast").length === 1, "class add");
    await waitForIdle(forwarder);

    assert.deepEqual(
      volumes.requests.filter((r) => r.parseError).map((r) => r.parseError),
      [],
      "every request parses",
    );
    const claim = eventsFor(volumes, "PersistentVolumeClaim/default/data");
    assert.deepEqual(
      claim.map((e) => e.action),
      ["add", "update", "delete"],
    );
    assert.deepEqual(claim[0]?.ref, {
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      name: "data",
      namespace: "default",
    });
    assert.equal(claim[0]?.resourceVersion, created.metadata.resourceVersion);
    assert.equal(claim[1]?.resourceVersion, updated.metadata.resourceVersion);
    assert.deepEqual(claim[1]?.object?.metadata.labels, { app: "db", tier: "gold" });
    // delete carries the last state, not the old object
    assert.deepEqual(claim[2]?.object?.metadata.labels, { app: "db", tier: "gold" });
    assert.equal(claim[2]?.object?.metadata.uid, created.metadata.uid);
    for (const e of claim) assert.equal(e.source, sandbox.url);

    const claimRequests = volumes.requests.filter((r) => r.headers["ce-name"] === "data");
    const [addRequest] = claimRequests;
    assert.ok(addRequest);
    assert.equal(addRequest.headers["ce-specversion"], "1.0");
    assert.equal(addRequest.headers["ce-type"], "dev.knative.apiserver.resource.add");
    assert.equal(addRequest.headers["ce-source"], sandbox.url);
    assert.equal(addRequest.headers["ce-subject"], "/apis/v1/namespaces/default/persistentvolumeclaims/data");
    assert.equal(addRequest.headers["ce-kind"], "PersistentVolumeClaim");
    assert.equal(addRequest.headers["ce-apiversion"], "v1");
    assert.equal(addRequest.headers["ce-namespace"], "default");
    assert.equal(addRequest.headers["content-type"], "application/json");
    assert.equal(addRequest.headers.authorization, undefined);
    assert.deepEqual(
      claimRequests.map((r) => r.headers["ce-type"]),
      ["add", "update", "delete"].map((a) => `dev.knative.apiserver.resource.${a}`),
    );
    const ids = claimRequests.map((r) => String(r.headers["ce-id"]));
    for (const id of ids) assert.match(id, UUID);
    assert.equal(new Set(ids).size, 3, "a new id per change");
    assert.deepEqual(JSON.parse(addRequest.body), created, "the body is the object as the API server has it");

    // cluster-scoped: empty namespace segment and extension; no namespace in the parsed ref
    const volumeRequest = volumes.requests.find((r) => r.headers["ce-name"] === "pv-1");
    assert.equal(volumeRequest?.headers["ce-subject"], "/apis/v1/namespaces//persistentvolumes/pv-1");
    assert.equal(volumeRequest?.headers["ce-namespace"], "");
    assert.deepEqual(eventsFor(volumes, "PersistentVolume//pv-1")[0]?.ref, {
      apiVersion: "v1",
      kind: "PersistentVolume",
      name: "pv-1",
    });
    assert.equal(
      eventsFor(volumes, "PersistentVolume//pv-1")[0]?.resourceVersion,
      volume.metadata.resourceVersion,
    );
    const classRequest = cluster.requests.find((r) => r.headers["ce-name"] === "fast");
    assert.equal(
      classRequest?.headers["ce-subject"],
      "/apis/storage.k8s.io/v1/namespaces//storageclasses/fast",
    );
    assert.equal(classRequest?.headers["ce-apiversion"], "storage.k8s.io/v1");
    assert.equal(eventsFor(cluster, "StorageClass//fast")[0]?.resourceVersion, fast.metadata.resourceVersion);

    // routes: each receiver got only its kinds
    assert.deepEqual([...new Set(volumes.delivered().map((e) => e.ref.kind))].sort(), [
      "PersistentVolume",
      "PersistentVolumeClaim",
    ]);
    assert.deepEqual([...new Set(cluster.delivered().map((e) => e.ref.kind))].sort(), [
      "Node",
      "StorageClass",
    ]);
    const stats = forwarder.stats();
    assert.equal(stats.destinations[0]?.delivered, volumes.delivered().length);
    assert.equal(stats.destinations[0]?.failed, 0);
  } finally {
    await forwarder.close();
    await volumes.close();
    await cluster.close();
    await sandbox.admin.reset();
  }
});

test("objects that exist at start are replayed as adds, unless replayExisting is false", async () => {
  const seededNodes = (await kube.list<KubeObject>(nodes)).items.map((n) => n.metadata.name);
  assert.ok(seededNodes.length > 0, "the sandbox seeds its nodes");
  await kube.create(persistentVolumeClaims, pvc("existing"));

  const replay = await startReceiver();
  const quiet = await startReceiver();
  const withReplay = startTestForwarder({
    kubeConfig: sandbox.kubeConfig,
    routes: [{ url: replay.url, kinds: ["PersistentVolumeClaim", "Node"] }],
  });
  const withoutReplay = startTestForwarder({
    kubeConfig: sandbox.kubeConfig,
    routes: [{ url: quiet.url, kinds: ["PersistentVolumeClaim", "Node"] }],
    replayExisting: false,
  });
  try {
    await Promise.all([withReplay.ready, withoutReplay.ready]);
    const expected = [
      ...seededNodes.map((n) => `add Node//${n}`),
      "add PersistentVolumeClaim/default/existing",
    ].sort();
    await waitFor(() => replay.delivered().length === expected.length, "the replayed adds");
    assert.deepEqual(
      replay
        .delivered()
        .map((e) => `${e.action} ${keyOf(e)}`)
        .sort(),
      expected,
    );

    await kube.create(persistentVolumeClaims, pvc("new"));
    await waitFor(() => quiet.delivered().length === 1, "the new claim");
    assert.deepEqual(
      quiet.delivered().map((e) => `${e.action} ${keyOf(e)}`),
      ["add PersistentVolumeClaim/default/new"],
    );
  } finally {
    await Promise.all([withReplay.close(), withoutReplay.close()]);
    await Promise.all([replay.close(), quiet.close()]);
    await sandbox.admin.reset();
  }
});

test("the bearer token is sent when configured", async () => {
  const receiver = await startReceiver();
  const forwarder = startTestForwarder({
    kubeConfig: sandbox.kubeConfig,
    routes: [{ url: receiver.url, kinds: ["PersistentVolumeClaim"] }],
    authToken: "s3cret",
  });
  try {
    await forwarder.ready;
    await kube.create(persistentVolumeClaims, pvc("authed"));
    await waitFor(() => receiver.delivered().length === 1, "the add");
    assert.equal(receiver.requests[0]?.headers.authorization, "Bearer s3cret");
  } finally {
    await forwarder.close();
    await receiver.close();
    await sandbox.admin.reset();
  }
});
