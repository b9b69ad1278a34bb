import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  applyJsonPatch,
  applyMergePatch,
  applyPatch,
  applyStrategicMergePatch,
  CUSTOM_RESOURCE_PATCH_TYPES,
  PatchError,
} from "../../sandbox/apiserver/patch.ts";

type Json = Record<string, unknown>;

function pvc(): Json {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: {
      name: "data",
      namespace: "default",
      resourceVersion: "5",
      labels: { app: "db" },
      annotations: { "pv.kubernetes.io/bind-completed": "yes" },
      finalizers: ["kubernetes.io/pvc-protection"],
    },
    spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } }, volumeName: "" },
    status: {
      phase: "Pending",
      conditions: [
        { type: "Resizing", status: "True" },
        { type: "FileSystemResizePending", status: "False" },
      ],
    },
  };
}

function expectPatchError(fn: () => unknown, code: number, message?: RegExp): void {
  assert.throws(fn, (error: unknown) => {
    assert.ok(error instanceof PatchError, `expected PatchError, got ${String(error)}`);
    assert.equal(error.code, code, error.message);
    if (message !== undefined) assert.match(error.message, message);
    return true;
  });
}

/** Every object key anywhere in the value. */
function allKeys(value: unknown): string[] {
  if (Array.isArray(value)) return value.flatMap(allKeys);
  if (typeof value !== "object" || value === null) return [];
  return Object.entries(value).flatMap(([key, child]) => [key, ...allKeys(child)]);
}

function assertNoDirectives(value: unknown): void {
  const directives = allKeys(value).filter((key) => key.startsWith("$"));
  assert.deepEqual(directives, [], "directive keys leaked into the result");
}

