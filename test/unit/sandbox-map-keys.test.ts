// Go's map key order in the sandbox's JSON: which fields are maps per
// resource, and the text goJson writes, including keys JS objects would
// otherwise put first (array-index-like keys).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { goJson, goJsonList, sortMapKeys } from "../../sandbox/apiserver/map-keys.ts";
import { findResourceType } from "../../sandbox/apiserver/resources.ts";
import type { KubeObject } from "../../sandbox/apiserver/store.ts";

const pods = findResourceType("", "v1", "pods")!;
const pvcs = findResourceType("", "v1", "persistentvolumeclaims")!;
const snapshots = findResourceType("snapshot.storage.k8s.io", "v1", "volumesnapshots")!;

function stored(t: Parameters<typeof sortMapKeys>[0], o: KubeObject): string {
  const copy = structuredClone(o);
  sortMapKeys(t, copy);
  return goJson(t, copy);
}

describe("sortMapKeys + goJson", () => {
  const cases: Array<{ name: string; t: Parameters<typeof sortMapKeys>[0]; o: KubeObject; text: string }> = [
    {
      name: "labels and annotations sorted; struct fields keep their order",
      t: pvcs,
      o: { metadata: { name: "c", labels: { b: "1", a: "2" }, annotations: { z: "1", y: "2" } }, kind: "K" },
      text: '{"metadata":{"name":"c","labels":{"a":"2","b":"1"},"annotations":{"y":"2","z":"1"}},"kind":"K"}',
    },
    {
      name: "index-like keys sort as strings ('10' before '9' before 'a')",
      t: pvcs,
      o: { metadata: { labels: { a: "x", "9": "y", "10": "z" } } },
      text: '{"metadata":{"labels":{"10":"z","9":"y","a":"x"}}}',
    },
    {
      name: "maps inside lists: container resource requests",
      t: pods,
      o: {
        metadata: {},
        spec: { containers: [{ name: "c", resources: { requests: { memory: "1Mi", cpu: "1" } } }] },
      },
      text: '{"metadata":{},"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1","memory":"1Mi"}}}]}}',
    },
    {
      name: "a field that is not a map keeps its order",
      t: pods,
      o: { metadata: {}, spec: { nodeName: "n", containers: [] } },
      text: '{"metadata":{},"spec":{"nodeName":"n","containers":[]}}',
    },
    {
      name: "a custom resource sorts every key",
      t: snapshots,
      o: { metadata: { name: "s" }, spec: { z: 1, a: { d: 1, c: 2 } }, apiVersion: "v" },
      text: '{"apiVersion":"v","metadata":{"name":"s"},"spec":{"a":{"c":2,"d":1},"z":1}}',
    },
    {
      name: "a custom resource with index-like keys",
      t: snapshots,
      o: { metadata: { name: "s" }, spec: { b: 1, "10": 2, "9": 3 } },
      text: '{"metadata":{"name":"s"},"spec":{"10":2,"9":3,"b":1}}',
    },
    {
      name: "an empty map field is left out (omitempty)",
      t: pvcs,
      o: { metadata: { name: "c", labels: {} }, spec: { resources: { requests: {} } } },
      text: '{"metadata":{"name":"c"},"spec":{"resources":{}}}',
    },
    {
      name: "a custom resource keeps an empty map",
      t: snapshots,
      o: { metadata: { labels: {} } },
      text: '{"metadata":{"labels":{}}}',
    },
    {
      name: "__proto__ stays an ordinary key",
      t: pvcs,
      o: JSON.parse('{"metadata":{"labels":{"z":"1","__proto__":"2"}}}') as KubeObject,
      text: '{"metadata":{"labels":{"__proto__":"2","z":"1"}}}',
    },
  ];
  for (const c of cases) {
    it(c.name, () => assert.equal(stored(c.t, c.o), c.text));
  }

  it("a list writes each item as goJson does", () => {
    const a = { metadata: { labels: { "2": "x", "10": "y" } } };
    const b = { metadata: { name: "b" } };
    assert.equal(
      goJsonList(pvcs, { kind: "L", metadata: {} }, [a, b]),
      '{"kind":"L","metadata":{},"items":[{"metadata":{"labels":{"10":"y","2":"x"}}},{"metadata":{"name":"b"}}]}',
    );
    assert.equal(goJsonList(pvcs, { kind: "L" }, [b]), '{"kind":"L","items":[{"metadata":{"name":"b"}}]}');
  });

  it("leaves the object it writes unchanged", () => {
    const o = { metadata: { labels: { "10": "y", "2": "x" } } };
    const before = structuredClone(o);
    goJson(pvcs, o);
    assert.deepEqual(o, before);
  });
});
