// The admission function over HTTP (supertest) against the sandbox API
// server: every endpoint end to end with real lookups, the wire errors
// (415, 400, 413, 404, 405), dryRun, a failing and a slow API under each
// hook's failure policy and deadline, the lookup cache measured by the
// sandbox's request counters, and no write to the API, ever.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, test } from "node:test";
import request from "supertest";
import { createAdmissionApp } from "../../functions/admission/app.ts";
import { createClusterLookups } from "../../shared/admission/cluster-lookups.ts";
import { type AdmissionConfig, defaultAdmissionConfig } from "../../shared/admission/config.ts";
import { createAdmissionHooks } from "../../shared/admission/hooks.ts";
import type { AdmissionResponse } from "../../shared/admission/review.ts";
import type { FunctionApp } from "../../shared/http/function-app.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { createLogger } from "../../shared/log.ts";
import { createMetricsRegistry } from "../../shared/metrics.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";
import {
  attachment,
  boundClaim,
  claim,
  csiDriver,
  ourDriver,
  patched,
  review,
  storageClass,
  volume,
} from "./fixtures.ts";

let sandbox: TestSandbox;
const clients: KubeJsonClient[] = [];

before(async () => {
  sandbox = await startTestSandbox();
});
after(async () => {
  for (const c of clients) await c.close();
  await sandbox.close();
});
beforeEach(async () => {
  await sandbox.admin.reset();
  await sandbox.admin.seed([
    storageClass("fast", { isDefault: true, allowVolumeExpansion: true }),
    storageClass("slow", { provisioner: "other.csi.io" }),
    csiDriver(ourDriver),
  ]);
  await sandbox.admin.resetCounters();
});

/** A fresh app (empty cache) over the sandbox, as functions/admission/main.ts builds it. */
function admissionApp(
  changes: Partial<AdmissionConfig> = {},
  maxBodyBytes?: number,
): { app: FunctionApp; config: AdmissionConfig } {
  const config: AdmissionConfig = {
    ...defaultAdmissionConfig(),
    provisionerDrivers: new Set([ourDriver]),
    ...changes,
  };
  const kube = new KubeJsonClient(sandbox.kubeConfig, { requestTimeoutMs: config.lookupTimeoutMs });
  clients.push(kube);
  const metrics = createMetricsRegistry({ defaultMetrics: false });
  const lookups = createClusterLookups(kube, {
    timeoutMs: config.lookupTimeoutMs,
    cacheTtlMs: config.cacheTtlMs,
    cacheMaxEntries: config.cacheMaxEntries,
    metrics,
  });
  const app = createAdmissionApp({
    hooks: createAdmissionHooks({ lookups, config }),
    logger: createLogger({ name: "admission", level: "silent" }),
    metrics,
    ...(maxBodyBytes ? { maxBodyBytes } : {}),
  });
  return { app, config };
}

async function post(app: FunctionApp, path: string, body: unknown): Promise<AdmissionResponse> {
  const res = await request(app)
    .post(path)
    .set("content-type", "application/json")
    .send(JSON.stringify(body));
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.equal(res.body.apiVersion, "admission.k8s.io/v1");
  assert.equal(res.body.kind, "AdmissionReview");
  return res.body.response as AdmissionResponse;
}

/** Writes the sandbox saw: there must never be any from admission. */
async function writes(): Promise<string[]> {
  const counters = await sandbox.admin.counters();
  return Object.keys(counters).filter((k) => /^(create|update|patch|delete|deletecollection) /.test(k));
}

