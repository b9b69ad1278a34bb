import assert from "node:assert/strict";
import { test } from "node:test";
import { ApiException, type KubernetesObject } from "@kubernetes/client-node";
import { InvalidEventObjectError, rehydrate, relationOf } from "../../shared/kube/rehydrate.ts";

const obj = (resourceVersion?: string, uid = "u1"): KubernetesObject => ({
  kind: "PersistentVolumeClaim",
  metadata: {
    name: "c",
    namespace: "ns",
    uid,
    ...(resourceVersion === undefined ? {} : { resourceVersion }),
  },
});

test("relationOf compares resourceVersions, ordering only plain decimals", () => {
  const table: [string | undefined, string | undefined, string][] = [
    ["5", "5", "same"],
    ["5", "7", "api-newer"],
    ["9", "10", "api-newer"],
    ["10", "9", "event-newer"],
    ["abc", "abc", "same"],
    ["abc", "abd", "unknown"],
    [undefined, "5", "unknown"],
    ["5", undefined, "unknown"],
  ];
  for (const [event, api, expected] of table) {
    assert.equal(relationOf(obj(event), obj(api)), expected, `${event} vs ${api}`);
  }
});

test("rehydrate reads by the event's namespace and name; 404 is gone", async () => {
  const calls: [string, string][] = [];
  const r = await rehydrate(obj("3"), async (ns, name) => {
    calls.push([ns, name]);
    return obj("4");
  });
  assert.deepEqual(calls, [["ns", "c"]]);
  assert.deepEqual(
    [r.relation, r.recreated, r.current?.metadata?.resourceVersion],
    ["api-newer", false, "4"],
  );

  const gone = await rehydrate(obj("3"), async () => {
    throw new ApiException(404, "Not Found", '{"kind":"Status","code":404,"reason":"NotFound"}', {});
  });
  assert.deepEqual(gone, { current: null, relation: "gone", recreated: false });
});

test("rehydrate flags a deleted-and-recreated object by uid", async () => {
  const r = await rehydrate(obj("3", "old"), async () => obj("8", "new"));
  assert.deepEqual([r.relation, r.recreated], ["api-newer", true]);
});

test("cluster-scoped objects are read with namespace ''", async () => {
  let seen: string | undefined;
  await rehydrate({ kind: "PersistentVolume", metadata: { name: "pv" } }, async (ns) => {
    seen = ns;
    return obj("1");
  });
  assert.equal(seen, "");
});

test("other read errors propagate; a nameless object is bad input", async () => {
  const boom = new ApiException(503, "Unavailable", "", {});
  await assert.rejects(
    rehydrate(obj("1"), async () => {
      throw boom;
    }),
    (e) => e === boom,
  );
  await assert.rejects(
    rehydrate({ kind: "X", metadata: {} }, async () => obj("1")),
    InvalidEventObjectError,
  );
});

test("against the sandbox: same, api-newer, event-newer, gone, recreated; every call is a live GET", async (t) => {
  const { startTestSandbox } = await import("../helpers/sandbox.ts");
  const { createKubeClients } = await import("../../shared/kube/client.ts");
  const sandbox = await startTestSandbox();
  t.after(() => sandbox.close());
  const { core } = createKubeClients(sandbox.kubeConfig);
  const readClaim = (ns: string, name: string) =>
    core.readNamespacedPersistentVolumeClaim({ name, namespace: ns });
  const readVolume = (_ns: string, name: string) => core.readPersistentVolume({ name });

  await sandbox.admin.seed([
    { apiVersion: "v1", kind: "Namespace", metadata: { name: "ns1" } },
    {
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: { name: "claim", namespace: "ns1" },
      spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
    },
    {
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: { name: "pv1" },
      spec: { capacity: { storage: "1Gi" }, accessModes: ["ReadWriteOnce"], hostPath: { path: "/tmp/pv1" } },
    },
  ]);
  await sandbox.admin.resetCounters();

  const v1 = await core.readNamespacedPersistentVolumeClaim({ name: "claim", namespace: "ns1" });
  const same = await rehydrate(v1, readClaim);
  assert.equal(same.relation, "same");
  assert.equal(same.current?.metadata?.uid, v1.metadata?.uid);

  const v2 = await core.replaceNamespacedPersistentVolumeClaim({
    name: "claim",
    namespace: "ns1",
    body: { ...v1, metadata: { ...v1.metadata, labels: { changed: "yes" } } },
  });
  const stale = await rehydrate(v1, readClaim);
  assert.equal(stale.relation, "api-newer");
  assert.equal(stale.current?.metadata?.resourceVersion, v2.metadata?.resourceVersion);

  const fromTheFuture = {
    ...v2,
    metadata: { ...v2.metadata, resourceVersion: String(BigInt(v2.metadata?.resourceVersion ?? "0") + 100n) },
  };
  assert.equal((await rehydrate(fromTheFuture, readClaim)).relation, "event-newer");

  const pv = await rehydrate(
    { kind: "PersistentVolume", metadata: { name: "pv1", resourceVersion: "1" } },
    readVolume,
  );
  assert.equal(pv.relation, "api-newer");
  assert.equal(pv.current?.metadata?.name, "pv1");

  // One explicit read plus four rehydrations, one GET each: nothing is served from a cache.
  const counters = await sandbox.admin.counters();
  assert.equal(counters["get persistentvolumeclaims"], 4);
  assert.equal(counters["get persistentvolumes"], 1);

  await core.deleteNamespacedPersistentVolumeClaim({ name: "claim", namespace: "ns1" });
  assert.deepEqual(await rehydrate(v2, readClaim), { current: null, relation: "gone", recreated: false });

  await core.createNamespacedPersistentVolumeClaim({
    namespace: "ns1",
    body: {
      metadata: { name: "claim" },
      spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "2Gi" } } },
    },
  });
  const again = await rehydrate(v2, readClaim);
  assert.deepEqual([again.relation, again.recreated], ["api-newer", true]);
});
