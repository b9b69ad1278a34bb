// Batches: when every delivery slot of a destination is busy, the changes
// that pile up go out together as one CloudEvents JSON batch; each object's
// changes still arrive in order, one delivery at a time, and a batch the
// receiver refuses is sent again one change at a time.
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import { type ParsedEvent, parseEventRequest } from "../../shared/events/index.ts";
import { createKubeClients } from "../../shared/kube/client.ts";
import type { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { persistentVolumeClaims } from "../../shared/kube/resources.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";
import { pvc, startTestForwarder, waitFor } from "./helpers.ts";

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

interface Request {
  contentType: string | undefined;
  names: string[];
}

/** A receiver that takes single events and batches, slowly, and may refuse some. */
async function startBatchReceiver(refuse: (names: string[]) => boolean) {
  const requests: Request[] = [];
  const accepted: string[] = [];
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const events: ParsedEvent[] = parseEventRequest(req.headers, Buffer.concat(chunks));
    const names = events.map((e) => (e.kind === "resource" ? `${e.action}:${e.ref.name}` : e.kind));
    requests.push({ contentType: req.headers["content-type"], names });
    await new Promise((r) => setTimeout(r, 40));
    if (refuse(names)) {
      res.writeHead(400).end("refused");
      return;
    }
    accepted.push(...names);
    res.writeHead(200, { "content-type": "application/json" }).end("{}");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
  return {
    url,
    requests,
    accepted,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

test("a backlog goes out in batches: every change once, each object's in order, the first one alone", async () => {
  const receiver = await startBatchReceiver(() => false);
  const forwarder = startTestForwarder({
    kubeConfig: sandbox.kubeConfig,
    routes: [{ url: receiver.url, kinds: ["PersistentVolumeClaim"] }],
    concurrency: 1,
    maxBatch: 8,
    replayExisting: false,
  });
  try {
    await forwarder.ready;
    const names = Array.from({ length: 12 }, (_, i) => `batched-${i}`);
    await Promise.all(names.map((n) => kube.create(persistentVolumeClaims, pvc(n))));
    await kube.delete(persistentVolumeClaims, "batched-0", "default");
    await waitFor(() => receiver.accepted.length >= 13, "every change delivered");
    assert.equal(receiver.requests[0]?.names.length, 1, "the first change did not wait for company");
    assert.equal(receiver.requests[0]?.contentType, "application/json", "a lone change is binary mode");
    const batch = receiver.requests.find((r) => r.names.length > 1);
    assert.ok(batch, JSON.stringify(receiver.requests));
    assert.equal(batch.contentType, "application/cloudevents-batch+json");
    assert.ok(batch.names.length <= 8, "at most maxBatch per request");
    assert.ok(receiver.requests.length < 13, `${receiver.requests.length} requests for 13 changes`);
    for (const n of names) assert.equal(receiver.accepted.filter((a) => a === `add:${n}`).length, 1, n);
    assert.ok(
      receiver.accepted.indexOf("add:batched-0") < receiver.accepted.indexOf("delete:batched-0"),
      "an object's changes in order",
    );
    for (const r of receiver.requests) {
      const objects = r.names.map((x) => x.split(":")[1]);
      assert.equal(new Set(objects).size, objects.length, "one change per object per request");
    }
  } finally {
    await forwarder.close();
    await receiver.close();
    await sandbox.admin.reset();
  }
});

test("a refused batch is sent again one change at a time: only the bad one fails", async () => {
  const receiver = await startBatchReceiver((names) => names.length > 1 || names[0] === "add:refused-3");
  const forwarder = startTestForwarder({
    kubeConfig: sandbox.kubeConfig,
    routes: [{ url: receiver.url, kinds: ["PersistentVolumeClaim"] }],
    concurrency: 1,
    maxBatch: 8,
    replayExisting: false,
  });
  try {
    await forwarder.ready;
    const names = Array.from({ length: 6 }, (_, i) => `refused-${i}`);
    await Promise.all(names.map((n) => kube.create(persistentVolumeClaims, pvc(n))));
    await waitFor(() => {
      const s = forwarder.stats().destinations[0];
      return (s?.delivered ?? 0) + (s?.failed ?? 0) >= 6;
    }, "every change delivered or refused");
    assert.ok(
      receiver.requests.some((r) => r.names.length > 1),
      "a batch was tried",
    );
    assert.deepEqual(
      [...receiver.accepted].sort(),
      names.filter((n) => n !== "refused-3").map((n) => `add:${n}`),
    );
    assert.equal(forwarder.stats().destinations[0]?.failed, 1);
  } finally {
    await forwarder.close();
    await receiver.close();
    await sandbox.admin.reset();
  }
});
