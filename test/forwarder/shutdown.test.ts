// close(): stop watching, deliver what is queued and in flight within the
// grace period, drop (and count) the rest, and never hang.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { createKubeClients } from "../../shared/kube/client.ts";
import type { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { persistentVolumeClaims } from "../../shared/kube/resources.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";
import { freePort, pvc, startReceiver, startTestForwarder, waitFor } from "./helpers.ts";

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

test("close() flushes in-flight and queued deliveries, then nothing more is sent", async () => {
  let release: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  const receiver = await startReceiver(async () => {
    await gate;
    return {};
  });
  const forwarder = startTestForwarder({
    kubeConfig: sandbox.kubeConfig,
    routes: [{ url: receiver.url, kinds: ["PersistentVolumeClaim"] }],
    concurrency: 1,
  });
  try {
    await forwarder.ready;
    for (const name of ["one", "two", "three"]) await kube.create(persistentVolumeClaims, pvc(name));
    await waitFor(() => receiver.requests.length === 1, "the first delivery under way");
    await waitFor(() => forwarder.stats().destinations[0]?.waiting === 2, "two queued");
    const closing = forwarder.close();
    setTimeout(release, 50);
    await closing;
    assert.equal(receiver.delivered().length, 3, "all three delivered before close() resolved");
    assert.equal(forwarder.stats().destinations[0]?.delivered, 3);
    assert.equal(forwarder.stats().destinations[0]?.dropped, 0);

    await kube.create(persistentVolumeClaims, pvc("after-close"));
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(receiver.requests.length, 3, "no watching after close()");
    await forwarder.close(); // idempotent
  } finally {
    release();
    await forwarder.close();
    await receiver.close();
    await sandbox.admin.reset();
  }
});

test("close() is bounded by the grace period when a destination is down, and counts what it drops", async () => {
  const port = await freePort();
  const forwarder = startTestForwarder({
    kubeConfig: sandbox.kubeConfig,
    routes: [{ url: `http://127.0.0.1:${port}/`, kinds: ["PersistentVolumeClaim"] }],
    concurrency: 1,
    shutdownGraceMs: 300,
  });
  await forwarder.ready;
  for (const name of ["lost-1", "lost-2"]) await kube.create(persistentVolumeClaims, pvc(name));
  await waitFor(
    () => (forwarder.stats().destinations[0]?.retried ?? 0) >= 2,
    "retries against the down destination",
  );
  const started = Date.now();
  await forwarder.close();
  const took = Date.now() - started;
  assert.ok(took >= 250 && took < 5_000, `close() took ${took} ms with a 300 ms grace period`);
  const [stats] = forwarder.stats().destinations;
  assert.equal(stats?.dropped, 2, "the in-flight and the queued change, counted as dropped");
  assert.equal(stats?.inFlight, 0);
  assert.equal(stats?.waiting, 0);
  await sandbox.admin.reset();
});

test("ready rejects when the forwarder is closed before it synced", async () => {
  await sandbox.admin.setFaults({ errorProbability: 1, errorCode: 503, verbs: ["list"] });
  const receiver = await startReceiver();
  const forwarder = startTestForwarder({
    kubeConfig: sandbox.kubeConfig,
    routes: [{ url: receiver.url, kinds: ["PersistentVolumeClaim"] }],
  });
  try {
    await waitFor(() => (forwarder.stats().kinds.PersistentVolumeClaim?.restarts ?? 0) >= 1, "a failed list");
    await forwarder.close();
    await assert.rejects(forwarder.ready, /closed before its informers synced/);
  } finally {
    await sandbox.admin.clearFaults();
    await receiver.close();
  }
});
