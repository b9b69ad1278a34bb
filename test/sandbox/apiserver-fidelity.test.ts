// Where the sandbox API server must answer byte for byte as kube-apiserver
// does, over real HTTP: Status causes of validation errors, 415 for patch
// types, delete-precondition Conflicts, map key order, strategic-merge order
// of finalizers, and the shape of lists.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { type ApiServerHandle, startApiServer } from "../../sandbox/apiserver/server.ts";

let api: ApiServerHandle;

before(async () => {
  // Objects keep exactly the finalizers a test gives them (test/sandbox/apiserver-storage-admission.test.ts has the plugin).
  api = await startApiServer({ disableAdmissionPlugins: ["StorageObjectInUseProtection"] });
});
after(() => api.close());
beforeEach(async () => {
  await call("POST", "/_sandbox/reset");
});

interface Answer {
  status: number;
  text: string;
  body: Record<string, unknown>;
}

async function call(
  method: string,
  path: string,
  body?: unknown,
  contentType = "application/json",
): Promise<Answer> {
  const res = await fetch(`${api.url}${path}`, {
    method,
    headers: body === undefined ? {} : { "Content-Type": contentType },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: Record<string, unknown> = {};
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // Watch streams and empty bodies stay text.
  }
  return { status: res.status, text, body: parsed };
}

const pvcs = "/api/v1/namespaces/default/persistentvolumeclaims";
const pvs = "/api/v1/persistentvolumes";
const vas = "/apis/storage.k8s.io/v1/volumeattachments";

function claim(name: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, ...((extra.metadata as object) ?? {}) },
    spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
  };
}

async function created(path: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const res = await call("POST", path, body);
  assert.equal(res.status, 201, res.text);
  return res.body;
}

function meta(o: Record<string, unknown>): Record<string, unknown> {
  return o.metadata as Record<string, unknown>;
}

