// AdmissionReviews exactly as kube-apiserver 1.20 sent them (captured, see
// kube-apiserver-1.20-reviews.json), through the admission function over
// HTTP with lookups against the sandbox API server. A real API server sends
// `metadata.creationTimestamp: null` for an object it has not stored yet,
// managedFields, `status: {}`, options and userInfo: all of it must be
// taken, while garbage in a field the rules read is still a 400.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, beforeEach, describe, test } from "node:test";
import request from "supertest";
import { createAdmissionApp } from "../../functions/admission/app.ts";
import { createClusterLookups } from "../../shared/admission/cluster-lookups.ts";
import { defaultAdmissionConfig } from "../../shared/admission/config.ts";
import { createAdmissionHooks } from "../../shared/admission/hooks.ts";
import type { AdmissionResponse } from "../../shared/admission/review.ts";
import type { FunctionApp } from "../../shared/http/function-app.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import type { PersistentVolumeClaim } from "../../shared/kube/types.ts";
import { createLogger } from "../../shared/log.ts";
import { createMetricsRegistry } from "../../shared/metrics.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";
import { csiDriver, ourDriver, patched, storageClass } from "./fixtures.ts";

interface Captured {
  seenBy: "mutating webhook" | "validating webhook";
  review: { apiVersion: string; kind: string; request: Record<string, unknown> & ReviewRequest };
}
interface ReviewRequest {
  uid: string;
  operation: string;
  resource: { resource: string };
  object: Record<string, unknown> | null;
  oldObject: Record<string, unknown> | null;
  dryRun: boolean;
}

const captured = (
  JSON.parse(readFileSync(new URL("./kube-apiserver-1.20-reviews.json", import.meta.url), "utf8")) as {
    reviews: Captured[];
  }
).reviews;

function find(seenBy: Captured["seenBy"], operation: string, resource: string, dryRun = false): Captured {
  const found = captured.find(
    (c) =>
      c.seenBy === seenBy &&
      c.review.request.operation === operation &&
      c.review.request.resource.resource === resource &&
      c.review.request.dryRun === dryRun,
  );
  assert.ok(found, `a captured ${seenBy} ${operation} of ${resource}`);
  return structuredClone(found);
}

/** The endpoint a webhook of deploy/webhooks.yaml (or one matching more) would post this review to. */
function endpointOf(c: Captured): string {
  const resource = c.review.request.resource.resource;
  if (resource === "volumeattachments") return "/validate/volumeattachments";
  if (resource === "persistentvolumes") return "/mutate/persistentvolumes";
  return c.seenBy === "mutating webhook"
    ? "/mutate/persistentvolumeclaims"
    : "/validate/persistentvolumeclaims";
}

let sandbox: TestSandbox;
let kube: KubeJsonClient;
let app: FunctionApp;

before(async () => {
  sandbox = await startTestSandbox();
  const config = { ...defaultAdmissionConfig(), provisionerDrivers: new Set([ourDriver]) };
  kube = new KubeJsonClient(sandbox.kubeConfig);
  const metrics = createMetricsRegistry({ defaultMetrics: false });
  const lookups = createClusterLookups(kube, {
    timeoutMs: config.lookupTimeoutMs,
    cacheTtlMs: 0,
    cacheMaxEntries: config.cacheMaxEntries,
    metrics,
  });
  app = createAdmissionApp({
    hooks: createAdmissionHooks({ lookups, config }),
    logger: createLogger({ name: "admission", level: "silent" }),
    metrics,
  });
});
after(async () => {
  await kube.close();
  await sandbox.close();
});
beforeEach(async () => {
  await sandbox.admin.reset();
  await sandbox.admin.seed([storageClass("fast", { isDefault: true }), csiDriver(ourDriver)]);
});

async function send(path: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await request(app)
    .post(path)
    .set("content-type", "application/json")
    .send(JSON.stringify(body));
  return { status: res.status, body: res.body as Record<string, unknown> };
}

async function review(path: string, body: Captured["review"]): Promise<AdmissionResponse> {
  const res = await send(path, body);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const response = res.body.response as AdmissionResponse;
  assert.equal(response.uid, body.request.uid);
  return response;
}