describe("applyJsonPatch", () => {
  const cases: Array<{ name: string; doc: unknown; ops: unknown[]; expected: unknown }> = [
    {
      name: "add a field",
      doc: { a: 1 },
      ops: [{ op: "add", path: "/b", value: 2 }],
      expected: { a: 1, b: 2 },
    },
    {
      name: "add appends with -",
      doc: { l: [1] },
      ops: [{ op: "add", path: "/l/-", value: 2 }],
      expected: { l: [1, 2] },
    },
    {
      name: "add inserts at an index",
      doc: { l: [1, 3] },
      ops: [{ op: "add", path: "/l/1", value: 2 }],
      expected: { l: [1, 2, 3] },
    },
    { name: "remove", doc: { a: 1, b: 2 }, ops: [{ op: "remove", path: "/a" }], expected: { b: 2 } },
    {
      name: "replace",
      doc: { a: 1 },
      ops: [{ op: "replace", path: "/a", value: null }],
      expected: { a: null },
    },
    {
      name: "move",
      doc: { a: { x: 1 }, b: {} },
      ops: [{ op: "move", from: "/a/x", path: "/b/y" }],
      expected: { a: {}, b: { y: 1 } },
    },
    {
      name: "move onto itself",
      doc: { a: 1 },
      ops: [{ op: "move", from: "/a", path: "/a" }],
      expected: { a: 1 },
    },
    {
      name: "copy",
      doc: { a: { x: 1 } },
      ops: [{ op: "copy", from: "/a", path: "/b" }],
      expected: { a: { x: 1 }, b: { x: 1 } },
    },
    {
      name: "test then replace",
      doc: { a: { x: [1] } },
      ops: [
        { op: "test", path: "/a", value: { x: [1] } },
        { op: "replace", path: "/a/x/0", value: 2 },
      ],
      expected: { a: { x: [2] } },
    },
    {
      name: "escaped pointer segments",
      doc: { metadata: { annotations: { "a/b": "1", "c~d": "2" } } },
      ops: [
        { op: "remove", path: "/metadata/annotations/a~1b" },
        { op: "replace", path: "/metadata/annotations/c~0d", value: "3" },
      ],
      expected: { metadata: { annotations: { "c~d": "3" } } },
    },
    { name: "empty patch", doc: { a: 1 }, ops: [], expected: { a: 1 } },
    {
      name: "replace the root",
      doc: { a: 1 },
      ops: [{ op: "replace", path: "", value: { b: 2 } }],
      expected: { b: 2 },
    },
    {
      name: "extra operation members are ignored",
      doc: {},
      ops: [{ op: "add", path: "/a", value: 1, comment: "hi" }],
      expected: { a: 1 },
    },
  ];
  for (const { name, doc, ops, expected } of cases) {
    it(name, () => {
      assert.deepEqual(applyJsonPatch(doc, ops), expected);
    });
  }

  const kubectlPatch = [
    { op: "test", path: "/metadata/resourceVersion", value: "5" },
    { op: "add", path: "/metadata/finalizers/-", value: "x" },
  ];

  it("applies a kubectl-style optimistic patch when the test passes", () => {
    const result = applyJsonPatch(pvc(), kubectlPatch) as { metadata: { finalizers: string[] } };
    assert.deepEqual(result.metadata.finalizers, ["kubernetes.io/pvc-protection", "x"]);
  });

  it("answers 422 when the test fails, and changes nothing", () => {
    const doc = pvc();
    (doc.metadata as Json).resourceVersion = "6";
    const before = structuredClone(doc);
    expectPatchError(
      () => applyJsonPatch(doc, kubectlPatch),
      422,
      /test operation 0 failed: value at "\/metadata\/resourceVersion"/,
    );
    assert.deepEqual(doc, before);
  });

  it("answers 422 when a later test fails after earlier operations", () => {
    const doc = { a: 1 };
    expectPatchError(
      () =>
        applyJsonPatch(doc, [
          { op: "replace", path: "/a", value: 2 },
          { op: "test", path: "/a", value: 1 },
        ]),
      422,
      /test operation 1 failed/,
    );
    assert.deepEqual(doc, { a: 1 });
  });

  const malformed: Array<{ name: string; ops: unknown; message: RegExp }> = [
    { name: "an object", ops: { op: "add", path: "/a", value: 1 }, message: /must be a JSON array/ },
    { name: "null", ops: null, message: /must be a JSON array/ },
    { name: "a non-object operation", ops: ["add"], message: /operation 0 is not an object/ },
    { name: "an unknown op", ops: [{ op: "merge", path: "/a" }], message: /unknown op "merge"/ },
    {
      name: "the library's internal _get op",
      ops: [{ op: "_get", path: "/a" }],
      message: /unknown op "_get"/,
    },
    { name: "a missing op", ops: [{ path: "/a" }], message: /unknown op undefined/ },
    { name: "a missing path", ops: [{ op: "remove" }], message: /"path" must be a JSON pointer/ },
    { name: "a relative path", ops: [{ op: "remove", path: "a" }], message: /"path" must be a JSON pointer/ },
    { name: "a bad escape", ops: [{ op: "remove", path: "/a~2" }], message: /"path" must be a JSON pointer/ },
    {
      name: "a missing value",
      ops: [{ op: "add", path: "/a" }],
      message: /operation 0 \(add\) is missing "value"/,
    },
    { name: "a test without value", ops: [{ op: "test", path: "/a" }], message: /missing "value"/ },
    {
      name: "a move without from",
      ops: [{ op: "move", path: "/a" }],
      message: /"from" must be a JSON pointer/,
    },
    {
      name: "a malformed op after a failing test",
      ops: [
        { op: "test", path: "/a", value: "nope" },
        { op: "bogus", path: "/a" },
      ],
      message: /operation 1: unknown op "bogus"/,
    },
  ];
  for (const { name, ops, message } of malformed) {
    it(`answers 400 for ${name}`, () => {
      expectPatchError(() => applyJsonPatch({ a: 1 }, ops), 400, message);
    });
  }

  const unappliable: Array<{ name: string; doc: unknown; ops: unknown[]; message: RegExp }> = [
    {
      name: "replace of a missing path",
      doc: { a: 1 },
      ops: [{ op: "replace", path: "/b", value: 1 }],
      message:
        /operation 0 \(replace "\/b"\) failed: Cannot perform the operation at a path that does not exist/,
    },
    {
      name: "remove of a missing path",
      doc: { a: 1 },
      ops: [{ op: "remove", path: "/b" }],
      message: /remove "\/b"/,
    },
    {
      name: "add below a missing parent",
      doc: { a: 1 },
      ops: [{ op: "add", path: "/x/y", value: 1 }],
      message: /add "\/x\/y"/,
    },
    {
      name: "add through a primitive",
      doc: { a: "s" },
      ops: [{ op: "add", path: "/a/b/c", value: 1 }],
      message: /add "\/a\/b\/c"/,
    },
    {
      name: "add past the end of a list",
      doc: { l: [1] },
      ops: [{ op: "add", path: "/l/5", value: 1 }],
      message: /MUST NOT be greater than the number of elements/,
    },
    {
      name: "a non-numeric list index",
      doc: { l: [1] },
      ops: [{ op: "add", path: "/l/x", value: 1 }],
      message: /unsigned base-10 integer/,
    },
    {
      name: "move from a missing path",
      doc: { a: 1 },
      ops: [{ op: "move", from: "/b", path: "/c" }],
      message: /move from "\/b" to "\/c"/,
    },
    {
      name: "move into its own child",
      doc: { a: { b: 1 } },
      ops: [{ op: "move", from: "/a", path: "/a/b/c" }],
      message: /cannot move "\/a" into its own child/,
    },
    {
      name: "a test of a missing path",
      doc: { a: 1 },
      ops: [{ op: "test", path: "/b", value: null }],
      message: /test operation 0 failed/,
    },
    {
      name: "a test below a missing parent",
      doc: { a: 1 },
      ops: [{ op: "test", path: "/x/y", value: 1 }],
      message: /operation 0 \(test "\/x\/y"\) failed/,
    },
    {
      name: "a __proto__ path",
      doc: { a: {} },
      ops: [{ op: "add", path: "/a/__proto__/polluted", value: 1 }],
      message: /banned/,
    },
  ];
  for (const { name, doc, ops, message } of unappliable) {
    it(`answers 422 for ${name}`, () => {
      expectPatchError(() => applyJsonPatch(doc, ops), 422, message);
    });
  }

  it("keeps the library's document dump out of error messages", () => {
    expectPatchError(
      () => applyJsonPatch({ secret: "hunter2" }, [{ op: "remove", path: "/x" }]),
      422,
      /^[^\n]*$/,
    );
  });

  it("mutates neither the document nor the operations, and shares nothing with them", () => {
    const doc = pvc();
    const ops = [
      { op: "add", path: "/metadata/labels/new", value: "v" },
      { op: "add", path: "/spec/extra", value: { nested: ["x"] } },
      { op: "remove", path: "/status/conditions/0" },
      { op: "move", from: "/metadata/annotations", path: "/metadata/moved" },
    ];
    const docBefore = structuredClone(doc);
    const opsBefore = structuredClone(ops);
    const result = applyJsonPatch(doc, ops) as { spec: { extra: { nested: string[] } } };
    assert.deepEqual(doc, docBefore);
    assert.deepEqual(ops, opsBefore);
    result.spec.extra.nested.push("y");
    assert.deepEqual(ops, opsBefore);
  });
});

