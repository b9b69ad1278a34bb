// The lookup cache (TTL, size bound, shared in-flight requests, failures not
// cached), the deadline, the cluster lookups over a fake client (404 is an
// answer, other errors are failures), and the configuration from env.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { createClusterLookups } from "../../shared/admission/cluster-lookups.ts";
import { admissionConfigFromEnv, defaultAdmissionConfig } from "../../shared/admission/config.ts";
import { mutateClaimsHook, validateClaimsHook } from "../../shared/admission/hooks.ts";
import { DeadlineExceededError, LookupCache, withDeadline } from "../../shared/admission/lookup-cache.ts";
import { parseAdmissionReview } from "../../shared/admission/review.ts";
import { KubeApiError } from "../../shared/kube/json-client.ts";
import { ObjectStore } from "../../shared/kube/object-store.ts";
import type { ResourceDescriptor } from "../../shared/kube/resources.ts";
import type { KubeObject, StorageClass } from "../../shared/kube/types.ts";
import { createMetricsRegistry } from "../../shared/metrics.ts";
import { boundClaim, claim, csiDriver, review, storageClass } from "./fixtures.ts";

describe("LookupCache", () => {
  test("serves a value for ttlMs, then loads again", async () => {
    let now = 1000;
    const cache = new LookupCache<number>({ ttlMs: 5000, maxEntries: 10, now: () => now });
    let loads = 0;
    const load = async () => ++loads;
    assert.deepEqual(await cache.get("k", load), { value: 1, hit: false });
    now += 4999;
    assert.deepEqual(await cache.get("k", load), { value: 1, hit: true });
    now += 1;
    assert.deepEqual(await cache.get("k", load), { value: 2, hit: false });
  });

  test("concurrent misses share one load", async () => {
    const cache = new LookupCache<string>({ ttlMs: 1000, maxEntries: 10 });
    let loads = 0;
    let release: (v: string) => void = () => {};
    const load = () => {
      loads += 1;
      return new Promise<string>((resolve) => {
        release = resolve;
      });
    };
    const all = Promise.all([cache.get("k", load), cache.get("k", load), cache.get("k", load)]);
    release("v");
    const results = await all;
    assert.equal(loads, 1);
    assert.deepEqual(
      results.map((r) => r.value),
      ["v", "v", "v"],
    );
  });

  test("failures are not cached", async () => {
    const cache = new LookupCache<string>({ ttlMs: 1000, maxEntries: 10 });
    await assert.rejects(
      cache.get("k", async () => {
        throw new Error("down");
      }),
      /down/,
    );
    assert.equal(cache.size, 0);
    assert.deepEqual(await cache.get("k", async () => "up"), { value: "up", hit: false });
  });

  test("holds at most maxEntries, dropping the least recently used", async () => {
    const cache = new LookupCache<string>({ ttlMs: 60_000, maxEntries: 2 });
    await cache.get("a", async () => "a");
    await cache.get("b", async () => "b");
    await cache.get("a", async () => "a2"); // a is now the most recent
    await cache.get("c", async () => "c");
    assert.equal(cache.size, 2);
    assert.equal((await cache.get("a", async () => "a3")).hit, true);
    assert.equal((await cache.get("b", async () => "b2")).hit, false);
  });

  test("ttlMs 0 caches nothing", async () => {
    const cache = new LookupCache<number>({ ttlMs: 0, maxEntries: 10 });
    let loads = 0;
    await cache.get("k", async () => ++loads);
    await cache.get("k", async () => ++loads);
    assert.equal(loads, 2);
  });
});

describe("withDeadline", () => {
  test("passes a timely answer through", async () => {
    assert.equal(await withDeadline(Promise.resolve(7), 100, "x"), 7);
  });

  test("gives up after the deadline", async () => {
    const started = Date.now();
    const never = new Promise<number>(() => {});
    await assert.rejects(withDeadline(never, 50, "looking up things"), (err: unknown) => {
      return (
        err instanceof DeadlineExceededError && /looking up things: no answer within 50 ms/.test(err.message)
      );
    });
    assert.ok(Date.now() - started < 1000);
  });
});

/** A KubeJsonClient stand-in: scripted answers, counted calls. */
function fakeKube(script: {
  list?: () => Promise<KubeObject[]>;
  get?: (name: string) => Promise<KubeObject>;
}) {
  const calls = { list: 0, get: 0 };
  return {
    calls,
    client: {
      async list<T extends KubeObject>(_r: ResourceDescriptor) {
        calls.list += 1;
        return { items: ((await script.list?.()) ?? []) as T[], resourceVersion: "1" };
      },
      async get<T extends KubeObject>(_r: ResourceDescriptor, name: string) {
        calls.get += 1;
        if (!script.get) throw new Error("no get scripted");
        return (await script.get(name)) as T;
      },
    },
  };
}