describe("endpoints end to end", () => {
  test("PVC CREATE: default class, finalizers and hand-over, applied to the original", async () => {
    const { app } = admissionApp();
    const original = claim("data");
    const r = review("persistentvolumeclaims", "CREATE", original);
    const response = await post(app, "/mutate/persistentvolumeclaims", r);
    assert.equal(response.uid, r.request.uid);
    assert.equal(response.allowed, true);
    const out = patched(original, response);
    assert.equal(out.spec.storageClassName, "fast");
    assert.deepEqual(out.metadata.finalizers, [
      "kubernetes.io/pvc-protection",
      "storage.kube-storage-functions.io/provisioning",
    ]);
    assert.deepEqual(out.metadata.annotations, {
      "volume.kubernetes.io/storage-provisioner": ourDriver,
      "volume.beta.kubernetes.io/storage-provisioner": ourDriver,
    });
    assert.deepEqual(await writes(), []);
  });

  test("PVC UPDATE: expansion allowed by the class; shrink denied", async () => {
    const { app } = admissionApp();
    const old = boundClaim("data", "2Gi");
    const grown = boundClaim("data", "3Gi");
    const ok = await post(
      app,
      "/validate/persistentvolumeclaims",
      review("persistentvolumeclaims", "UPDATE", grown, old),
    );
    assert.equal(ok.allowed, true);
    const shrunk = boundClaim("data", "1Gi");
    const no = await post(
      app,
      "/validate/persistentvolumeclaims",
      review("persistentvolumeclaims", "UPDATE", shrunk, old),
    );
    assert.equal(no.allowed, false);
    assert.equal(no.status?.code, 422);
    assert.match(no.status?.message ?? "", /field can not be less than status\.capacity/);
  });

  test("PVC UPDATE: expansion denied when the class does not allow it", async () => {
    const { app } = admissionApp();
    const old = boundClaim("data", "1Gi", "slow");
    const response = await post(
      app,
      "/validate/persistentvolumeclaims",
      review("persistentvolumeclaims", "UPDATE", boundClaim("data", "2Gi", "slow"), old),
    );
    assert.equal(response.allowed, false);
    assert.equal(response.status?.code, 403);
    assert.match(
      response.status?.message ?? "",
      /the storageclass that provisions the pvc must support resize/,
    );
  });

  test("PV CREATE: pv-protection", async () => {
    const { app } = admissionApp();
    const original = volume("pv-1");
    const response = await post(
      app,
      "/mutate/persistentvolumes",
      review("persistentvolumes", "CREATE", original),
    );
    assert.deepEqual(patched(original, response).metadata.finalizers, ["kubernetes.io/pv-protection"]);
  });

  test("VolumeAttachment CREATE: known driver allowed, unknown denied", async () => {
    const { app } = admissionApp();
    const ok = await post(
      app,
      "/validate/volumeattachments",
      review("volumeattachments", "CREATE", attachment("va-1")),
    );
    assert.equal(ok.allowed, true);
    const no = await post(
      app,
      "/validate/volumeattachments",
      review("volumeattachments", "CREATE", attachment("va-2", { attacher: "nope.csi.io" })),
    );
    assert.equal(no.allowed, false);
    assert.match(no.status?.message ?? "", /spec\.attacher: Not found: "nope\.csi\.io"/);
    assert.deepEqual(await writes(), []);
  });

  test("dryRun reviews get the same answer and cause nothing", async () => {
    const { app } = admissionApp();
    const original = claim("data");
    const plain = await post(
      app,
      "/mutate/persistentvolumeclaims",
      review("persistentvolumeclaims", "CREATE", original),
    );
    const dry = await post(
      app,
      "/mutate/persistentvolumeclaims",
      review("persistentvolumeclaims", "CREATE", original, null, { dryRun: true }),
    );
    assert.deepEqual({ ...dry, uid: "" }, { ...plain, uid: "" });
    assert.deepEqual(await writes(), []);
  });
});