describe("422 Invalid: Status causes as errors.NewInvalid builds them", () => {
  const cases: Array<{
    name: string;
    path: string;
    body: Record<string, unknown>;
    message: string;
    details: Record<string, unknown>;
  }> = [
    {
      name: "two Required errors: the message brackets them, each cause says FieldValueRequired",
      path: pvcs,
      body: { apiVersion: "v1", kind: "PersistentVolumeClaim", metadata: { name: "c" }, spec: {} },
      message:
        'PersistentVolumeClaim "c" is invalid: [spec.accessModes: Required value: at least 1 access mode is required, spec.resources[storage]: Required value]',
      details: {
        name: "c",
        kind: "PersistentVolumeClaim",
        causes: [
          {
            reason: "FieldValueRequired",
            message: "Required value: at least 1 access mode is required",
            field: "spec.accessModes",
          },
          { reason: "FieldValueRequired", message: "Required value", field: "spec.resources[storage]" },
        ],
      },
    },
    {
      name: "one error: no brackets; a grouped kind is Kind.group, with details.group",
      path: vas,
      body: {
        apiVersion: "storage.k8s.io/v1",
        kind: "VolumeAttachment",
        metadata: { name: "va" },
        spec: { attacher: "d", source: { persistentVolumeName: "pv" } },
      },
      message: 'VolumeAttachment.storage.k8s.io "va" is invalid: spec.nodeName: Required value',
      details: {
        name: "va",
        group: "storage.k8s.io",
        kind: "VolumeAttachment",
        causes: [{ reason: "FieldValueRequired", message: "Required value", field: "spec.nodeName" }],
      },
    },
    {
      name: "a second volume source is FieldValueForbidden on that source's path",
      path: pvs,
      body: {
        apiVersion: "v1",
        kind: "PersistentVolume",
        metadata: { name: "pv" },
        spec: {
          accessModes: ["ReadWriteOnce"],
          capacity: { storage: "1Gi" },
          csi: { driver: "d", volumeHandle: "h" },
          hostPath: { path: "/x" },
        },
      },
      message:
        'PersistentVolume "pv" is invalid: spec.hostPath: Forbidden: may not specify more than 1 volume type',
      details: {
        name: "pv",
        kind: "PersistentVolume",
        causes: [
          {
            reason: "FieldValueForbidden",
            message: "Forbidden: may not specify more than 1 volume type",
            field: "spec.hostPath",
          },
        ],
      },
    },
    {
      name: "a bad name is FieldValueInvalid, its value quoted",
      path: pvcs,
      body: claim("Bad_Name"),
      message:
        "PersistentVolumeClaim \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
      details: {
        name: "Bad_Name",
        kind: "PersistentVolumeClaim",
        causes: [
          {
            reason: "FieldValueInvalid",
            message:
              "Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            field: "metadata.name",
          },
        ],
      },
    },
    {
      name: "no name and no generateName: the empty name is left out of details (omitempty)",
      path: pvcs,
      body: { ...claim(""), metadata: {} },
      message:
        'PersistentVolumeClaim "" is invalid: metadata.name: Required value: name or generateName is required',
      details: {
        kind: "PersistentVolumeClaim",
        causes: [
          {
            reason: "FieldValueRequired",
            message: "Required value: name or generateName is required",
            field: "metadata.name",
          },
        ],
      },
    },
  ];
  for (const c of cases) {
    it(c.name, async () => {
      const res = await call("POST", c.path, c.body);
      assert.equal(res.status, 422, res.text);
      assert.deepEqual(res.body, {
        kind: "Status",
        apiVersion: "v1",
        metadata: {},
        status: "Failure",
        message: c.message,
        reason: "Invalid",
        details: c.details,
        code: 422,
      });
    });
  }

  it("new finalizers on an object being deleted: Forbidden, listed sorted as a Go set", async () => {
    await created(pvcs, claim("c", { metadata: { finalizers: ["keep"] } }));
    assert.equal((await call("DELETE", `${pvcs}/c`)).status, 200);
    const res = await call(
      "PATCH",
      `${pvcs}/c`,
      { metadata: { finalizers: ["keep", "z.io/b", "a.io/a"] } },
      "application/merge-patch+json",
    );
    assert.equal(res.status, 422, res.text);
    const details = res.body.details as { causes: unknown[] };
    assert.deepEqual(details.causes, [
      {
        reason: "FieldValueForbidden",
        message:
          'Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"a.io/a", "z.io/b"}',
        field: "metadata.finalizers",
      },
    ]);
  });

  it("an unsupported enumeration value is FieldValueNotSupported, listing the supported ones", async () => {
    const res = await call("POST", "/apis/storage.k8s.io/v1/storageclasses", {
      apiVersion: "storage.k8s.io/v1",
      kind: "StorageClass",
      metadata: { name: "sc" },
      provisioner: "p",
      reclaimPolicy: "Recycle",
      volumeBindingMode: "Later",
    });
    assert.equal(res.status, 422, res.text);
    assert.equal(
      res.body.message,
      'StorageClass.storage.k8s.io "sc" is invalid: [reclaimPolicy: Unsupported value: "Recycle": supported values: "Delete", "Retain", volumeBindingMode: Unsupported value: "Later": supported values: "Immediate", "WaitForFirstConsumer"]',
    );
    assert.deepEqual(
      (res.body.details as { causes: { reason: string }[] }).causes.map((c) => c.reason),
      ["FieldValueNotSupported", "FieldValueNotSupported"],
    );
  });

  it("a driver listed twice on a CSINode is FieldValueDuplicate", async () => {
    const res = await call("POST", "/apis/storage.k8s.io/v1/csinodes", {
      apiVersion: "storage.k8s.io/v1",
      kind: "CSINode",
      metadata: { name: "n" },
      spec: {
        drivers: [
          { name: "d", nodeID: "n" },
          { name: "d", nodeID: "n" },
        ],
      },
    });
    assert.equal(res.status, 422, res.text);
    assert.deepEqual((res.body.details as { causes: unknown[] }).causes, [
      { reason: "FieldValueDuplicate", message: 'Duplicate value: "d"', field: "spec.drivers[1].name" },
    ]);
  });

  it("annotations over 256 KiB are FieldValueTooLong, on create and on update", async () => {
    const big = { "example.com/big": "x".repeat(256 * 1024) };
    const expected = {
      reason: "FieldValueTooLong",
      message: "Too long: may not be more than 262144 bytes",
      field: "metadata.annotations",
    };
    const create = await call("POST", pvcs, claim("c", { metadata: { annotations: big } }));
    assert.equal(create.status, 422, create.text.slice(0, 300));
    assert.deepEqual((create.body.details as { causes: unknown[] }).causes, [expected]);
    await created(pvcs, claim("c"));
    const update = await call(
      "PATCH",
      `${pvcs}/c`,
      { metadata: { annotations: big } },
      "application/merge-patch+json",
    );
    assert.equal(update.status, 422);
    assert.deepEqual((update.body.details as { causes: unknown[] }).causes, [expected]);
  });

  it("a VolumeAttachment status error message over 1024 bytes is refused on the status subresource", async () => {
    await created(vas, {
      apiVersion: "storage.k8s.io/v1",
      kind: "VolumeAttachment",
      metadata: { name: "va" },
      spec: { attacher: "d", nodeName: "n", source: { persistentVolumeName: "pv" } },
    });
    const res = await call(
      "PATCH",
      `${vas}/va/status`,
      { status: { attached: false, attachError: { message: "e".repeat(1025) } } },
      "application/merge-patch+json",
    );
    assert.equal(res.status, 422, res.text);
    assert.equal(
      res.body.message,
      'VolumeAttachment.storage.k8s.io "va" is invalid: status.attachError.message: Too long: may not be more than 262144 bytes',
    );
    const fits = await call(
      "PATCH",
      `${vas}/va/status`,
      { status: { attached: false, attachError: { message: "e".repeat(1024) } } },
      "application/merge-patch+json",
    );
    assert.equal(fits.status, 200);
  });

  it("an immutable field changed is FieldValueInvalid with the new value", async () => {
    await created("/apis/storage.k8s.io/v1/storageclasses", {
      apiVersion: "storage.k8s.io/v1",
      kind: "StorageClass",
      metadata: { name: "sc" },
      provisioner: "p",
      volumeBindingMode: "Immediate",
    });
    const res = await call(
      "PATCH",
      "/apis/storage.k8s.io/v1/storageclasses/sc",
      { volumeBindingMode: "WaitForFirstConsumer" },
      "application/merge-patch+json",
    );
    assert.equal(res.status, 422, res.text);
    assert.equal(
      res.body.message,
      'StorageClass.storage.k8s.io "sc" is invalid: volumeBindingMode: Invalid value: "WaitForFirstConsumer": field is immutable',
    );
  });
});