describe("reviews as kube-apiserver 1.20 sends them", () => {
  test("the captures have what makes them real: creationTimestamp null on a mutating CREATE, object null on DELETE", () => {
    const create = find("mutating webhook", "CREATE", "persistentvolumeclaims").review.request;
    assert.equal((create.object!.metadata as { creationTimestamp: unknown }).creationTimestamp, null);
    assert.ok(Array.isArray((create.object!.metadata as { managedFields?: unknown }).managedFields));
    assert.deepEqual(create.options, {
      kind: "CreateOptions",
      apiVersion: "meta.k8s.io/v1",
      fieldManager: "kubectl-create",
    });
    const remove = find("mutating webhook", "DELETE", "persistentvolumeclaims").review.request;
    assert.equal(remove.object, null);
    assert.equal((remove.oldObject!.metadata as { name: string }).name, "cap-claim");
    assert.equal((remove.options as { kind: string }).kind, "DeleteOptions");
  });

  for (const c of captured) {
    const r = c.review.request;
    test(`${c.seenBy} ${r.operation} ${r.resource.resource}${r.dryRun ? " (dry run)" : ""}: 200 and allowed`, async () => {
      const response = await review(endpointOf(c), c.review);
      assert.equal(response.allowed, true, JSON.stringify(response));
    });
  }

  test("PVC CREATE: the default class, hand-over and our finalizer, patched onto the object as sent (null timestamp kept)", async () => {
    const c = find("mutating webhook", "CREATE", "persistentvolumeclaims");
    const sent = c.review.request.object as unknown as PersistentVolumeClaim;
    const response = await review("/mutate/persistentvolumeclaims", c.review);
    const out = patched(sent, response);
    assert.equal(out.spec.storageClassName, "fast");
    assert.deepEqual(out.metadata.finalizers, [
      "kubernetes.io/pvc-protection",
      "storage.kube-storage-functions.io/provisioning",
    ]);
    assert.deepEqual(out.metadata.annotations, {
      "volume.kubernetes.io/storage-provisioner": ourDriver,
      "volume.beta.kubernetes.io/storage-provisioner": ourDriver,
    });
    assert.equal((out.metadata as { creationTimestamp?: unknown }).creationTimestamp, null);
    assert.deepEqual(
      (out as unknown as { metadata: { managedFields: unknown } }).metadata.managedFields,
      (sent as unknown as { metadata: { managedFields: unknown } }).metadata.managedFields,
    );
  });

  test("PVC CREATE with generateName in a server-side dry run: the same mutation", async () => {
    const c = find("mutating webhook", "CREATE", "persistentvolumeclaims", true);
    assert.equal(c.review.request.name, undefined);
    const response = await review("/mutate/persistentvolumeclaims", c.review);
    const out = patched(c.review.request.object as unknown as PersistentVolumeClaim, response);
    assert.equal(out.spec.storageClassName, "fast");
  });

  test("PV CREATE already carrying pv-protection (kube-apiserver's own plugin ran first): no patch", async () => {
    const response = await review(
      "/mutate/persistentvolumes",
      find("mutating webhook", "CREATE", "persistentvolumes").review,
    );
    assert.equal(response.patch, undefined);
  });

  test("a forbidden claim update made from the captured one is denied with upstream's message", async () => {
    const c = find("validating webhook", "UPDATE", "persistentvolumeclaims");
    const spec = (c.review.request.object as { spec: { accessModes: string[] } }).spec;
    spec.accessModes = ["ReadWriteMany"];
    const denied = await review("/validate/persistentvolumeclaims", c.review);
    assert.equal(denied.allowed, false);
    assert.equal(denied.status?.code, 422);
    assert.match(
      denied.status?.message ?? "",
      /^PersistentVolumeClaim "cap-claim" is invalid: spec: Forbidden: spec is immutable after creation except resources\.requests and volumeAttributesClassName for bound claims/,
    );

    const grown = find("validating webhook", "UPDATE", "persistentvolumeclaims");
    const requests = (
      grown.review.request.object as { spec: { resources: { requests: { storage: string } } } }
    ).spec.resources.requests;
    requests.storage = "2Gi";
    const notBound = await review("/validate/persistentvolumeclaims", grown.review);
    assert.equal(notBound.allowed, false);
    assert.deepEqual(notBound.status, {
      code: 403,
      reason: "Forbidden",
      message:
        'persistentvolumeclaims "cap-claim" is forbidden: Only bound persistent volume claims can be expanded',
    });
  });

  test("null is taken wherever Go would take it; garbage in a field the rules read is still a 400", async () => {
    const nulls = find("mutating webhook", "CREATE", "persistentvolumeclaims");
    const object = nulls.review.request.object as Record<string, Record<string, unknown>>;
    Object.assign(object.metadata!, { annotations: null, labels: null, deletionTimestamp: null });
    Object.assign(object.spec!, { storageClassName: null, volumeName: null, selector: null });
    object.status = null as unknown as Record<string, unknown>;
    const response = await review("/mutate/persistentvolumeclaims", nulls.review);
    const out = patched(object as unknown as PersistentVolumeClaim, response);
    assert.equal(out.spec.storageClassName, "fast");
    assert.deepEqual(Object.keys(out.metadata.annotations ?? {}).length, 2);

    const cases: [string, (o: Record<string, Record<string, unknown>>) => void, RegExp][] = [
      [
        "a number for a timestamp",
        (o) => {
          o.metadata!.creationTimestamp = 12;
        },
        /request\.object\.metadata\.creationTimestamp must be an RFC 3339 timestamp \(or null\), got a number/,
      ],
      [
        "a timestamp that is not RFC 3339",
        (o) => {
          o.metadata!.creationTimestamp = "yesterday";
        },
        /creationTimestamp must be an RFC 3339 timestamp/,
      ],
      [
        "a deletionTimestamp object",
        (o) => {
          o.metadata!.deletionTimestamp = {};
        },
        /deletionTimestamp must be an RFC 3339 timestamp \(or null\), got an object/,
      ],
      [
        "finalizers as a string",
        (o) => {
          o.metadata!.finalizers = "kubernetes.io/pvc-protection";
        },
        /metadata\.finalizers must be an array of strings/,
      ],
      [
        "a null finalizer in the list",
        (o) => {
          o.metadata!.finalizers = [null];
        },
        /metadata\.finalizers\[0\] must be a string, got null/,
      ],
      [
        "a label that is a number",
        (o) => {
          o.metadata!.labels = { a: 1 };
        },
        /metadata\.labels\[a\] must be a string, got a number/,
      ],
      [
        "a class that is a number",
        (o) => {
          o.spec!.storageClassName = 3;
        },
        /spec\.storageClassName must be a string or null, got a number/,
      ],
      [
        "no spec at all",
        (o) => {
          o.spec = null as unknown as Record<string, unknown>;
        },
        /request\.object\.spec must be an object/,
      ],
    ];
    for (const [what, spoil, error] of cases) {
      const c = find("mutating webhook", "CREATE", "persistentvolumeclaims");
      spoil(c.review.request.object as Record<string, Record<string, unknown>>);
      const res = await send("/mutate/persistentvolumeclaims", c.review);
      assert.equal(res.status, 400, what);
      assert.match(JSON.stringify(res.body), error, what);
    }
  });
});