const options = { timeoutMs: 200, cacheTtlMs: 60_000, cacheMaxEntries: 100 };

describe("createClusterLookups", () => {
  test("StorageClasses: one list, then cached", async () => {
    const kube = fakeKube({ list: async () => [storageClass("fast")] });
    const metrics = createMetricsRegistry({ defaultMetrics: false });
    const lookups = createClusterLookups(kube.client, { ...options, metrics });
    for (let i = 0; i < 3; i++) {
      const found = await lookups.storageClasses();
      assert.ok(found.ok);
      assert.deepEqual(
        found.value.map((c) => c.metadata.name),
        ["fast"],
      );
    }
    assert.equal(kube.calls.list, 1);
    const text = await metrics.metrics();
    assert.match(text, /admission_lookups_total\{resource="storageclasses",result="miss"\} 1/);
    assert.match(text, /admission_lookups_total\{resource="storageclasses",result="hit"\} 2/);
  });

  test("StorageClasses from a synced copy: no list; fresh, or a copy not synced yet, lists", async () => {
    const kube = fakeKube({ list: async () => [storageClass("listed")] });
    const metrics = createMetricsRegistry({ defaultMetrics: false });
    const store = new ObjectStore<StorageClass>();
    store.replaceWithList([storageClass("copied", { isDefault: true })], "7");
    let synced = false;
    const lookups = createClusterLookups(kube.client, {
      ...options,
      cacheTtlMs: 0,
      classCopy: () => ({ store, synced }),
      metrics,
    });
    const names = async (o?: { fresh?: boolean }) => {
      const found = await lookups.storageClasses(o);
      return found.ok ? found.value.map((c) => c.metadata.name) : found.error;
    };
    assert.deepEqual(await names(), ["listed"], "before its first list is in, the copy answers nothing");
    synced = true;
    assert.deepEqual(await names(), ["copied"]);
    assert.deepEqual(await names(), ["copied"]);
    assert.equal(kube.calls.list, 1);
    assert.deepEqual(await names({ fresh: true }), ["listed"], "a rule about to refuse reads the API");
    assert.equal(kube.calls.list, 2);
    const text = await metrics.metrics();
    assert.match(text, /admission_lookups_total\{resource="storageclasses",result="copy"\} 2/);
  });

  test("fresh: skips the cached list", async () => {
    const kube = fakeKube({ list: async () => [storageClass("fast")] });
    const lookups = createClusterLookups(kube.client, options);
    await lookups.storageClasses();
    await lookups.storageClasses();
    await lookups.storageClasses({ fresh: true });
    assert.equal(kube.calls.list, 2);
  });

  test("an expansion is never refused on a cached list older than its class", async () => {
    let classes = [storageClass("old")];
    const kube = fakeKube({ list: async () => classes });
    const lookups = createClusterLookups(kube.client, { ...options, cacheTtlMs: 60_000 });
    const hook = validateClaimsHook({ lookups, config: defaultAdmissionConfig() });
    const expand = async () => {
      const old = boundClaim("data", "1Gi", "new");
      const next = boundClaim("data", "2Gi", "new");
      next.status = old.status;
      const r = review("persistentvolumeclaims", "UPDATE", next, old);
      return hook.review(parseAdmissionReview(JSON.stringify(r)));
    };
    assert.equal((await expand()).allowed, false, "no class yet");
    classes = [storageClass("old"), storageClass("new", { allowVolumeExpansion: true })];
    assert.equal((await expand()).allowed, true, "the class created since the list was cached");
  });

  test("a claim naming a class the cached list lacks is handed off after a fresh list", async () => {
    let classes = [storageClass("old")];
    const kube = fakeKube({ list: async () => classes });
    const lookups = createClusterLookups(kube.client, { ...options, cacheTtlMs: 60_000 });
    const config = defaultAdmissionConfig();
    const hook = mutateClaimsHook({
      lookups,
      config: { ...config, provisionerDrivers: new Set(["ours.csi.io"]) },
    });
    const create = async (name: string) => {
      const c = claim(name, { spec: { storageClassName: "new" } });
      const r = review("persistentvolumeclaims", "CREATE", c);
      return hook.review(parseAdmissionReview(JSON.stringify(r)));
    };
    await create("first");
    classes = [storageClass("old"), storageClass("new", { provisioner: "ours.csi.io" })];
    const answer = await create("second");
    assert.ok(answer.patch, "patched: the hand-off annotations");
    assert.match(Buffer.from(answer.patch ?? "", "base64").toString(), /storage-provisioner/);
    assert.equal(kube.calls.list, 3, "one list, then one fresh list per claim whose class it lacked");
  });

  test("a failure is an answer, not a throw, and is not cached", async () => {
    let fail = true;
    const kube = fakeKube({
      list: async () => {
        if (fail) throw new KubeApiError("GET", "/apis/storage.k8s.io/v1/storageclasses", 503, "down", {});
        return [];
      },
    });
    const lookups = createClusterLookups(kube.client, options);
    const first = await lookups.storageClasses();
    assert.equal(first.ok, false);
    assert.match(first.ok ? "" : first.error, /GET \/apis\/storage\.k8s\.io\/v1\/storageclasses: 503/);
    fail = false;
    assert.equal((await lookups.storageClasses()).ok, true);
    assert.equal(kube.calls.list, 2);
  });

  test("a slow API: the lookup answers at the deadline", async () => {
    const kube = fakeKube({ list: () => new Promise(() => {}) });
    const lookups = createClusterLookups(kube.client, { ...options, timeoutMs: 50 });
    const started = Date.now();
    const found = await lookups.storageClasses();
    assert.equal(found.ok, false);
    assert.match(found.ok ? "" : found.error, /no answer within 50 ms/);
    assert.ok(Date.now() - started < 1000);
  });

  test("CSIDriver: 404 means none (cached), other errors are failures", async () => {
    const kube = fakeKube({
      get: async (name) => {
        if (name === "real.csi.io") return csiDriver(name);
        if (name === "flaky.csi.io") throw new KubeApiError("GET", `/x/${name}`, 500, "oops", {});
        throw new KubeApiError(
          "GET",
          `/x/${name}`,
          404,
          { kind: "Status", code: 404, reason: "NotFound" },
          {},
        );
      },
    });
    const lookups = createClusterLookups(kube.client, options);
    const real = await lookups.csiDriver("real.csi.io");
    assert.ok(real.ok && real.value?.metadata.name === "real.csi.io");
    const missing = await lookups.csiDriver("missing.csi.io");
    assert.deepEqual(missing, { ok: true, value: undefined });
    assert.deepEqual(await lookups.csiDriver("missing.csi.io"), { ok: true, value: undefined });
    const flaky = await lookups.csiDriver("flaky.csi.io");
    assert.equal(flaky.ok, false);
    await lookups.csiDriver("flaky.csi.io");
    assert.equal(kube.calls.get, 4, "real once, missing once (cached), flaky twice (not cached)");
  });
});

