// Property: whatever AdmissionReview-shaped body arrives (valid reviews,
// near misses, wrong types anywhere, raw garbage), the admission function
// answers 200 / 400 / 413 / 415, never a 5xx and never a crash; a 200 echoes
// the uid, and any patch applies cleanly to the object it was computed from.
// And no input ever makes it write to the API.
import assert from "node:assert/strict";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import fc from "fast-check";
import jsonpatch from "fast-json-patch";
import { createAdmissionApp } from "../../functions/admission/app.ts";
import { createClusterLookups } from "../../shared/admission/cluster-lookups.ts";
import { defaultAdmissionConfig } from "../../shared/admission/config.ts";
import { createAdmissionHooks } from "../../shared/admission/hooks.ts";
import { isRecord } from "../../shared/is-record.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { createLogger } from "../../shared/log.ts";
import { createMetricsRegistry } from "../../shared/metrics.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";
import { csiDriver, ourDriver, storageClass } from "./fixtures.ts";

let sandbox: TestSandbox;
let kube: KubeJsonClient;
let server: Server;
let url: string;

before(async () => {
  sandbox = await startTestSandbox();
  await sandbox.admin.seed([
    storageClass("fast", { isDefault: true, allowVolumeExpansion: true }),
    storageClass("late", { bindingMode: "WaitForFirstConsumer" }),
    csiDriver(ourDriver),
  ]);
  const config = { ...defaultAdmissionConfig(), provisionerDrivers: new Set([ourDriver]) };
  kube = new KubeJsonClient(sandbox.kubeConfig, { requestTimeoutMs: config.lookupTimeoutMs });
  const app = createAdmissionApp({
    hooks: createAdmissionHooks({
      lookups: createClusterLookups(kube, {
        timeoutMs: config.lookupTimeoutMs,
        cacheTtlMs: config.cacheTtlMs,
        cacheMaxEntries: config.cacheMaxEntries,
      }),
      config,
    }),
    logger: createLogger({ name: "admission", level: "silent" }),
    metrics: createMetricsRegistry({ defaultMetrics: false }),
    maxBodyBytes: 256 * 1024,
  });
  server = app.listen(0, "127.0.0.1");
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  await sandbox.admin.resetCounters();
});

after(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await kube.close();
  await sandbox.close();
});

const hooks = [
  {
    path: "/mutate/persistentvolumeclaims",
    group: "",
    resource: "persistentvolumeclaims",
    kind: "PersistentVolumeClaim",
  },
  {
    path: "/validate/persistentvolumeclaims",
    group: "",
    resource: "persistentvolumeclaims",
    kind: "PersistentVolumeClaim",
  },
  { path: "/mutate/persistentvolumes", group: "", resource: "persistentvolumes", kind: "PersistentVolume" },
  {
    path: "/validate/volumeattachments",
    group: "storage.k8s.io",
    resource: "volumeattachments",
    kind: "VolumeAttachment",
  },
] as const;

const anyJson = fc.jsonValue({ maxDepth: 3 });
/** Mostly `valid`, now and then any JSON at all (often enough that every field gets its turn). */
const mostly = <T>(valid: fc.Arbitrary<T>) =>
  fc.oneof({ arbitrary: valid, weight: 30 }, { arbitrary: anyJson as fc.Arbitrary<unknown>, weight: 1 });
const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });
const word = fc.oneof(
  fc.constantFrom(
    "fast",
    "late",
    "missing",
    "",
    "Bound",
    "Pending",
    "Block",
    "Filesystem",
    ourDriver,
    "pv-1",
    "node-1",
  ),
  fc.string({ maxLength: 12 }),
);
const size = fc.oneof(
  fc.constantFrom("1Gi", "2Gi", "500Mi", "1500m", "0", "-1Gi", "lots", "1e3"),
  fc.string({ maxLength: 6 }),
);

