// AdmissionReview parsing (every malformed shape is an AdmissionReviewError
// with a message naming the problem) and response building (uid echoed,
// patch and patchType together or not at all, warnings deduplicated).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  AdmissionReviewError,
  admitWithChanges,
  allow,
  deny,
  parseAdmissionReview,
  reviewResponse,
} from "../../shared/admission/review.ts";
import { claim, patched, patchOps, review } from "./fixtures.ts";

function body(value: unknown): string {
  return JSON.stringify(value);
}

function withRequest(patch: Record<string, unknown>): string {
  const r = review("persistentvolumeclaims", "CREATE", claim("data"));
  return body({ ...r, request: { ...r.request, ...patch } });
}

describe("parseAdmissionReview: malformed reviews", () => {
  const cases: { name: string; body: string | Uint8Array; error: RegExp }[] = [
    { name: "empty body", body: "", error: /request body is empty/ },
    { name: "whitespace", body: "  \n", error: /request body is empty/ },
    { name: "not JSON", body: "{nope", error: /not valid JSON/ },
    { name: "invalid UTF-8", body: new Uint8Array([0x7b, 0xff, 0x7d]), error: /not valid UTF-8/ },
    { name: "an array", body: "[]", error: /is an array; expected an AdmissionReview object/ },
    { name: "a string", body: '"x"', error: /is a string/ },
    { name: "null", body: "null", error: /is null/ },
    {
      name: "v1beta1",
      body: body({
        ...review("persistentvolumeclaims", "CREATE", claim("a")),
        apiVersion: "admission.k8s.io/v1beta1",
      }),
      error: /only admission\.k8s\.io\/v1 is served .*admissionReviewVersions/,
    },
    {
      name: "no apiVersion",
      body: body({ kind: "AdmissionReview", request: {} }),
      error: /apiVersion is missing/,
    },
    {
      name: "wrong kind",
      body: body({ ...review("persistentvolumeclaims", "CREATE", claim("a")), kind: "Pod" }),
      error: /kind is "Pod"; expected "AdmissionReview"/,
    },
    {
      name: "no request",
      body: body({ apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview" }),
      error: /request is missing/,
    },
    {
      name: "missing uid",
      body: withRequest({ uid: undefined }),
      error: /request\.uid must be a non-empty string/,
    },
    { name: "empty uid", body: withRequest({ uid: "" }), error: /request\.uid must be a non-empty string/ },
    { name: "numeric uid", body: withRequest({ uid: 7 }), error: /request\.uid must be a non-empty string/ },
    { name: "huge uid", body: withRequest({ uid: "u".repeat(300) }), error: /longer than 256/ },
    {
      name: "bad operation",
      body: withRequest({ operation: "PATCH" }),
      error: /request\.operation must be one of/,
    },
    { name: "no operation", body: withRequest({ operation: undefined }), error: /request\.operation/ },
    {
      name: "kind not an object",
      body: withRequest({ kind: "PersistentVolumeClaim" }),
      error: /request\.kind must be an object/,
    },
    {
      name: "kind without version",
      body: withRequest({ kind: { group: "", kind: "PersistentVolumeClaim" } }),
      error: /request\.kind\.version is required/,
    },
    {
      name: "resource missing",
      body: withRequest({ resource: undefined }),
      error: /request\.resource must be an object/,
    },
    {
      name: "resource name not a string",
      body: withRequest({ resource: { group: "", version: "v1", resource: 5 } }),
      error: /request\.resource\.resource must be a string, got a number/,
    },
    {
      name: "object an array",
      body: withRequest({ object: [] }),
      error: /request\.object must be a JSON object or null, got an array/,
    },
    { name: "object a string", body: withRequest({ object: "pvc" }), error: /got a string/ },
    {
      name: "CREATE without object",
      body: withRequest({ object: null }),
      error: /request\.object is required for CREATE/,
    },
    {
      name: "dryRun a string",
      body: withRequest({ dryRun: "true" }),
      error: /request\.dryRun must be a boolean/,
    },
    { name: "name a number", body: withRequest({ name: 1 }), error: /request\.name must be a string/ },
    {
      name: "subResource an object",
      body: withRequest({ subResource: {} }),
      error: /request\.subResource must be a string/,
    },
    {
      name: "UPDATE without oldObject",
      body: body(review("persistentvolumeclaims", "UPDATE", claim("a"), null)),
      error: /request\.oldObject is required for UPDATE/,
    },
    {
      name: "__proto__ key",
      body: '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"__proto__":{}}}',
      error: /"__proto__" key/,
    },
    {
      name: "nesting too deep",
      body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":${"[".repeat(200)}${"]".repeat(200)}}`,
      error: /nests deeper than/,
    },
  ];
  for (const c of cases) {
    test(c.name, () => {
      assert.throws(
        () => parseAdmissionReview(c.body),
        (err: unknown) =>
          err instanceof AdmissionReviewError && err.status === 400 && c.error.test(err.message),
      );
    });
  }
});

describe("parseAdmissionReview: well-formed reviews", () => {
  test("reads what the hooks need and defaults the optional parts", () => {
    const r = review("persistentvolumeclaims", "CREATE", claim("data"));
    const parsed = parseAdmissionReview(Buffer.from(body(r)));
    assert.equal(parsed.uid, r.request.uid);
    assert.deepEqual(parsed.kind, { group: "", version: "v1", kind: "PersistentVolumeClaim" });
    assert.deepEqual(parsed.resource, { group: "", version: "v1", resource: "persistentvolumeclaims" });
    assert.equal(parsed.operation, "CREATE");
    assert.equal(parsed.subResource, "");
    assert.equal(parsed.name, "data");
    assert.equal(parsed.namespace, "default");
    assert.equal(parsed.dryRun, false);
    assert.equal(parsed.oldObject, null);
    assert.deepEqual(parsed.object, claim("data"));
  });

  test("DELETE carries no object; dryRun and subResource are read", () => {
    const r = review("persistentvolumeclaims", "DELETE", null, claim("data"), {
      dryRun: true,
      subResource: "status",
    });
    const parsed = parseAdmissionReview(body(r));
    assert.equal(parsed.object, null);
    assert.equal(parsed.dryRun, true);
    assert.equal(parsed.subResource, "status");
  });
});

describe("responses", () => {
  const request = parseAdmissionReview(body(review("persistentvolumeclaims", "CREATE", claim("data"))));

  test("allow echoes the uid and nothing else unless there are warnings", () => {
    assert.deepEqual(allow(request), { uid: request.uid, allowed: true });
    assert.deepEqual(allow(request, ["a", "b", "a"]), {
      uid: request.uid,
      allowed: true,
      warnings: ["a", "b"],
    });
  });

  test("deny carries code, reason and message", () => {
    const status = { code: 403, reason: "Forbidden", message: "no" };
    assert.deepEqual(deny(request, status), { uid: request.uid, allowed: false, status });
  });

  test("no change: no patch and no patchType", () => {
    const original = claim("data");
    const response = admitWithChanges(request, original, structuredClone(original));
    assert.deepEqual(response, { uid: request.uid, allowed: true });
  });

  test("a change: base64 JSON Patch that turns the original into the mutated object", () => {
    const original = claim("data");
    const mutated = structuredClone(original);
    mutated.metadata.finalizers = ["kubernetes.io/pvc-protection"];
    mutated.metadata.annotations = { "volume.kubernetes.io/storage-provisioner": "x" };
    const response = admitWithChanges(request, original, mutated, ["w"]);
    assert.equal(response.allowed, true);
    assert.deepEqual(response.warnings, ["w"]);
    assert.match(response.patch ?? "", /^[A-Za-z0-9+/]+=*$/);
    assert.deepEqual(patched(original, response), mutated);
    assert.ok(patchOps(response).every((op) => op.op === "add"));
  });

  test("a member set to undefined counts as absent", () => {
    const original = claim("data");
    original.metadata.annotations = { keep: "1", drop: "2" };
    const mutated = {
      ...original,
      metadata: { ...original.metadata, annotations: { keep: "1", drop: undefined }, labels: undefined },
      spec: { ...original.spec, volumeName: "pv-1" },
    };
    const ops = patchOps(admitWithChanges(request, original, mutated));
    assert.deepEqual(ops, [
      { op: "add", path: "/spec/volumeName", value: "pv-1" },
      { op: "remove", path: "/metadata/annotations/drop" },
    ]);
  });

  test("the review wrapper", () => {
    assert.deepEqual(reviewResponse(allow(request)), {
      apiVersion: "admission.k8s.io/v1",
      kind: "AdmissionReview",
      response: { uid: request.uid, allowed: true },
    });
  });
});