describe("admissionConfigFromEnv", () => {
  test("defaults", () => {
    assert.deepEqual(admissionConfigFromEnv({}), defaultAdmissionConfig());
    const d = defaultAdmissionConfig();
    assert.equal(d.lookupTimeoutMs, 2000);
    assert.deepEqual(d.failurePolicy, {
      mutateClaims: "Ignore",
      validateClaims: "Fail",
      validateAttachments: "Fail",
    });
  });

  test("every variable", () => {
    const config = admissionConfigFromEnv({
      PROVISIONER_DRIVERS: " a.csi.io, b.csi.io ,,",
      ADMISSION_LOOKUP_TIMEOUT_MS: "500",
      ADMISSION_CACHE_TTL_MS: "0",
      ADMISSION_CACHE_MAX_ENTRIES: "10",
      ADMISSION_FAILURE_POLICY_MUTATE_PVC: "fail",
      ADMISSION_FAILURE_POLICY_VALIDATE_PVC: "Ignore",
      ADMISSION_FAILURE_POLICY_VALIDATE_VA: "IGNORE",
    });
    assert.deepEqual([...config.provisionerDrivers], ["a.csi.io", "b.csi.io"]);
    assert.equal(config.lookupTimeoutMs, 500);
    assert.equal(config.cacheTtlMs, 0);
    assert.equal(config.cacheMaxEntries, 10);
    assert.deepEqual(config.failurePolicy, {
      mutateClaims: "Fail",
      validateClaims: "Ignore",
      validateAttachments: "Ignore",
    });
  });

  const bad: [Record<string, string>, RegExp][] = [
    [{ ADMISSION_LOOKUP_TIMEOUT_MS: "0" }, /ADMISSION_LOOKUP_TIMEOUT_MS must be an integer from 1 to 30000/],
    [{ ADMISSION_LOOKUP_TIMEOUT_MS: "2s" }, /ADMISSION_LOOKUP_TIMEOUT_MS/],
    [{ ADMISSION_CACHE_MAX_ENTRIES: "0" }, /ADMISSION_CACHE_MAX_ENTRIES/],
    [
      { ADMISSION_FAILURE_POLICY_VALIDATE_VA: "Maybe" },
      /ADMISSION_FAILURE_POLICY_VALIDATE_VA must be Ignore or Fail/,
    ],
    [{ PROVISIONER_DRIVERS: "ok.csi.io,not a name" }, /PROVISIONER_DRIVERS: "not a name" is not a valid/],
  ];
  for (const [env, error] of bad) {
    test(`rejects ${JSON.stringify(env)}`, () => {
      assert.throws(() => admissionConfigFromEnv(env), error);
    });
  }
});