const metadata = fc.record(
  {
    name: mostly(word),
    namespace: mostly(word),
    annotations: mostly(
      fc.dictionary(
        fc.constantFrom(
          "volume.beta.kubernetes.io/storage-class",
          "volume.kubernetes.io/storage-provisioner",
          "volume.beta.kubernetes.io/storage-provisioner",
          "x",
        ),
        word,
      ),
    ),
    finalizers: mostly(
      fc.array(fc.constantFrom("kubernetes.io/pvc-protection", "kubernetes.io/pv-protection", "x/y")),
    ),
  },
  { requiredKeys: [] },
);

const spec = fc.record(
  {
    storageClassName: mostly(fc.oneof(word, fc.constant(null))),
    volumeName: mostly(word),
    volumeMode: mostly(fc.oneof(fc.constantFrom("Filesystem", "Block"), fc.constant(null))),
    accessModes: mostly(fc.array(fc.constantFrom("ReadWriteOnce", "ReadWriteMany"))),
    resources: mostly(
      fc.record(
        { requests: mostly(fc.dictionary(fc.constantFrom("storage", "cpu"), size)) },
        { requiredKeys: [] },
      ),
    ),
    attacher: mostly(word),
    nodeName: mostly(word),
    source: mostly(
      fc.record(
        {
          persistentVolumeName: mostly(fc.oneof(word, fc.constant(null))),
          inlineVolumeSpec: mostly(fc.oneof(fc.constant(null), fc.object({ maxDepth: 1 }))),
        },
        { requiredKeys: [] },
      ),
    ),
  },
  { requiredKeys: [] },
);

const kubeObject = fc.oneof(
  {
    arbitrary: fc.record(
      {
        apiVersion: mostly(fc.constantFrom("v1", "storage.k8s.io/v1", "apps/v1")),
        kind: mostly(fc.constantFrom("PersistentVolumeClaim", "PersistentVolume", "VolumeAttachment", "Pod")),
        metadata: mostly(metadata),
        spec: mostly(spec),
        status: mostly(
          fc.record(
            { phase: mostly(word), capacity: mostly(fc.dictionary(fc.constant("storage"), size)) },
            { requiredKeys: [] },
          ),
        ),
      },
      { requiredKeys: ["metadata", "spec"] },
    ),
    weight: 6,
  },
  { arbitrary: fc.constant(null), weight: 1 },
  { arbitrary: anyJson, weight: 1 },
);

const requestArb = fc.record(
  {
    uid: mostly(fc.uuid()),
    kind: mostly(
      fc.record({ group: fc.constantFrom("", "storage.k8s.io"), version: fc.constant("v1"), kind: word }),
    ),
    operation: mostly(fc.constantFrom("CREATE", "UPDATE", "DELETE", "CONNECT")),
    subResource: maybe(mostly(fc.constantFrom("", "status"))),
    name: maybe(mostly(word)),
    namespace: maybe(mostly(word)),
    object: kubeObject,
    oldObject: kubeObject,
    dryRun: maybe(mostly(fc.boolean())),
    resource: mostly(
      fc.record({ group: fc.constantFrom("", "storage.k8s.io"), version: fc.constant("v1"), resource: word }),
    ),
  },
  // Absent keys are tried too, but most reviews have them, so the rules are reached.
  { requiredKeys: ["uid", "kind", "operation", "object", "oldObject"] },
);

/** A request kube-apiserver could send, with fuzzed objects inside: this is what reaches the rules. */
const wellFormedArb = fc.record({
  uid: fc.uuid(),
  operation: fc.constantFrom("CREATE", "CREATE", "UPDATE", "UPDATE", "DELETE", "CONNECT"),
  subResource: fc.constantFrom("", "", "", "status"),
  dryRun: fc.boolean(),
  object: fc.record({
    metadata: mostly(metadata),
    spec: mostly(spec),
    status: mostly(fc.record({ phase: mostly(word) }, { requiredKeys: [] })),
  }),
  oldObject: fc.record({
    metadata: mostly(metadata),
    spec: mostly(spec),
    status: mostly(fc.record({ phase: mostly(word) }, { requiredKeys: [] })),
  }),
});

