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