describe("applyMergePatch", () => {
  const cases: Array<{ name: string; doc: unknown; patch: unknown; expected: unknown }> = [
    { name: "replace a value", doc: { a: "b" }, patch: { a: "c" }, expected: { a: "c" } },
    { name: "add a value", doc: { a: "b" }, patch: { b: "c" }, expected: { a: "b", b: "c" } },
    { name: "null deletes", doc: { a: "b" }, patch: { a: null }, expected: {} },
    { name: "null deletes one of many", doc: { a: "b", b: "c" }, patch: { a: null }, expected: { b: "c" } },
    { name: "null of a missing key", doc: { a: 1 }, patch: { b: null }, expected: { a: 1 } },
    { name: "lists replace", doc: { a: ["b"] }, patch: { a: "c" }, expected: { a: "c" } },
    { name: "list replaces value", doc: { a: "c" }, patch: { a: ["b"] }, expected: { a: ["b"] } },
    {
      name: "objects merge recursively",
      doc: { a: { b: "c", d: 1 } },
      patch: { a: { b: "d", c: null } },
      expected: { a: { b: "d", d: 1 } },
    },
    { name: "lists of objects replace", doc: { a: [{ b: "c" }] }, patch: { a: [1] }, expected: { a: [1] } },
    { name: "nulls inside lists stay", doc: {}, patch: { a: [null, 1] }, expected: { a: [null, 1] } },
    {
      name: "object over primitive",
      doc: { a: "x" },
      patch: { a: { b: "c", d: null } },
      expected: { a: { b: "c" } },
    },
    { name: "non-object patch replaces the doc", doc: { a: "b" }, patch: ["c"], expected: ["c"] },
    { name: "null patch replaces the doc", doc: { a: "b" }, patch: null, expected: null },
    { name: "object patch over a non-object doc", doc: ["x"], patch: { a: 1 }, expected: { a: 1 } },
    { name: "empty patch", doc: { a: 1 }, patch: {}, expected: { a: 1 } },
    {
      name: "a realistic label and annotation patch",
      doc: { metadata: { labels: { a: "1", b: "2" }, annotations: { x: "y" } } },
      patch: { metadata: { labels: { a: null, c: "3" }, annotations: null } },
      expected: { metadata: { labels: { b: "2", c: "3" } } },
    },
  ];
  for (const { name, doc, patch, expected } of cases) {
    it(name, () => {
      assert.deepEqual(applyMergePatch(doc, patch), expected);
    });
  }

  it("mutates neither input and shares nothing with them", () => {
    const doc = pvc();
    const patch = { metadata: { labels: { app: null, tier: "x" } }, spec: { extra: { list: [1] } } };
    const docBefore = structuredClone(doc);
    const patchBefore = structuredClone(patch);
    const result = applyMergePatch(doc, patch) as { spec: { extra: { list: number[] }; resources: Json } };
    assert.deepEqual(doc, docBefore);
    assert.deepEqual(patch, patchBefore);
    result.spec.extra.list.push(2);
    result.spec.resources.changed = true;
    assert.deepEqual(doc, docBefore);
    assert.deepEqual(patch, patchBefore);
  });

  it("treats __proto__ as an ordinary key", () => {
    const patch: unknown = JSON.parse('{"metadata":{"__proto__":{"polluted":true}}}');
    const result = applyMergePatch({ metadata: {} }, patch) as { metadata: Json };
    assert.equal(Object.getPrototypeOf(result.metadata), Object.prototype);
    assert.ok(Object.hasOwn(result.metadata, "__proto__"));
    assert.equal(({} as Json).polluted, undefined);
  });
});

