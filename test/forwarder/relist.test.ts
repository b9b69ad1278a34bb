// The forwarder's watches surviving trouble: cut off from the API server
// while the history it would resume from is compacted away (410 Gone ->
// relist, changes made meanwhile still arrive), and an API server whose
// lists and watches fail for a while (restart with backoff, ready only once
// synced).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { createKubeClients } from "../../shared/kube/client.ts";
import type { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { persistentVolumeClaims } from "../../shared/kube/resources.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";
import { keyOf, pvc, startCuttableProxy, startReceiver, startTestForwarder, waitFor } from "./helpers.ts";

// No sandbox reset between these tests (they use distinct names): a reset
// while a watch relayed by the proxy is still winding down makes the sandbox
// write to an ended watch response (its reset() ends watches without
// unsubscribing them).
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

const summary = (events: ReturnType<Awaited<ReturnType<typeof startReceiver>>["delivered"]>) =>
  events.map((e) => `${e.action} ${keyOf(e)}`);

test("changes made while the watch was cut off and compacted away arrive after the relist", async () => {
  const proxy = await startCuttableProxy(sandbox.url);
  const receiver = await startReceiver();
  const forwarder = startTestForwarder({
    kubeConfig: proxy.kubeConfig,
    routes: [{ url: receiver.url, kinds: ["PersistentVolumeClaim"] }],
  });
  try {
    await forwarder.ready;
    const a = await kube.create(persistentVolumeClaims, pvc("a"));
    await kube.create(persistentVolumeClaims, pvc("b", "default", { keep: "last-state" }));
    const c = await kube.create(persistentVolumeClaims, pvc("c"));
    await waitFor(() => receiver.delivered().length === 3, "three adds");

    proxy.cut();
    await waitFor(
      () => (forwarder.stats().kinds.PersistentVolumeClaim?.restarts ?? 0) >= 1,
      "a restart attempt",
    );
    const listsBefore = (await sandbox.admin.counters())["list persistentvolumeclaims"] ?? 0;

    const a2 = await kube.replace(persistentVolumeClaims, {
      ...a,
      metadata: { ...a.metadata, labels: { changed: "1" } },
    });
    const a3 = await kube.replace(persistentVolumeClaims, {
      ...a2,
      metadata: { ...a2.metadata, labels: { changed: "2" } },
    });
    await kube.delete(persistentVolumeClaims, "b", "default");
    const d = await kube.create(persistentVolumeClaims, pvc("d"));
    await sandbox.admin.compact();
    proxy.restore();

    await waitFor(() => receiver.delivered().length === 6, "update a, delete b, add d");
    assert.deepEqual(summary(receiver.delivered().slice(3)).sort(), [
      "add PersistentVolumeClaim/default/d",
      "delete PersistentVolumeClaim/default/b",
      "update PersistentVolumeClaim/default/a",
    ]);
    const byName = (name: string) =>
      receiver
        .delivered()
        .slice(3)
        .find((e) => e.ref.name === name);
    assert.equal(byName("a")?.resourceVersion, a3.metadata.resourceVersion, "a folded into its latest state");
    assert.deepEqual(byName("b")?.object?.metadata.labels, { keep: "last-state" }, "b's last known state");
    assert.equal(byName("d")?.resourceVersion, d.metadata.resourceVersion);
    const listsAfter = (await sandbox.admin.counters())["list persistentvolumeclaims"] ?? 0;
    assert.ok(listsAfter > listsBefore, "the watch could not resume (410): it relisted");

    // And the new watch carries on; c, unchanged through the relist, was not sent again.
    await kube.replace(persistentVolumeClaims, {
      ...c,
      metadata: { ...c.metadata, labels: { after: "relist" } },
    });
    await waitFor(() => receiver.delivered().length === 7, "the change after the relist");
    assert.deepEqual(summary(receiver.delivered().filter((e) => e.ref.name === "c")), [
      "add PersistentVolumeClaim/default/c",
      "update PersistentVolumeClaim/default/c",
    ]);
    assert.deepEqual(
      receiver.requests.filter((r) => r.parseError),
      [],
    );
  } finally {
    await forwarder.close();
    await receiver.close();
    await proxy.close();
  }
});

test("failing lists and watches are restarted with backoff; ready waits for the first sync", async () => {
  const proxy = await startCuttableProxy(sandbox.url);
  const receiver = await startReceiver();
  await sandbox.admin.setFaults({
    errorProbability: 1,
    errorCode: 500,
    verbs: ["list"],
    resources: ["nodes"],
  });
  const forwarder = startTestForwarder({
    kubeConfig: proxy.kubeConfig,
    routes: [{ url: receiver.url, kinds: ["PersistentVolumeClaim", "Node"] }],
  });
  let ready = false;
  void forwarder.ready.then(() => {
    ready = true;
  });
  const restarts = (kind: string) => forwarder.stats().kinds[kind]?.restarts ?? 0;
  try {
    await waitFor(() => restarts("Node") >= 2, "node list restarts");
    assert.equal(ready, false);
    assert.equal(forwarder.stats().synced, false);
    assert.equal(forwarder.stats().kinds.PersistentVolumeClaim?.synced, true, "other kinds are unaffected");
    await kube.create(persistentVolumeClaims, pvc("meanwhile"));
    await waitFor(
      () => receiver.delivered().some((e) => e.ref.name === "meanwhile"),
      "claims flow meanwhile",
    );

    await sandbox.admin.clearFaults();
    await forwarder.ready;
    assert.equal(forwarder.stats().synced, true);
    await waitFor(
      () => receiver.delivered().some((e) => e.ref.kind === "Node"),
      "the node replayed once listed",
    );

    // Drop the connections while watches answer 500: the reconnects fail and are retried.
    await sandbox.admin.setFaults({
      errorProbability: 1,
      errorCode: 500,
      verbs: ["watch"],
      resources: ["persistentvolumeclaims"],
    });
    const before = restarts("PersistentVolumeClaim");
    proxy.cut();
    proxy.restore();
    await waitFor(() => restarts("PersistentVolumeClaim") >= before + 2, "watch restarts");
    await kube.create(persistentVolumeClaims, pvc("during-faults"));
    await sandbox.admin.clearFaults();
    await waitFor(
      () => receiver.delivered().some((e) => e.ref.name === "during-faults"),
      "the change made while watches failed",
    );
  } finally {
    await sandbox.admin.clearFaults();
    await forwarder.close();
    await receiver.close();
    await proxy.close();
  }
});
