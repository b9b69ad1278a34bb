// Per-object order under concurrency: many updates to a few objects, a slow
// receiver that also fails now and then, and a small concurrency limit. Each
// object's states must arrive in order (coalescing may skip some, never
// reorder), one at a time, ending with the last state.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { createKubeClients } from "../../shared/kube/client.ts";
import type { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { persistentVolumeClaims } from "../../shared/kube/resources.ts";
import type { KubeObject } from "../../shared/kube/types.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";
import { keyOf, pvc, startReceiver, startTestForwarder, waitFor, waitForIdle } from "./helpers.ts";

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

const OBJECTS = 4;
const UPDATES = 25;

test("changes of one object arrive in order and one at a time, within the concurrency limit", async () => {
  // Deterministic "random" delays and failures.
  let seed = 7;
  const random = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  const receiver = await startReceiver(() => ({
    delayMs: Math.floor(random() * 15),
    ...(random() < 0.2 ? { status: 503 } : {}),
  }));
  const forwarder = startTestForwarder({
    kubeConfig: sandbox.kubeConfig,
    routes: [{ url: receiver.url, kinds: ["PersistentVolumeClaim"] }],
    concurrency: 3,
    retry: { baseMs: 5, maxMs: 20 },
  });
  try {
    await forwarder.ready;
    const names = Array.from({ length: OBJECTS }, (_, i) => `ordered-${i}`);
    await Promise.all(
      names.map(async (name) => {
        let current: KubeObject = await kube.create(
          persistentVolumeClaims,
          pvc(name, "default", { seq: "0" }),
        );
        for (let seq = 1; seq <= UPDATES; seq++) {
          current = await kube.replace(persistentVolumeClaims, {
            ...current,
            metadata: { ...current.metadata, labels: { seq: String(seq) } },
          });
        }
      }),
    );
    const lastSeq = (name: string) =>
      receiver
        .delivered()
        .filter((e) => e.ref.name === name)
        .at(-1)?.object?.metadata.labels;
    await waitFor(
      () =>
        names.every((name) => (lastSeq(name) as Record<string, string> | undefined)?.seq === String(UPDATES)),
      "every object's last state",
    );
    await waitForIdle(forwarder);

    for (const name of names) {
      const delivered = receiver.delivered().filter((e) => e.ref.name === name);
      const seqs = delivered.map((e) =>
        Number((e.object?.metadata.labels as Record<string, string> | undefined)?.seq),
      );
      for (let i = 1; i < seqs.length; i++) {
        assert.ok(seqs[i]! > seqs[i - 1]!, `${name}: states out of order: ${seqs.join(",")}`);
      }
      const rvs = delivered.map((e) => BigInt(e.resourceVersion ?? "0"));
      for (let i = 1; i < rvs.length; i++)
        assert.ok(rvs[i]! > rvs[i - 1]!, `${name}: resourceVersions in order`);
      assert.equal(delivered[0]?.action, "add", `${name}: the add comes first`);
      assert.ok(
        delivered.slice(1).every((e) => e.action === "update"),
        `${name}: then updates`,
      );
    }
    assert.equal(receiver.maxConcurrentPerObject, 1, "never two deliveries of one object at once");
    assert.ok(receiver.maxConcurrent <= 3, `at most 3 in flight, saw ${receiver.maxConcurrent}`);
    assert.ok(receiver.maxConcurrent >= 2, "objects do go out in parallel");
    const [stats] = forwarder.stats().destinations;
    assert.ok((stats?.retried ?? 0) > 0, "the receiver's 503s were retried");
    assert.equal(stats?.failed, 0);
    assert.equal(stats?.dropped, 0);
    assert.equal(
      (stats?.delivered ?? 0) + (stats?.coalesced ?? 0),
      OBJECTS * (UPDATES + 1),
      "every change was delivered or folded into a newer one",
    );
    assert.equal(new Set(receiver.delivered().map(keyOf)).size, OBJECTS);
  } finally {
    await forwarder.close();
    await receiver.close();
    await sandbox.admin.reset();
  }
});

test("a delete is never folded away: delete-then-recreate arrives as delete, then add of the new object", async () => {
  const receiver = await startReceiver(() => ({ delayMs: 30 }));
  const forwarder = startTestForwarder({
    kubeConfig: sandbox.kubeConfig,
    routes: [{ url: receiver.url, kinds: ["PersistentVolumeClaim"] }],
  });
  try {
    await forwarder.ready;
    const first = await kube.create(persistentVolumeClaims, pvc("phoenix"));
    await kube.delete(persistentVolumeClaims, "phoenix", "default");
    const second = await kube.create(persistentVolumeClaims, pvc("phoenix"));
    await waitFor(() => receiver.delivered().length === 3, "add, delete, add");
    assert.deepEqual(
      receiver.delivered().map((e) => `${e.action} ${e.object?.metadata.uid}`),
      [`add ${first.metadata.uid}`, `delete ${first.metadata.uid}`, `add ${second.metadata.uid}`],
    );
  } finally {
    await forwarder.close();
    await receiver.close();
    await sandbox.admin.reset();
  }
});