describe("415 Unsupported Media Type", () => {
  const builtIn =
    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json";

  for (const contentType of ["text/plain", "application/json", "APPLICATION/MERGE-PATCH+JSON"]) {
    it(`PATCH with ${contentType}: 415 naming the patch types`, async () => {
      await created(pvcs, claim("c"));
      const res = await call("PATCH", `${pvcs}/c`, { metadata: { labels: { a: "1" } } }, contentType);
      assert.equal(res.status, 415);
      assert.deepEqual(res.body, {
        kind: "Status",
        apiVersion: "v1",
        metadata: {},
        status: "Failure",
        message: builtIn,
        reason: "UnsupportedMediaType",
        code: 415,
      });
      assert.equal(meta((await call("GET", `${pvcs}/c`)).body).labels, undefined);
    });
  }

  it("server-side apply is not implemented: 415 names only the types the sandbox applies", async () => {
    await created(pvcs, claim("c"));
    const res = await call(
      "PATCH",
      `${pvcs}/c?fieldManager=test`,
      "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: c\n",
      "application/apply-patch+yaml",
    );
    assert.equal(res.status, 415);
    assert.equal(res.body.message, builtIn);
    assert.doesNotMatch(String(res.body.message), /apply-patch/);
  });

  it("the media type is checked before the object is looked up (415, not 404)", async () => {
    const res = await call("PATCH", `${pvcs}/missing`, "{}", "text/plain");
    assert.equal(res.status, 415);
  });

  it("parameters after ';' are ignored", async () => {
    await created(pvcs, claim("c"));
    const res = await call(
      "PATCH",
      `${pvcs}/c`,
      { metadata: { labels: { a: "1" } } },
      "application/merge-patch+json; charset=utf-8",
    );
    assert.equal(res.status, 200, res.text);
  });

  it("a custom resource (VolumeSnapshot) refuses strategic merge, as a CRD does", async () => {
    await created("/apis/snapshot.storage.k8s.io/v1/namespaces/default/volumesnapshots", {
      apiVersion: "snapshot.storage.k8s.io/v1",
      kind: "VolumeSnapshot",
      metadata: { name: "s" },
      spec: { source: { persistentVolumeClaimName: "c" } },
    });
    const res = await call(
      "PATCH",
      "/apis/snapshot.storage.k8s.io/v1/namespaces/default/volumesnapshots/s",
      { metadata: { labels: { a: "1" } } },
      "application/strategic-merge-patch+json",
    );
    assert.equal(res.status, 415);
    assert.equal(
      res.body.message,
      "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json",
    );
  });

  it("create and update bodies: 415 for a non-JSON type, JSON in any case or with parameters accepted", async () => {
    const text = await call("POST", pvcs, JSON.stringify(claim("c")), "text/plain");
    assert.equal(text.status, 415);
    assert.equal(text.body.reason, "UnsupportedMediaType");
    assert.equal(
      text.body.message,
      "the body of the request was in an unknown format - accepted media types include: application/json",
    );
    assert.equal((await call("POST", pvcs, claim("c"), "Application/JSON; charset=utf-8")).status, 201);
  });
});