describe("wire errors", () => {
  const path = "/mutate/persistentvolumeclaims";
  const good = () => JSON.stringify(review("persistentvolumeclaims", "CREATE", claim("data")));

  test("415 unless the body is JSON", async () => {
    const { app } = admissionApp();
    const text = await request(app).post(path).set("content-type", "text/plain").send(good());
    assert.equal(text.status, 415);
    assert.match(text.body.error, /must be sent as application\/json; got Content-Type "text\/plain"/);
    const none = await request(app).post(path).send(Buffer.from(good()));
    assert.equal(none.status, 415);
    const charset = await request(app)
      .post(path)
      .set("content-type", "application/json; charset=utf-8")
      .send(good());
    assert.equal(charset.status, 200);
  });

  const malformed: { name: string; body: string; error: RegExp }[] = [
    { name: "not JSON", body: "{", error: /not valid JSON/ },
    {
      name: "wrong apiVersion",
      body: JSON.stringify({ ...review("persistentvolumeclaims", "CREATE", claim("a")), apiVersion: "v1" }),
      error: /only admission\.k8s\.io\/v1 is served/,
    },
    {
      name: "missing uid",
      body: JSON.stringify({
        apiVersion: "admission.k8s.io/v1",
        kind: "AdmissionReview",
        request: { operation: "CREATE" },
      }),
      error: /request\.uid/,
    },
    {
      name: "a PV in a PVC review",
      body: JSON.stringify(
        (() => {
          const r = review("persistentvolumeclaims", "CREATE", volume("pv-1"));
          return r;
        })(),
      ),
      error: /request\.object is a PersistentVolume; this endpoint takes PersistentVolumeClaim objects/,
    },
    {
      name: "a review for another resource",
      body: JSON.stringify(review("persistentvolumes", "CREATE", volume("pv-1"))),
      error:
        /\/mutate\/persistentvolumeclaims reviews persistentvolumeclaims, but this review is for persistentvolumes; check the webhook configuration's rules/,
    },
    {
      name: "spec of the wrong type",
      body: JSON.stringify(review("persistentvolumeclaims", "CREATE", { ...claim("a"), spec: "big" })),
      error: /request\.object\.spec must be an object, got a string/,
    },
    {
      name: "annotations with a non-string value",
      body: JSON.stringify(
        review("persistentvolumeclaims", "CREATE", {
          ...claim("a"),
          metadata: { name: "a", annotations: { x: 1 } },
        }),
      ),
      error: /request\.object\.metadata\.annotations\[x\] must be a string, got a number/,
    },
  ];
  for (const c of malformed) {
    test(`400: ${c.name}`, async () => {
      const { app } = admissionApp();
      const res = await request(app).post(path).set("content-type", "application/json").send(c.body);
      assert.equal(res.status, 400);
      assert.match(res.body.error, c.error);
    });
  }

  test("413 for a body over the limit", async () => {
    const { app } = admissionApp({}, 64 * 1024);
    const big = claim("data");
    big.metadata.annotations = { filler: "x".repeat(100 * 1024) };
    const res = await request(app)
      .post(path)
      .set("content-type", "application/json")
      .send(JSON.stringify(review("persistentvolumeclaims", "CREATE", big)));
    assert.equal(res.status, 413);
  });

  test("no POST / and no resync; GET on a webhook path is a 405", async () => {
    const { app } = admissionApp();
    const root = await request(app).post("/").set("content-type", "application/json").send(good());
    assert.equal(root.status, 404);
    const resync = await request(app).post("/resync");
    assert.equal(resync.status, 404);
    const get = await request(app).get(path);
    assert.equal(get.status, 405);
    assert.equal(get.headers.allow, "POST");
  });

  test("probes and metrics", async () => {
    const { app } = admissionApp();
    await request(app).get("/healthz").expect(200);
    await request(app).get("/readyz").expect(200);
    await post(app, path, JSON.parse(good()));
    const metrics = await request(app).get("/metrics").expect(200);
    assert.match(
      metrics.text,
      /admission_reviews_total\{path="\/mutate\/persistentvolumeclaims",decision="patched"\} 1/,
    );
  });
});

