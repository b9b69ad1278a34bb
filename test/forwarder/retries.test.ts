// At-least-once delivery against receivers that fail: retries with backoff
// and the same ce-id on 503, 500 and transport errors, Retry-After, no retry
// on 400, a bounded number of 500s, and a destination that is down not
// holding up another one.
import assert from "node:assert/strict";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import { createKubeClients } from "../../shared/kube/client.ts";
import type { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { persistentVolumeClaims } from "../../shared/kube/resources.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";
import {
  freePort,
  keyOf,
  pvc,
  type Received,
  startReceiver,
  startTestForwarder,
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

const claimRoute = (url: string) => [{ url, kinds: ["PersistentVolumeClaim"] }];

function gaps(requests: Received[]): number[] {
  return requests.slice(1).map((r, i) => r.at - (requests[i]?.at ?? 0));
}

test("503, 500 and a cut connection are retried with backoff, every attempt with the same ce-id", async () => {
  const failures = new Map<string, Array<"503" | "500" | "cut">>([
    ["five-oh-three", ["503", "503", "503"]],
    ["five-hundred", ["500"]],
    ["cut", ["cut", "cut"]],
  ]);
  const receiver = await startReceiver((req) => {
    const next = failures.get(req.event?.ref.name ?? "")?.shift();
    if (next === "cut") return { destroy: true };
    return next === undefined ? {} : { status: Number(next) };
  });
  const forwarder = startTestForwarder({
    kubeConfig: sandbox.kubeConfig,
    routes: claimRoute(receiver.url),
    retry: { baseMs: 40, maxMs: 1000 },
  });
  try {
    await forwarder.ready;
    for (const name of failures.keys()) await kube.create(persistentVolumeClaims, pvc(name));
    await waitFor(() => receiver.delivered().length === 3, "three deliveries");
    await waitForIdle(forwarder);

    const attempts = (name: string) => receiver.requests.filter((r) => r.event?.ref.name === name);
    assert.equal(attempts("five-oh-three").length, 4);
    assert.equal(attempts("five-hundred").length, 2);
    assert.equal(attempts("cut").length, 3);
    for (const name of failures.keys()) {
      const ids = new Set(attempts(name).map((r) => r.headers["ce-id"]));
      assert.equal(ids.size, 1, `${name}: one ce-id across retries`);
      assert.equal(new Set(attempts(name).map((r) => r.body)).size, 1, `${name}: the same body`);
    }
    // Equal jitter: the n-th wait is at least half of baseMs * 2^(n-1): 20, 40, 80 ms.
    // (Only lower bounds: a loaded machine stretches waits; growth is a unit test.)
    const waits = gaps(attempts("five-oh-three"));
    assert.ok(waits[0]! >= 18, `first wait ${waits[0]}`);
    assert.ok(waits[1]! >= 38, `second wait ${waits[1]}`);
    assert.ok(waits[2]! >= 78, `third wait ${waits[2]}`);

    const [stats] = forwarder.stats().destinations;
    assert.equal(stats?.delivered, 3);
    assert.equal(stats?.retried, 6);
    assert.equal(stats?.failed, 0);
  } finally {
    await forwarder.close();
    await receiver.close();
    await sandbox.admin.reset();
  }
});

test("a refused connection is retried until the receiver comes up", async () => {
  const port = await freePort();
  const forwarder = startTestForwarder({
    kubeConfig: sandbox.kubeConfig,
    routes: claimRoute(`http://127.0.0.1:${port}/`),
  });
  let receiver: Awaited<ReturnType<typeof startReceiver>> | undefined;
  try {
    await forwarder.ready;
    await kube.create(persistentVolumeClaims, pvc("early"));
    await waitFor(() => (forwarder.stats().destinations[0]?.retried ?? 0) >= 3, "a few refused attempts");
    receiver = await startReceiver(undefined, port);
    const up = receiver;
    await waitFor(() => up.delivered().length === 1, "delivery once the receiver is up", 5_000);
    assert.equal(keyOf(up.delivered()[0]), "PersistentVolumeClaim/default/early");
  } finally {
    await forwarder.close();
    await receiver?.close();
    await sandbox.admin.reset();
  }
});

test("an answer slower than the request timeout is sent again; a 2xx whose body stalls is delivered and its connection let go", async () => {
  // The first attempt of "slow" gets no headers for 5 s; "stalled" gets a 200 whose body never ends (the
  // status is the receiver's answer, so that is a delivery, but the attempt must not hang on the body).
  const firsts = new Set(["slow", "stalled"]);
  const stalled: ServerResponse[] = [];
  const attempts = new Map<string, number>();
  const server = createServer((req, res) => {
    const name = String(req.headers["ce-name"]);
    attempts.set(name, (attempts.get(name) ?? 0) + 1);
    req.resume();
    req.on("end", () => {
      if (!firsts.delete(name)) return void res.writeHead(200).end();
      if (name === "stalled") {
        res.writeHead(200, { "content-length": "100" });
        res.write("{");
        stalled.push(res);
      } else setTimeout(() => res.writeHead(200).end(), 5_000).unref();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  const forwarder = startTestForwarder({
    kubeConfig: sandbox.kubeConfig,
    routes: claimRoute(url),
    requestTimeoutMs: 300,
  });
  try {
    await forwarder.ready;
    const started = Date.now();
    await kube.create(persistentVolumeClaims, pvc("slow"));
    await kube.create(persistentVolumeClaims, pvc("stalled"));
    await waitFor(() => forwarder.stats().destinations[0]?.delivered === 2, "both delivered", 4_000);
    assert.ok(Date.now() - started < 4_000, "neither waited for the slow answer");
    assert.ok((attempts.get("slow") ?? 0) >= 2, "slow: sent again after the timeout");
    assert.ok((attempts.get("stalled") ?? 0) >= 1);
    assert.equal(stalled.length, 1);
    await waitFor(
      () => stalled[0]?.socket?.destroyed !== false,
      "the stalled connection closed by the forwarder",
      2_000,
    );
  } finally {
    await forwarder.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await sandbox.admin.reset();
  }
});

test("Retry-After is a floor for the next attempt", async () => {
  let first = true;
  const receiver = await startReceiver(() => {
    if (!first) return {};
    first = false;
    return { status: 429, headers: { "retry-after": "1" } };
  });
  const forwarder = startTestForwarder({
    kubeConfig: sandbox.kubeConfig,
    routes: claimRoute(receiver.url),
    retry: { baseMs: 10, maxMs: 20 },
  });
  try {
    await forwarder.ready;
    await kube.create(persistentVolumeClaims, pvc("throttled"));
    await waitFor(() => receiver.delivered().length === 1, "the delivery after Retry-After", 5_000);
    const [wait] = gaps(receiver.requests);
    assert.ok(wait! >= 950, `waited ${wait} ms, Retry-After said 1 s`);
  } finally {
    await forwarder.close();
    await receiver.close();
    await sandbox.admin.reset();
  }
});

test("400 is not retried, and the object's next change still goes out", async () => {
  const receiver = await startReceiver((req) => (req.event?.action === "add" ? { status: 400 } : {}));
  const forwarder = startTestForwarder({ kubeConfig: sandbox.kubeConfig, routes: claimRoute(receiver.url) });
  try {
    await forwarder.ready;
    const created = await kube.create(persistentVolumeClaims, pvc("refused"));
    await waitFor(() => receiver.requests.length === 1, "the refused add");
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(receiver.requests.length, 1, "not retried");
    assert.equal(forwarder.stats().destinations[0]?.failed, 1);

    await kube.replace(persistentVolumeClaims, {
      ...created,
      metadata: { ...created.metadata, labels: { again: "yes" } },
    });
    await waitFor(() => receiver.delivered().length === 1, "the update");
    assert.equal(receiver.delivered()[0]?.action, "update");
  } finally {
    await forwarder.close();
    await receiver.close();
    await sandbox.admin.reset();
  }
});

test("a receiver that keeps answering 500 is given up on after maxServerErrorAttempts", async () => {
  const receiver = await startReceiver(() => ({ status: 500 }));
  const forwarder = startTestForwarder({
    kubeConfig: sandbox.kubeConfig,
    routes: claimRoute(receiver.url),
    retry: { maxServerErrorAttempts: 3 },
  });
  try {
    await forwarder.ready;
    await kube.create(persistentVolumeClaims, pvc("broken"));
    await waitFor(() => forwarder.stats().destinations[0]?.failed === 1, "giving up");
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(receiver.requests.length, 3);
    assert.equal(forwarder.stats().destinations[0]?.retried, 2);
  } finally {
    await forwarder.close();
    await receiver.close();
    await sandbox.admin.reset();
  }
});

test("a destination that is down neither blocks another nor grows past its queue cap", async () => {
  const downPort = await freePort();
  const healthy = await startReceiver();
  const forwarder = startTestForwarder({
    kubeConfig: sandbox.kubeConfig,
    routes: [
      { url: `http://127.0.0.1:${downPort}/`, kinds: ["PersistentVolumeClaim"] },
      { url: healthy.url, kinds: ["PersistentVolumeClaim"] },
    ],
    concurrency: 2,
    maxQueue: 5,
    retry: { baseMs: 50, maxMs: 500 },
  });
  try {
    await forwarder.ready;
    for (let i = 0; i < 20; i++) await kube.create(persistentVolumeClaims, pvc(`claim-${i}`));
    await waitFor(() => healthy.delivered().length === 20, "all 20 at the healthy receiver");
    await waitFor(() => forwarder.stats().destinations[1]?.delivered === 20, "the healthy one's count");
    const [down, up] = forwarder.stats().destinations;
    assert.equal(down?.inFlight, 2, "the down destination has its concurrency busy retrying");
    assert.equal(down?.waiting, 5, "and a full queue");
    assert.equal(down?.dropped, 13, "the rest was dropped, not buffered");
    assert.equal(up?.delivered, 20);
    assert.equal(up?.dropped, 0);
  } finally {
    await forwarder.close();
    await healthy.close();
    await sandbox.admin.reset();
  }
});