describe("applyStrategicMergePatch", () => {
  it("merges maps recursively and deletes keys set to null", () => {
    const result = applyStrategicMergePatch(
      pvc(),
      {
        metadata: { labels: { app: null, tier: "gold" }, annotations: { x: "y" } },
        spec: { volumeName: "pv-1" },
      },
      "persistentvolumeclaims",
    );
    const metadata = result.metadata as Json;
    assert.deepEqual(metadata.labels, { tier: "gold" });
    assert.deepEqual(metadata.annotations, { "pv.kubernetes.io/bind-completed": "yes", x: "y" });
    assert.equal((result.spec as Json).volumeName, "pv-1");
    assert.deepEqual((result.spec as Json).resources, { requests: { storage: "1Gi" } });
  });

  const listCases: Array<{ name: string; resource: string; doc: Json; patch: Json; expected: Json }> = [
    {
      name: "lists without a strategy are replaced",
      resource: "persistentvolumeclaims",
      doc: { spec: { accessModes: ["ReadWriteOnce", "ReadOnlyMany"] } },
      patch: { spec: { accessModes: ["ReadWriteMany"] } },
      expected: { spec: { accessModes: ["ReadWriteMany"] } },
    },
    {
      name: "an empty list clears a list without a strategy",
      resource: "pods",
      doc: { spec: { tolerations: [{ key: "a" }] } },
      patch: { spec: { tolerations: [] } },
      expected: { spec: { tolerations: [] } },
    },
    {
      name: "finalizers merge as a set: the patch's values first, in its order, then the server's others",
      resource: "persistentvolumes",
      doc: { metadata: { finalizers: ["a", "b"] } },
      patch: { metadata: { finalizers: ["c", "a"] } },
      expected: { metadata: { finalizers: ["c", "a", "b"] } },
    },
    {
      name: "a finalizer new to the list lands in front of it (upstream prepends)",
      resource: "persistentvolumeclaims",
      doc: { metadata: { finalizers: ["kubernetes.io/pvc-protection"] } },
      patch: { metadata: { finalizers: ["example.com/protect"] } },
      expected: { metadata: { finalizers: ["example.com/protect", "kubernetes.io/pvc-protection"] } },
    },
    {
      name: "a finalizer already present keeps its place",
      resource: "persistentvolumeclaims",
      doc: { metadata: { finalizers: ["a", "b", "c"] } },
      patch: { metadata: { finalizers: ["b"] } },
      expected: { metadata: { finalizers: ["a", "b", "c"] } },
    },
    {
      name: "finalizers the server holds twice come out once",
      resource: "persistentvolumeclaims",
      doc: { metadata: { finalizers: ["a", "a", "b"] } },
      patch: { metadata: { finalizers: ["c"] } },
      expected: { metadata: { finalizers: ["c", "a", "b"] } },
    },
    {
      name: "an empty finalizer list in a patch clears nothing",
      resource: "persistentvolumeclaims",
      doc: { metadata: { finalizers: ["a"] } },
      patch: { metadata: { finalizers: [] } },
      expected: { metadata: { finalizers: ["a"] } },
    },
    {
      name: "finalizers added to an object without any are taken as patched, duplicates and all",
      resource: "persistentvolumeclaims",
      doc: { metadata: {} },
      patch: { metadata: { finalizers: ["a", "a"] } },
      expected: { metadata: { finalizers: ["a", "a"] } },
    },
    {
      name: "finalizers appear when absent",
      resource: "persistentvolumes",
      doc: { metadata: {} },
      patch: { metadata: { finalizers: ["a"] } },
      expected: { metadata: { finalizers: ["a"] } },
    },
    {
      name: "null deletes the finalizers",
      resource: "persistentvolumes",
      doc: { metadata: { finalizers: ["a"] } },
      patch: { metadata: { finalizers: null } },
      expected: { metadata: {} },
    },
    {
      name: "ownerReferences merge by uid",
      resource: "persistentvolumes",
      doc: { metadata: { ownerReferences: [{ uid: "1", name: "a", controller: true }] } },
      patch: {
        metadata: {
          ownerReferences: [
            { uid: "1", controller: null },
            { uid: "2", name: "b" },
          ],
        },
      },
      expected: {
        metadata: {
          ownerReferences: [
            { uid: "1", name: "a" },
            { uid: "2", name: "b" },
          ],
        },
      },
    },
    {
      name: "PVC conditions merge by type",
      resource: "persistentvolumeclaims",
      doc: {
        status: {
          conditions: [
            { type: "Resizing", status: "True" },
            { type: "FileSystemResizePending", status: "False" },
          ],
        },
      },
      patch: {
        status: {
          conditions: [
            { type: "Resizing", status: "False" },
            { type: "New", status: "True" },
          ],
        },
      },
      // The patch's conditions in its order; a server-only one follows unless it stood before them.
      expected: {
        status: {
          conditions: [
            { type: "Resizing", status: "False" },
            { type: "New", status: "True" },
            { type: "FileSystemResizePending", status: "False" },
          ],
        },
      },
    },
    {
      name: "pod conditions merge by type",
      resource: "pods",
      doc: { status: { conditions: [{ type: "Ready", status: "False" }] } },
      patch: { status: { conditions: [{ type: "Ready", status: "True" }] } },
      expected: { status: { conditions: [{ type: "Ready", status: "True" }] } },
    },
    {
      name: "node conditions and addresses merge by type",
      resource: "nodes",
      doc: {
        status: {
          conditions: [{ type: "Ready", status: "False" }],
          addresses: [
            { type: "InternalIP", address: "10.0.0.1" },
            { type: "Hostname", address: "n1" },
          ],
        },
      },
      patch: {
        status: {
          conditions: [{ type: "DiskPressure", status: "False" }],
          addresses: [{ type: "InternalIP", address: "10.0.0.2" }],
        },
      },
      expected: {
        status: {
          conditions: [
            { type: "DiskPressure", status: "False" },
            { type: "Ready", status: "False" },
          ],
          addresses: [
            { type: "InternalIP", address: "10.0.0.2" },
            { type: "Hostname", address: "n1" },
          ],
        },
      },
    },
    {
      name: "node taints are atomic, as upstream declares them",
      resource: "nodes",
      doc: { spec: { taints: [{ key: "a", effect: "NoSchedule" }] } },
      patch: { spec: { taints: [{ key: "b", effect: "NoSchedule" }] } },
      expected: { spec: { taints: [{ key: "b", effect: "NoSchedule" }] } },
    },
    {
      name: "conditions of other resources are replaced",
      resource: "volumeattachments",
      doc: { status: { conditions: [{ type: "A" }] } },
      patch: { status: { conditions: [{ type: "B" }] } },
      expected: { status: { conditions: [{ type: "B" }] } },
    },
    {
      name: "pod containers, env, ports and volumeMounts merge by their keys",
      resource: "pods",
      doc: {
        spec: {
          containers: [
            {
              name: "app",
              image: "app:1",
              env: [
                { name: "A", value: "1" },
                { name: "B", value: "2" },
              ],
              ports: [{ containerPort: 80, name: "http" }],
              volumeMounts: [{ mountPath: "/data", name: "data" }],
            },
            { name: "sidecar", image: "side:1" },
          ],
        },
      },
      patch: {
        spec: {
          containers: [
            {
              name: "app",
              image: "app:2",
              env: [
                { name: "B", value: "3" },
                { name: "C", value: "4" },
                { name: "A", $patch: "delete" },
              ],
              ports: [{ containerPort: 80, protocol: "TCP" }, { containerPort: 443 }],
              volumeMounts: [{ mountPath: "/data", readOnly: true }],
            },
          ],
        },
      },
      expected: {
        spec: {
          containers: [
            {
              name: "app",
              image: "app:2",
              env: [
                { name: "B", value: "3" },
                { name: "C", value: "4" },
              ],
              ports: [{ containerPort: 80, name: "http", protocol: "TCP" }, { containerPort: 443 }],
              volumeMounts: [{ mountPath: "/data", name: "data", readOnly: true }],
            },
            { name: "sidecar", image: "side:1" },
          ],
        },
      },
    },
    {
      name: "init containers merge by name",
      resource: "pods",
      doc: { spec: { initContainers: [{ name: "init", image: "a" }] } },
      patch: { spec: { initContainers: [{ name: "init", image: "b" }] } },
      expected: { spec: { initContainers: [{ name: "init", image: "b" }] } },
    },
    {
      name: "pod volumes and imagePullSecrets merge by name",
      resource: "pods",
      doc: { spec: { volumes: [{ name: "a", emptyDir: {} }], imagePullSecrets: [{ name: "r1" }] } },
      patch: {
        spec: {
          volumes: [{ name: "b", persistentVolumeClaim: { claimName: "c" } }],
          imagePullSecrets: [{ name: "r2" }],
        },
      },
      expected: {
        spec: {
          volumes: [
            { name: "b", persistentVolumeClaim: { claimName: "c" } },
            { name: "a", emptyDir: {} },
          ],
          imagePullSecrets: [{ name: "r2" }, { name: "r1" }],
        },
      },
    },
    {
      name: "containers of non-pods are replaced",
      resource: "persistentvolumeclaims",
      doc: { spec: { containers: [{ name: "a" }] } },
      patch: { spec: { containers: [{ name: "b" }] } },
      expected: { spec: { containers: [{ name: "b" }] } },
    },
    {
      name: "a list of maps replaces a primitive value",
      resource: "pods",
      doc: { spec: { containers: "oops" } },
      patch: { spec: { containers: [{ name: "a" }] } },
      expected: { spec: { containers: [{ name: "a" }] } },
    },
  ];
  for (const { name, resource, doc, patch, expected } of listCases) {
    it(name, () => {
      const result = applyStrategicMergePatch(doc, patch, resource);
      assert.deepEqual(result, expected);
      assertNoDirectives(result);
    });
  }

  describe("directives", () => {
    const directiveCases: Array<{ name: string; resource?: string; doc: Json; patch: Json; expected: Json }> =
      [
        {
          name: "$patch: replace replaces a map with the rest of the patch",
          doc: { metadata: { labels: { a: "1", b: "2" } } },
          patch: { metadata: { labels: { $patch: "replace", c: "3", d: null } } },
          expected: { metadata: { labels: { c: "3" } } },
        },
        {
          name: "$patch: replace on the whole object",
          doc: { a: 1, b: { c: 2 } },
          patch: { $patch: "replace", b: { d: 3 } },
          expected: { b: { d: 3 } },
        },
        {
          name: "$patch: delete removes a map",
          doc: { metadata: { name: "x", annotations: { a: "1" } } },
          patch: { metadata: { annotations: { $patch: "delete" } } },
          expected: { metadata: { name: "x" } },
        },
        {
          name: "$patch: delete of a missing map is a no-op",
          doc: { metadata: { name: "x" } },
          patch: { metadata: { annotations: { $patch: "delete" } } },
          expected: { metadata: { name: "x" } },
        },
        {
          name: "$patch: merge is the default",
          doc: { metadata: { labels: { a: "1" } } },
          patch: { metadata: { labels: { $patch: "merge", b: "2" } } },
          expected: { metadata: { labels: { a: "1", b: "2" } } },
        },
        {
          name: "$patch: delete removes a list element by merge key",
          doc: { metadata: { ownerReferences: [{ uid: "1" }, { uid: "2" }] } },
          patch: { metadata: { ownerReferences: [{ uid: "1", $patch: "delete" }] } },
          expected: { metadata: { ownerReferences: [{ uid: "2" }] } },
        },
        {
          name: "$patch: delete removes duplicate elements too",
          doc: { metadata: { ownerReferences: [{ uid: "1", n: 1 }, { uid: "2" }, { uid: "1", n: 2 }] } },
          patch: { metadata: { ownerReferences: [{ uid: "1", $patch: "delete" }] } },
          expected: { metadata: { ownerReferences: [{ uid: "2" }] } },
        },
        {
          name: "$patch: delete of a missing element is a no-op",
          doc: { metadata: { ownerReferences: [{ uid: "1" }] } },
          patch: { metadata: { ownerReferences: [{ uid: "9", $patch: "delete" }] } },
          expected: { metadata: { ownerReferences: [{ uid: "1" }] } },
        },
        {
          name: "a $patch: replace element replaces a merging list",
          doc: { status: { conditions: [{ type: "A" }, { type: "B" }] } },
          resource: "pods",
          patch: { status: { conditions: [{ $patch: "replace" }, { type: "C" }] } },
          expected: { status: { conditions: [{ type: "C" }] } },
        },
        {
          name: "a $patch: replace element replaces a primitive set",
          doc: { metadata: { finalizers: ["a", "b"] } },
          patch: { metadata: { finalizers: ["c", { $patch: "replace" }] } },
          expected: { metadata: { finalizers: ["c"] } },
        },
        {
          name: "$deleteFromPrimitiveList removes finalizers",
          doc: { metadata: { finalizers: ["a", "b", "c", "b"] } },
          patch: { metadata: { "$deleteFromPrimitiveList/finalizers": ["b", "zzz"] } },
          expected: { metadata: { finalizers: ["a", "c"] } },
        },
        {
          name: "$deleteFromPrimitiveList together with additions",
          doc: { metadata: { finalizers: ["a", "b"] } },
          patch: { metadata: { "$deleteFromPrimitiveList/finalizers": ["a"], finalizers: ["c"] } },
          expected: { metadata: { finalizers: ["c", "b"] } },
        },
        {
          name: "$deleteFromPrimitiveList of a missing list stores the list, as upstream does",
          doc: { metadata: {} },
          patch: { metadata: { "$deleteFromPrimitiveList/finalizers": ["a"] } },
          expected: { metadata: { finalizers: ["a"] } },
        },
        {
          name: "kubectl's removal from the middle: $setElementOrder with $deleteFromPrimitiveList",
          doc: { metadata: { finalizers: ["a", "b", "c"] } },
          patch: {
            metadata: {
              "$setElementOrder/finalizers": ["a", "c"],
              "$deleteFromPrimitiveList/finalizers": ["b"],
            },
          },
          expected: { metadata: { finalizers: ["a", "c"] } },
        },
        {
          name: "$setElementOrder puts an added condition where it is asked to",
          resource: "pods",
          doc: { status: { conditions: [{ type: "A" }, { type: "B" }] } },
          patch: {
            status: {
              "$setElementOrder/conditions": [{ type: "A" }, { type: "B" }, { type: "C" }],
              conditions: [{ type: "C", status: "True" }],
            },
          },
          expected: { status: { conditions: [{ type: "A" }, { type: "B" }, { type: "C", status: "True" }] } },
        },
        {
          name: "kubectl's $setElementOrder with an added finalizer",
          doc: { metadata: { finalizers: ["a"] } },
          patch: { metadata: { finalizers: ["b"], "$setElementOrder/finalizers": ["b", "a"] } },
          expected: { metadata: { finalizers: ["b", "a"] } },
        },
        {
          name: "$setElementOrder keeps server-only finalizers in place",
          doc: { metadata: { finalizers: ["a", "server", "b"] } },
          patch: { metadata: { finalizers: ["c"], "$setElementOrder/finalizers": ["a", "b", "c"] } },
          expected: { metadata: { finalizers: ["a", "server", "b", "c"] } },
        },
        {
          name: "$setElementOrder reorders a keyed list",
          resource: "pods",
          doc: { spec: { containers: [{ name: "a" }, { name: "b" }] } },
          patch: {
            spec: {
              "$setElementOrder/containers": [{ name: "b" }, { name: "a" }],
              containers: [{ name: "a", image: "x" }],
            },
          },
          expected: { spec: { containers: [{ name: "b" }, { name: "a", image: "x" }] } },
        },
        {
          name: "$setElementOrder on an atomic list leaves the patched list as it is",
          doc: { spec: { accessModes: ["A"] } },
          patch: { spec: { accessModes: ["B", "C"], "$setElementOrder/accessModes": ["B", "C"] } },
          expected: { spec: { accessModes: ["B", "C"] } },
        },
        {
          name: "$retainKeys drops keys that are not listed",
          resource: "pods",
          doc: { spec: { volumes: [{ name: "v", emptyDir: {}, extra: 1 }] } },
          patch: {
            spec: { volumes: [{ name: "v", $retainKeys: ["name", "hostPath"], hostPath: { path: "/x" } }] },
          },
          expected: { spec: { volumes: [{ name: "v", hostPath: { path: "/x" } }] } },
        },
        {
          name: "$retainKeys lets a deletion of a key it does not list through",
          doc: { spec: { strategy: { type: "Recreate", extra: 1 } } },
          patch: { spec: { strategy: { $retainKeys: ["type"], type: "Recreate", extra: null } } },
          expected: { spec: { strategy: { type: "Recreate" } } },
        },
        {
          name: "$retainKeys on a map",
          doc: { spec: { strategy: { type: "Recreate", rollingUpdate: { maxSurge: 1 } } } },
          patch: { spec: { strategy: { $retainKeys: ["type"], type: "Recreate" } } },
          expected: { spec: { strategy: { type: "Recreate" } } },
        },
        {
          name: "directives inside newly added values are stripped",
          resource: "pods",
          doc: { spec: {} },
          patch: {
            spec: {
              containers: [
                { name: "a", "$setElementOrder/env": [{ name: "X" }], env: [{ name: "X", value: "1" }] },
              ],
              tolerations: [{ key: "t", $patch: "merge" }],
            },
            metadata: { labels: { $patch: "replace", a: "1" } },
          },
          expected: {
            spec: {
              containers: [{ name: "a", env: [{ name: "X", value: "1" }] }],
              tolerations: [{ key: "t" }],
            },
            metadata: { labels: { a: "1" } },
          },
        },
        {
          name: "$patch: delete of the whole object",
          doc: { a: 1 },
          patch: { $patch: "delete" },
          expected: {},
        },
      ];
    for (const { name, resource, doc, patch, expected } of directiveCases) {
      it(name, () => {
        const result = applyStrategicMergePatch(doc, patch, resource ?? "persistentvolumeclaims");
        assert.deepEqual(result, expected);
        assertNoDirectives(result);
      });
    }
  });

  describe("kubectl-style patches on a PVC", () => {
    it("adds a finalizer with $setElementOrder", () => {
      const result = applyStrategicMergePatch(
        pvc(),
        {
          metadata: {
            finalizers: ["example.com/protect"],
            "$setElementOrder/finalizers": ["kubernetes.io/pvc-protection", "example.com/protect"],
          },
        },
        "persistentvolumeclaims",
      );
      assert.deepEqual((result.metadata as Json).finalizers, [
        "kubernetes.io/pvc-protection",
        "example.com/protect",
      ]);
      assertNoDirectives(result);
    });

    it("removes a finalizer with $deleteFromPrimitiveList", () => {
      const result = applyStrategicMergePatch(
        pvc(),
        { metadata: { "$deleteFromPrimitiveList/finalizers": ["kubernetes.io/pvc-protection"] } },
        "persistentvolumeclaims",
      );
      assert.deepEqual((result.metadata as Json).finalizers, []);
      assertNoDirectives(result);
    });

    it("updates a status condition and the phase", () => {
      const result = applyStrategicMergePatch(
        pvc(),
        {
          status: {
            phase: "Bound",
            "$setElementOrder/conditions": [{ type: "Resizing" }, { type: "FileSystemResizePending" }],
            conditions: [{ type: "Resizing", status: "False" }],
          },
        },
        "persistentvolumeclaims",
      );
      assert.deepEqual(result.status, {
        phase: "Bound",
        conditions: [
          { type: "Resizing", status: "False" },
          { type: "FileSystemResizePending", status: "False" },
        ],
      });
    });
  });

  const errorCases: Array<{ name: string; patch: unknown; code: number; message: RegExp }> = [
    { name: "a list patch", patch: [{ a: 1 }], code: 400, message: /must be a JSON object/ },
    { name: "a null patch", patch: null, code: 400, message: /must be a JSON object/ },
    { name: "a string patch", patch: "x", code: 400, message: /must be a JSON object/ },
    {
      name: "an unknown $patch value",
      patch: { metadata: { $patch: "explode" } },
      code: 400,
      message: /unknown \$patch directive "explode" in "metadata"/,
    },
    {
      name: "a keyed-list element without its merge key",
      patch: { metadata: { ownerReferences: [{ name: "a" }] } },
      code: 400,
      message: /elements of "metadata.ownerReferences" must be objects with the merge key "uid"/,
    },
    {
      name: "a primitive in a keyed list",
      patch: { status: { conditions: ["Ready"] } },
      code: 400,
      message: /merge key "type"/,
    },
    {
      name: "an object in a primitive set",
      patch: { metadata: { finalizers: [{ a: 1 }] } },
      code: 400,
      message: /"metadata.finalizers" is a list of primitive values/,
    },
    {
      name: "$retainKeys that is not a list of strings",
      patch: { spec: { $retainKeys: "a" } },
      code: 400,
      message: /\$retainKeys in "spec" must be a list of strings/,
    },
    {
      name: "patch keys missing from $retainKeys",
      patch: { spec: { $retainKeys: ["a"], b: 1 } },
      code: 400,
      message: /patch key "b" in "spec" is not listed in \$retainKeys/,
    },
    {
      name: "$deleteFromPrimitiveList that is not a list",
      patch: { metadata: { "$deleteFromPrimitiveList/finalizers": "a" } },
      code: 400,
      message: /must be a list/,
    },
    {
      name: "$deleteFromPrimitiveList of objects",
      patch: { metadata: { "$deleteFromPrimitiveList/finalizers": [{ a: 1 }] } },
      code: 400,
      message: /may only list primitive values/,
    },
    {
      name: "$setElementOrder that is not a list",
      patch: { metadata: { "$setElementOrder/finalizers": "a" } },
      code: 400,
      message: /must be a list/,
    },
    {
      name: "$setElementOrder of a keyed list without merge keys",
      patch: { status: { "$setElementOrder/conditions": [{ status: "True" }] } },
      code: 400,
      message: /merge key "type"/,
    },
  ];
  for (const { name, patch, code, message } of errorCases) {
    it(`answers ${code} for ${name}`, () => {
      expectPatchError(() => applyStrategicMergePatch(pvc(), patch, "persistentvolumeclaims"), code, message);
    });
  }

  it("mutates neither input and shares nothing with them", () => {
    const doc = pvc();
    const patch = {
      metadata: {
        labels: { app: null },
        "$deleteFromPrimitiveList/finalizers": ["kubernetes.io/pvc-protection"],
      },
      spec: { extra: { list: [1] } },
      status: { conditions: [{ type: "Resizing", status: "False" }], $retainKeys: ["conditions"] },
    };
    const docBefore = structuredClone(doc);
    const patchBefore = structuredClone(patch);
    const result = applyStrategicMergePatch(doc, patch, "persistentvolumeclaims") as {
      spec: { extra: { list: number[] }; resources: Json };
      status: Json;
    };
    assert.deepEqual(doc, docBefore);
    assert.deepEqual(patch, patchBefore);
    // $retainKeys dropped the phase; the conditions still merged by type.
    assert.deepEqual(result.status, {
      conditions: [
        { type: "Resizing", status: "False" },
        { type: "FileSystemResizePending", status: "False" },
      ],
    });
    result.spec.extra.list.push(2);
    result.spec.resources.changed = true;
    assert.deepEqual(doc, docBefore);
    assert.deepEqual(patch, patchBefore);
  });

  it("treats __proto__ as an ordinary key", () => {
    const patch: unknown = JSON.parse('{"metadata":{"labels":{"__proto__":{"polluted":true}}}}');
    const result = applyStrategicMergePatch({ metadata: {} }, patch, "pods") as {
      metadata: { labels: Json };
    };
    assert.equal(Object.getPrototypeOf(result.metadata.labels), Object.prototype);
    assert.ok(Object.hasOwn(result.metadata.labels, "__proto__"));
    assert.equal(({} as Json).polluted, undefined);
  });
});