describe("delete precondition conflicts", () => {
  it("details.kind is the Kind (PersistentVolumeClaim), not the resource, as rest.BeforeDelete builds it", async () => {
    const c = await created(pvcs, claim("c"));
    const res = await call("DELETE", `${pvcs}/c`, { preconditions: { uid: "not-the-uid" } });
    assert.equal(res.status, 409);
    assert.deepEqual(res.body, {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: `Operation cannot be fulfilled on PersistentVolumeClaim "c": the UID in the precondition (not-the-uid) does not match the UID in record (${String(meta(c).uid)}). The object might have been deleted and then recreated`,
      reason: "Conflict",
      details: { name: "c", kind: "PersistentVolumeClaim" },
      code: 409,
    });
    assert.equal((await call("GET", `${pvcs}/c`)).status, 200);
  });

  it("a resourceVersion precondition on a grouped kind: Kind.group in the message, details.group", async () => {
    const va = await created(vas, {
      apiVersion: "storage.k8s.io/v1",
      kind: "VolumeAttachment",
      metadata: { name: "va" },
      spec: { attacher: "d", nodeName: "n", source: { persistentVolumeName: "pv" } },
    });
    const res = await call("DELETE", `${vas}/va`, { preconditions: { resourceVersion: "1" } });
    assert.equal(res.status, 409);
    assert.equal(
      res.body.message,
      `Operation cannot be fulfilled on VolumeAttachment.storage.k8s.io "va": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record (${String(meta(va).resourceVersion)}). The object might have been modified`,
    );
    assert.deepEqual(res.body.details, { name: "va", group: "storage.k8s.io", kind: "VolumeAttachment" });
  });

  it("an update's resourceVersion conflict still names the resource (persistentvolumeclaims)", async () => {
    const c = await created(pvcs, claim("c"));
    const stale = { ...c, metadata: { ...meta(c), resourceVersion: "1", labels: { a: "1" } } };
    const res = await call("PUT", `${pvcs}/c`, stale);
    assert.equal(res.status, 409);
    assert.deepEqual(res.body.details, { name: "c", kind: "persistentvolumeclaims" });
    assert.match(String(res.body.message), /^Operation cannot be fulfilled on persistentvolumeclaims "c": /);
  });
});