describe("failure policy and deadline", () => {
  test("StorageClasses failing, PVC mutate Ignore (default): protection only, with a warning", async () => {
    const { app } = admissionApp();
    await sandbox.admin.setFaults({ errorProbability: 1, errorCode: 503, resources: ["storageclasses"] });
    const original = claim("data");
    const response = await post(
      app,
      "/mutate/persistentvolumeclaims",
      review("persistentvolumeclaims", "CREATE", original),
    );
    assert.equal(response.allowed, true);
    const out = patched(original, response);
    assert.deepEqual(out.metadata.finalizers, ["kubernetes.io/pvc-protection"]);
    assert.equal(out.spec.storageClassName, undefined);
    assert.equal(response.warnings?.length, 1);
    assert.match(
      response.warnings?.[0] ?? "",
      /^no default StorageClass was assigned: looking up StorageClasses failed \(.*503.*\); set spec\.storageClassName/,
    );
  });

  test("StorageClasses failing, PVC mutate Fail: a 503 denial", async () => {
    const { app } = admissionApp({
      failurePolicy: { ...defaultAdmissionConfig().failurePolicy, mutateClaims: "Fail" },
    });
    await sandbox.admin.setFaults({ errorProbability: 1, errorCode: 500, resources: ["storageclasses"] });
    const response = await post(
      app,
      "/mutate/persistentvolumeclaims",
      review("persistentvolumeclaims", "CREATE", claim("data", { spec: { storageClassName: "fast" } })),
    );
    assert.equal(response.allowed, false);
    assert.equal(response.status?.code, 503);
    assert.match(
      response.status?.message ?? "",
      /^persistentvolumeclaims "data" could not be admitted: looking up StorageClasses failed .*; retry the request$/,
    );
  });

  test("CSIDrivers failing, VolumeAttachment Fail (default): a 503 denial", async () => {
    const { app } = admissionApp();
    await sandbox.admin.setFaults({ errorProbability: 1, errorCode: 503, resources: ["csidrivers"] });
    const response = await post(
      app,
      "/validate/volumeattachments",
      review("volumeattachments", "CREATE", attachment("va-1")),
    );
    assert.equal(response.allowed, false);
    assert.equal(response.status?.code, 503);
    assert.match(response.status?.message ?? "", /cannot check spec\.attacher: looking up CSIDriver/);
  });

  test("a slow API (5 s) is answered within the 2 s deadline, per failure policy", async () => {
    const { app, config } = admissionApp();
    assert.equal(config.lookupTimeoutMs, 2000);
    await sandbox.admin.setFaults({ latencyMs: 5000, resources: ["storageclasses", "csidrivers"] });
    const started = Date.now();
    const [mutate, validate] = await Promise.all([
      post(app, "/mutate/persistentvolumeclaims", review("persistentvolumeclaims", "CREATE", claim("data"))),
      post(app, "/validate/volumeattachments", review("volumeattachments", "CREATE", attachment("va-1"))),
    ]);
    const elapsed = Date.now() - started;
    assert.ok(elapsed >= 1900 && elapsed < 3000, `answered after ${elapsed} ms`);
    assert.equal(mutate.allowed, true);
    assert.match(mutate.warnings?.[0] ?? "", /no answer within 2000 ms/);
    assert.equal(validate.allowed, false);
    assert.equal(validate.status?.code, 503);
    await sandbox.admin.clearFaults();
  });
});

describe("lookup cache", () => {
  test("a burst of claims costs one StorageClass list; CSIDrivers one get per name", async () => {
    const { app } = admissionApp();
    await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        post(
          app,
          "/mutate/persistentvolumeclaims",
          review("persistentvolumeclaims", "CREATE", claim(`c-${i}`)),
        ),
      ),
    );
    for (let i = 0; i < 5; i++) {
      await post(
        app,
        "/validate/volumeattachments",
        review("volumeattachments", "CREATE", attachment(`va-${i}`)),
      );
      await post(
        app,
        "/validate/volumeattachments",
        review("volumeattachments", "CREATE", attachment(`vb-${i}`, { attacher: "nope.csi.io" })),
      );
    }
    const counters = await sandbox.admin.counters();
    assert.equal(counters["list storageclasses"], 1);
    assert.equal(
      counters["get csidrivers"],
      2,
      "one for the driver that exists, one for the one that does not",
    );
    assert.deepEqual(await writes(), []);
  });

  test("entries expire after the TTL: a new default class is seen", async () => {
    const { app } = admissionApp({ cacheTtlMs: 200 });
    const first = patched(
      claim("a"),
      await post(
        app,
        "/mutate/persistentvolumeclaims",
        review("persistentvolumeclaims", "CREATE", claim("a")),
      ),
    );
    assert.equal(first.spec.storageClassName, "fast");
    await sandbox.admin.seed([storageClass("newer", { isDefault: true, created: "2030-01-01T00:00:00Z" })]);
    const cached = patched(
      claim("b"),
      await post(
        app,
        "/mutate/persistentvolumeclaims",
        review("persistentvolumeclaims", "CREATE", claim("b")),
      ),
    );
    assert.equal(cached.spec.storageClassName, "fast", "still the cached list");
    await new Promise((resolve) => setTimeout(resolve, 250));
    const fresh = patched(
      claim("c"),
      await post(
        app,
        "/mutate/persistentvolumeclaims",
        review("persistentvolumeclaims", "CREATE", claim("c")),
      ),
    );
    assert.equal(fresh.spec.storageClassName, "newer");
    assert.equal((await sandbox.admin.counters())["list storageclasses"], 2);
  });
});