const caseArb = fc.record({
  hook: fc.constantFrom(...hooks),
  /** Half the cases: a well-formed review for the endpoint's resource, with fuzzed objects. */
  wellFormed: fc.option(wellFormedArb, { nil: undefined }),
  review: fc.record(
    {
      apiVersion: mostly(fc.constant("admission.k8s.io/v1")),
      kind: mostly(fc.constant("AdmissionReview")),
      request: mostly(requestArb),
    },
    { requiredKeys: ["apiVersion", "kind", "request"] },
  ),
  /** Now and then a raw body instead of the review. */
  raw: fc.oneof(
    { arbitrary: fc.constant(undefined), weight: 12 },
    { arbitrary: fc.oneof(fc.string({ maxLength: 50 }), fc.json({ maxDepth: 2 })), weight: 1 },
  ),
  contentType: fc.oneof(
    { arbitrary: fc.constant("application/json"), weight: 12 },
    {
      arbitrary: fc.constantFrom(
        "text/plain",
        "application/merge-patch+json",
        "application/json; charset=utf-8",
      ),
      weight: 1,
    },
  ),
});

test("random AdmissionReview-shaped bodies: never a 5xx, never a crash, never a write", async () => {
  const seen = { status: new Map<number, number>(), patched: 0, denied: 0 };
  await fc.assert(
    fc.asyncProperty(caseArb, async (c) => {
      let review = c.review as Record<string, unknown>;
      if (c.wellFormed) {
        const { group, resource, kind } = c.hook;
        const w = c.wellFormed;
        const typed = (o: object) => ({ apiVersion: group ? `${group}/v1` : "v1", kind, ...o });
        review = {
          apiVersion: "admission.k8s.io/v1",
          kind: "AdmissionReview",
          request: {
            uid: w.uid,
            kind: { group, version: "v1", kind },
            resource: { group, version: "v1", resource },
            subResource: w.subResource,
            operation: w.operation,
            dryRun: w.dryRun,
            object: w.operation === "DELETE" ? null : typed(w.object),
            oldObject: w.operation === "CREATE" ? null : typed(w.oldObject),
          },
        };
      }
      const body = c.raw ?? JSON.stringify(review);
      const res = await fetch(`${url}${c.hook.path}`, {
        method: "POST",
        headers: { "content-type": c.contentType },
        body,
      });
      const text = await res.text();
      seen.status.set(res.status, (seen.status.get(res.status) ?? 0) + 1);
      assert.ok([200, 400, 413, 415].includes(res.status), `status ${res.status}: ${text}`);
      const answer: unknown = JSON.parse(text);
      assert.ok(isRecord(answer));
      if (res.status !== 200) {
        assert.equal(typeof answer.error, "string");
        return;
      }
      const response = answer.response as Record<string, unknown>;
      const request = review.request as Record<string, unknown>;
      assert.equal(answer.apiVersion, "admission.k8s.io/v1");
      assert.equal(response.uid, request.uid);
      assert.equal(typeof response.allowed, "boolean");
      if (response.allowed === false) {
        seen.denied += 1;
        const status = response.status as { code: number; message: string };
        assert.ok(status.code >= 400 && status.message.length > 0);
      }
      assert.equal(response.patch === undefined, response.patchType === undefined);
      if (typeof response.patch === "string") {
        assert.equal(response.patchType, "JSONPatch");
        seen.patched += 1;
        const ops = JSON.parse(
          Buffer.from(response.patch, "base64").toString("utf8"),
        ) as jsonpatch.Operation[];
        // Throws if any operation does not apply to the object it was computed from.
        jsonpatch.applyPatch(structuredClone(request.object), ops, true, false);
      }
    }),
    { numRuns: 400 },
  );
  // Every kind of answer was reached, not only the 400s.
  assert.ok((seen.status.get(200) ?? 0) > 50, `answers: ${JSON.stringify([...seen.status])}`);
  assert.ok(seen.patched > 0 && seen.denied > 0, `patched ${seen.patched}, denied ${seen.denied}`);
  const counters = await sandbox.admin.counters();
  const writes = Object.keys(counters).filter((k) => !/^(get|list|watch) /.test(k));
  assert.deepEqual(writes, [], `writes: ${JSON.stringify(counters)}`);
  assert.ok((counters["list storageclasses"] ?? 0) >= 1, "the rules were reached (StorageClasses looked up)");
});