describe("applyPatch", () => {
  const doc = { metadata: { name: "x", finalizers: ["a"] } };
  const cases: Array<{ contentType: string; patch: unknown; expected: Json }> = [
    {
      contentType: "application/json-patch+json",
      patch: [{ op: "add", path: "/metadata/finalizers/-", value: "b" }],
      expected: { metadata: { name: "x", finalizers: ["a", "b"] } },
    },
    {
      contentType: "application/merge-patch+json",
      patch: { metadata: { finalizers: ["b"] } },
      expected: { metadata: { name: "x", finalizers: ["b"] } },
    },
    {
      contentType: "application/strategic-merge-patch+json",
      patch: { metadata: { finalizers: ["b"] } },
      expected: { metadata: { name: "x", finalizers: ["b", "a"] } },
    },
    {
      contentType: "application/merge-patch+json; charset=utf-8",
      patch: { metadata: { name: "y" } },
      expected: { metadata: { name: "y", finalizers: ["a"] } },
    },
  ];
  for (const { contentType, patch, expected } of cases) {
    it(`dispatches ${JSON.stringify(contentType)}`, () => {
      assert.deepEqual(applyPatch(contentType, doc, patch, "persistentvolumes"), expected);
    });
  }

  // kube-apiserver matches the media type exactly after cutting parameters; it also takes
  // server-side apply, which the sandbox does not implement and so does not offer.
  const unsupported = [
    "application/apply-patch+yaml",
    "application/json",
    "text/plain",
    "",
    " application/merge-patch+json",
    "Application/Strategic-Merge-Patch+JSON",
    ";application/merge-patch+json",
  ];
  for (const contentType of unsupported) {
    it(`answers 415 for ${JSON.stringify(contentType)}`, () => {
      expectPatchError(
        () => applyPatch(contentType, doc, {}, "persistentvolumes"),
        415,
        /^the body of the request was in an unknown format - accepted media types include: application\/json-patch\+json, application\/merge-patch\+json, application\/strategic-merge-patch\+json$/,
      );
    });
  }

  it("answers 415 naming only JSON and merge patch for a custom resource's strategic merge patch", () => {
    expectPatchError(
      () =>
        applyPatch(
          "application/strategic-merge-patch+json",
          doc,
          {},
          "volumesnapshots",
          CUSTOM_RESOURCE_PATCH_TYPES,
        ),
      415,
      /^the body of the request was in an unknown format - accepted media types include: application\/json-patch\+json, application\/merge-patch\+json$/,
    );
  });

  it("answers 400 for a merge patch that is not an object", () => {
    expectPatchError(() => applyPatch("application/merge-patch+json", doc, ["x"], "pods"), 400);
  });

  it("answers 422 when a JSON patch leaves no object", () => {
    expectPatchError(
      () => applyPatch("application/json-patch+json", doc, [{ op: "replace", path: "", value: 1 }], "pods"),
      422,
      /not a JSON object/,
    );
  });

  it("passes JSON patch errors through", () => {
    expectPatchError(() => applyPatch("application/json-patch+json", doc, {}, "pods"), 400);
    expectPatchError(
      () =>
        applyPatch(
          "application/json-patch+json",
          doc,
          [{ op: "test", path: "/metadata/name", value: "y" }],
          "pods",
        ),
      422,
    );
  });

  it("leaves the document alone", () => {
    const before = structuredClone(doc);
    applyPatch(
      "application/strategic-merge-patch+json",
      doc,
      { metadata: { name: "z", finalizers: ["q"] } },
      "pods",
    );
    assert.deepEqual(doc, before);
  });
});