describe("maps are written with sorted keys, as Go's encoding/json writes them", () => {
  const labels = { b: "2", "10": "x", a: "1", "9": "y", c: "3" };
  const sortedLabels = '"labels":{"10":"x","9":"y","a":"1","b":"2","c":"3"}';
  const annotations = { "z.io/last": "z", "a.io/first": "a" };
  const sortedAnnotations = '"annotations":{"a.io/first":"a","z.io/last":"z"}';

  it("in the create answer, a GET, a list and a watch event", async () => {
    const watch = await fetch(`${api.url}${pvcs}?watch=true`);
    const reader = watch.body!.getReader();
    const createdRes = await call("POST", pvcs, claim("c", { metadata: { labels, annotations } }));
    assert.equal(createdRes.status, 201);
    const got = await call("GET", `${pvcs}/c`);
    const list = await call("GET", pvcs);
    for (const text of [createdRes.text, got.text, list.text]) {
      assert.ok(text.includes(sortedLabels), text);
      assert.ok(text.includes(sortedAnnotations), text);
    }
    let streamed = "";
    while (!streamed.includes("\n")) {
      const { value, done } = await reader.read();
      if (done) break;
      streamed += Buffer.from(value).toString("utf8");
    }
    await reader.cancel();
    assert.match(streamed, /^\{"type":"ADDED","object":\{/);
    assert.ok(streamed.includes(sortedLabels), streamed);
    assert.ok(streamed.includes(sortedAnnotations), streamed);
  });

  it("after a patch, in a dry run, and in other maps (resource requests, class parameters)", async () => {
    await created(pvcs, claim("c"));
    const patched = await call(
      "PATCH",
      `${pvcs}/c`,
      { metadata: { labels: { z: "1", m: "2" } } },
      "application/merge-patch+json",
    );
    assert.ok(patched.text.includes('"labels":{"m":"2","z":"1"}'), patched.text);
    const dry = await call("POST", `${pvcs}?dryRun=All`, claim("d", { metadata: { labels } }));
    assert.equal(dry.status, 201);
    assert.ok(dry.text.includes(sortedLabels), dry.text);
    const sc = await call("POST", "/apis/storage.k8s.io/v1/storageclasses", {
      apiVersion: "storage.k8s.io/v1",
      kind: "StorageClass",
      metadata: { name: "sc" },
      provisioner: "p",
      parameters: { type: "ssd", fsType: "ext4", "csi.storage.k8s.io/fstype": "xfs" },
    });
    assert.ok(
      sc.text.includes('"parameters":{"csi.storage.k8s.io/fstype":"xfs","fsType":"ext4","type":"ssd"}'),
      sc.text,
    );
    const pvc = await call("POST", pvcs, {
      ...claim("e"),
      spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi", cpu: "1" } } },
    });
    assert.ok(pvc.text.includes('"requests":{"cpu":"1","storage":"1Gi"}'), pvc.text);
  });

  it("an empty map is left out, as Go's omitempty does, and writing one is no change", async () => {
    const c = await call("POST", pvcs, claim("c", { metadata: { labels: {}, annotations: {} } }));
    assert.equal(c.status, 201);
    assert.equal(meta(c.body).labels, undefined);
    assert.equal(meta(c.body).annotations, undefined);
    assert.ok(!c.text.includes('"labels"'), c.text);
    const again = await call("PUT", `${pvcs}/c`, { ...c.body, metadata: { ...meta(c.body), labels: {} } });
    assert.equal(again.status, 200, again.text);
    assert.equal(meta(again.body).resourceVersion, meta(c.body).resourceVersion);
  });

  it("a custom resource has every key sorted (upstream serves it from an unstructured map)", async () => {
    const res = await call("POST", "/apis/snapshot.storage.k8s.io/v1/namespaces/default/volumesnapshots", {
      apiVersion: "snapshot.storage.k8s.io/v1",
      kind: "VolumeSnapshot",
      metadata: { name: "s" },
      spec: { volumeSnapshotClassName: "k", source: { persistentVolumeClaimName: "c" } },
    });
    assert.equal(res.status, 201, res.text);
    assert.ok(
      res.text.includes('"spec":{"source":{"persistentVolumeClaimName":"c"},"volumeSnapshotClassName":"k"}'),
      res.text,
    );
    assert.ok(
      res.text.startsWith('{"apiVersion":"snapshot.storage.k8s.io/v1","kind":"VolumeSnapshot"'),
      res.text,
    );
  });
});

describe("strategic merge patch of finalizers over HTTP", () => {
  const smp = "application/strategic-merge-patch+json";

  async function finalizersAfter(start: string[], patch: Record<string, unknown>): Promise<unknown> {
    await created(pvcs, claim("c", { metadata: { finalizers: start } }));
    const res = await call("PATCH", `${pvcs}/c`, { metadata: patch }, smp);
    assert.equal(res.status, 200, res.text);
    return meta(res.body).finalizers;
  }

  it("a finalizer added without $setElementOrder goes in front of the existing ones", async () => {
    assert.deepEqual(
      await finalizersAfter(["kubernetes.io/pvc-protection"], { finalizers: ["example.com/x"] }),
      ["example.com/x", "kubernetes.io/pvc-protection"],
    );
  });

  it("kubectl's patch with $setElementOrder appends where it asks to", async () => {
    assert.deepEqual(
      await finalizersAfter(["kubernetes.io/pvc-protection"], {
        "$setElementOrder/finalizers": ["kubernetes.io/pvc-protection", "example.com/x"],
        finalizers: ["example.com/x"],
      }),
      ["kubernetes.io/pvc-protection", "example.com/x"],
    );
  });

  it("$deleteFromPrimitiveList removes one and keeps the others' order", async () => {
    assert.deepEqual(
      await finalizersAfter(["a", "b", "c"], {
        "$setElementOrder/finalizers": ["a", "c"],
        "$deleteFromPrimitiveList/finalizers": ["b"],
      }),
      ["a", "c"],
    );
  });

  it("the patch's values in its order, each once; a server value that stood before one of them stays before it", async () => {
    // d is new (so first); a stood before b on the server, so it goes in before b.
    assert.deepEqual(await finalizersAfter(["a", "b"], { finalizers: ["d", "b", "c", "d"] }), [
      "d",
      "a",
      "b",
      "c",
    ]);
  });
});

describe("lists", () => {
  async function threeClaims(): Promise<void> {
    for (const name of ["a", "b", "c"]) {
      await created(pvcs, claim(name, { metadata: { labels: { app: name === "c" ? "other" : "db" } } }));
    }
  }

  it("items carry no kind or apiVersion; the list has its own kind, apiVersion and resourceVersion", async () => {
    await threeClaims();
    const list = await call("GET", pvcs);
    assert.equal(list.body.kind, "PersistentVolumeClaimList");
    assert.equal(list.body.apiVersion, "v1");
    assert.deepEqual(Object.keys(list.body), ["kind", "apiVersion", "metadata", "items"]);
    assert.match(String(meta(list.body).resourceVersion), /^\d+$/);
    assert.deepEqual(Object.keys(meta(list.body)), ["resourceVersion"]);
    const items = list.body.items as Record<string, unknown>[];
    assert.equal(items.length, 3);
    for (const item of items) {
      assert.equal(item.kind, undefined);
      assert.equal(item.apiVersion, undefined);
      assert.ok(item.metadata);
    }
    // A single GET and the stored object keep theirs.
    const got = await call("GET", `${pvcs}/a`);
    assert.equal(got.body.kind, "PersistentVolumeClaim");
    assert.equal(got.body.apiVersion, "v1");
    const again = await call("GET", "/apis/storage.k8s.io/v1/storageclasses");
    assert.equal(again.body.kind, "StorageClassList");
    assert.equal(again.body.apiVersion, "storage.k8s.io/v1");
  });

  it("a page with more to come has continue and remainingItemCount; the last page has neither", async () => {
    await threeClaims();
    const first = await call("GET", `${pvcs}?limit=1`);
    assert.equal(meta(first.body).remainingItemCount, 2);
    assert.ok(meta(first.body).continue);
    const rest = await call(
      "GET",
      `${pvcs}?limit=5&continue=${encodeURIComponent(String(meta(first.body).continue))}`,
    );
    assert.equal((rest.body.items as unknown[]).length, 2);
    assert.deepEqual(Object.keys(meta(rest.body)), ["resourceVersion"]);
  });

  it("a filtered page has continue but no remainingItemCount (upstream cannot count it)", async () => {
    await threeClaims();
    for (const query of ["labelSelector=app%3Ddb", "fieldSelector=metadata.namespace%3Ddefault"]) {
      const page = await call("GET", `${pvcs}?limit=1&${query}`);
      assert.equal((page.body.items as unknown[]).length, 1);
      assert.ok(meta(page.body).continue, query);
      assert.equal(meta(page.body).remainingItemCount, undefined, query);
    }
  });

  it("a custom resource's list is an unstructured map: keys sorted, items keep kind and apiVersion", async () => {
    const path = "/apis/snapshot.storage.k8s.io/v1/namespaces/default/volumesnapshots";
    for (const name of ["s1", "s2"]) {
      await created(path, {
        apiVersion: "snapshot.storage.k8s.io/v1",
        kind: "VolumeSnapshot",
        metadata: { name },
        spec: { source: { persistentVolumeClaimName: "c" } },
      });
    }
    const list = await call("GET", `${path}?limit=1`);
    assert.deepEqual(Object.keys(list.body), ["apiVersion", "items", "kind", "metadata"]);
    assert.equal(list.body.kind, "VolumeSnapshotList");
    assert.deepEqual(Object.keys(meta(list.body)), ["continue", "remainingItemCount", "resourceVersion"]);
    const [item] = list.body.items as Record<string, unknown>[];
    assert.equal(item?.kind, "VolumeSnapshot");
    assert.equal(item?.apiVersion, "snapshot.storage.k8s.io/v1");
  });

  it("deletecollection answers a list whose items carry no kind either", async () => {
    await threeClaims();
    const res = await call("DELETE", `${pvcs}?labelSelector=app%3Ddb`);
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.kind, "PersistentVolumeClaimList");
    const items = res.body.items as Record<string, unknown>[];
    assert.deepEqual(
      items.map((i) => [meta(i).name, i.kind]),
      [
        ["a", undefined],
        ["b", undefined],
      ],
    );
  });
});
