// The sandbox API server driven by the real @kubernetes/client-node over real
// HTTP: the kube-apiserver behaviours our controllers depend on, pinned down.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import {
  ApiException,
  CoreV1Api,
  PatchStrategy,
  StorageV1Api,
  setHeaderOptions,
  type V1PersistentVolume,
  type V1PersistentVolumeClaim,
  Watch,
} from "@kubernetes/client-node";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";

let sandbox: TestSandbox;
let core: CoreV1Api;
let storage: StorageV1Api;

before(async () => {
  sandbox = await startTestSandbox();
  core = sandbox.kubeConfig.makeApiClient(CoreV1Api);
  storage = sandbox.kubeConfig.makeApiClient(StorageV1Api);
});
after(() => sandbox.close());
beforeEach(() => sandbox.admin.reset());

function claim(name: string, extra: Partial<V1PersistentVolumeClaim> = {}): V1PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, ...extra.metadata },
    spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } }, ...extra.spec },
  };
}

function volume(name: string, extra: Partial<V1PersistentVolume> = {}): V1PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name, ...extra.metadata },
    spec: {
      accessModes: ["ReadWriteOnce"],
      capacity: { storage: "1Gi" },
      csi: { driver: "hostpath.csi.k8s.io", volumeHandle: name },
      ...extra.spec,
    },
  };
}

async function apiError(p: Promise<unknown>): Promise<{ code: number; body: Record<string, unknown> }> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof ApiException, `expected ApiException, got ${String(e)}`);
    const body =
      typeof e.body === "string"
        ? (JSON.parse(e.body) as Record<string, unknown>)
        : (e.body as Record<string, unknown>);
    return { code: e.code, body };
  }
  assert.fail("expected the call to fail");
}

const ns = "default";

describe("create and get", () => {
  it("assigns uid, creationTimestamp and resourceVersion, resets status, applies defaults", async () => {
    const created = await core.createNamespacedPersistentVolumeClaim({
      namespace: ns,
      body: { ...claim("c1"), status: { phase: "Bound" } },
    });
    assert.match(created.metadata?.uid ?? "", /^[0-9a-f-]{36}$/);
    assert.ok(created.metadata?.creationTimestamp);
    assert.match(created.metadata?.resourceVersion ?? "", /^\d+$/);
    assert.equal(created.status?.phase, "Pending");
    assert.equal(created.spec?.volumeMode, "Filesystem");
    const got = await core.readNamespacedPersistentVolumeClaim({ name: "c1", namespace: ns });
    assert.equal(got.metadata?.uid, created.metadata?.uid);
  });

  it("generateName makes a unique name", async () => {
    const a = await core.createNamespacedPersistentVolumeClaim({
      namespace: ns,
      body: claim("", { metadata: { generateName: "data-" } }),
    });
    const b = await core.createNamespacedPersistentVolumeClaim({
      namespace: ns,
      body: claim("", { metadata: { generateName: "data-" } }),
    });
    assert.match(a.metadata?.name ?? "", /^data-[a-z0-9]{5}$/);
    assert.notEqual(a.metadata?.name, b.metadata?.name);
  });

  it("answers 409 AlreadyExists for a taken name and 404 NotFound for a missing one", async () => {
    await core.createPersistentVolume({ body: volume("pv1") });
    const dup = await apiError(core.createPersistentVolume({ body: volume("pv1") }));
    assert.equal(dup.code, 409);
    assert.equal(dup.body.reason, "AlreadyExists");
    assert.equal(dup.body.kind, "Status");
    const missing = await apiError(core.readPersistentVolume({ name: "nope" }));
    assert.equal(missing.code, 404);
    assert.equal(missing.body.reason, "NotFound");
    assert.equal(missing.body.message, 'persistentvolumes "nope" not found');
  });

  it("rejects invalid objects with 422 and unknown namespaces with 404", async () => {
    const bad = await apiError(
      core.createNamespacedPersistentVolumeClaim({
        namespace: ns,
        body: { metadata: { name: "x" }, spec: {} },
      }),
    );
    assert.equal(bad.code, 422);
    assert.equal(bad.body.reason, "Invalid");
    const badName = await apiError(core.createPersistentVolume({ body: volume("Upper_Case") }));
    assert.equal(badName.code, 422);
    const noNs = await apiError(
      core.createNamespacedPersistentVolumeClaim({ namespace: "ghost", body: claim("c") }),
    );
    assert.equal(noNs.code, 404);
    assert.equal(noNs.body.message, 'namespaces "ghost" not found');
  });

  it("dryRun=All validates without storing", async () => {
    await core.createPersistentVolume({ body: volume("dry"), dryRun: "All" });
    assert.equal((await apiError(core.readPersistentVolume({ name: "dry" }))).code, 404);
  });
});

describe("optimistic concurrency and the status subresource", () => {
  it("a PUT with a stale resourceVersion is a 409 Conflict; a fresh one bumps the version", async () => {
    const pv = await core.createPersistentVolume({ body: volume("pv") });
    const first = await core.replacePersistentVolume({
      name: "pv",
      body: { ...pv, metadata: { ...pv.metadata, labels: { a: "1" } } },
    });
    assert.ok(BigInt(first.metadata!.resourceVersion!) > BigInt(pv.metadata!.resourceVersion!));
    const stale = await apiError(
      core.replacePersistentVolume({
        name: "pv",
        body: { ...pv, metadata: { ...pv.metadata, labels: { a: "2" } } },
      }),
    );
    assert.equal(stale.code, 409);
    assert.equal(stale.body.reason, "Conflict");
    assert.match(
      String(stale.body.message),
      /the object has been modified; please apply your changes to the latest version/,
    );
  });

  it("a write that changes nothing keeps the resourceVersion", async () => {
    const pv = await core.createPersistentVolume({ body: volume("same") });
    const again = await core.replacePersistentVolume({ name: "same", body: pv });
    assert.equal(again.metadata?.resourceVersion, pv.metadata?.resourceVersion);
  });

  it("the main endpoint ignores status; /status changes status and, for core types, labels and annotations", async () => {
    const pv = await core.createPersistentVolume({ body: volume("st") });
    const main = await core.replacePersistentVolume({
      name: "st",
      body: { ...pv, status: { phase: "Bound" }, spec: { ...pv.spec, storageClassName: "gold" } },
    });
    assert.equal(main.status?.phase, "Pending");
    assert.equal(main.spec?.storageClassName, "gold");
    const status = await core.replacePersistentVolumeStatus({
      name: "st",
      body: {
        ...main,
        status: { phase: "Available" },
        spec: { ...main.spec, storageClassName: "silver" },
        metadata: { ...main.metadata, labels: { x: "y" } },
      },
    });
    assert.equal(status.status?.phase, "Available");
    assert.equal(status.spec?.storageClassName, "gold");
    // persistentvolumeStatusStrategy resets spec only: metadata goes through, as for nodes, pods and claims.
    assert.deepEqual(status.metadata?.labels, { x: "y" });
  });

  it("a PVC's spec is immutable except volumeName (once) and, when Bound, a larger request", async () => {
    const c = await core.createNamespacedPersistentVolumeClaim({ namespace: ns, body: claim("imm") });
    const bound = await core.replaceNamespacedPersistentVolumeClaim({
      name: "imm",
      namespace: ns,
      body: { ...c, spec: { ...c.spec, volumeName: "pv-1" } },
    });
    assert.equal(bound.spec?.volumeName, "pv-1");
    const change = await apiError(
      core.replaceNamespacedPersistentVolumeClaim({
        name: "imm",
        namespace: ns,
        body: { ...bound, spec: { ...bound.spec, volumeName: "pv-2" } },
      }),
    );
    assert.equal(change.code, 422);
    assert.match(String(change.body.message), /spec is immutable after creation/);
  });
});

describe("patch", () => {
  it("JSON merge patch, strategic merge patch and JSON patch with a test op", async () => {
    await core.createPersistentVolume({ body: volume("p") });
    const merged = await core.patchPersistentVolume(
      { name: "p", body: { metadata: { labels: { tier: "gold" } } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    assert.equal(merged.metadata?.labels?.tier, "gold");
    const strategic = await core.patchPersistentVolume(
      { name: "p", body: { metadata: { finalizers: ["a/b"] } } },
      setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch),
    );
    assert.deepEqual(strategic.metadata?.finalizers, ["a/b"]);
    const rv = strategic.metadata!.resourceVersion!;
    const jsonPatched = await core.patchPersistentVolume(
      {
        name: "p",
        body: [
          { op: "test", path: "/metadata/resourceVersion", value: rv },
          { op: "add", path: "/metadata/finalizers/-", value: "c/d" },
        ],
      },
      setHeaderOptions("Content-Type", PatchStrategy.JsonPatch),
    );
    assert.deepEqual(jsonPatched.metadata?.finalizers, ["a/b", "c/d"]);
    const failed = await apiError(
      core.patchPersistentVolume(
        { name: "p", body: [{ op: "test", path: "/metadata/resourceVersion", value: rv }] },
        setHeaderOptions("Content-Type", PatchStrategy.JsonPatch),
      ),
    );
    assert.equal(failed.code, 422);
  });

  it("a patch carrying a stale resourceVersion is a conflict; a status patch changes only status", async () => {
    const pv = await core.createPersistentVolume({ body: volume("q") });
    await core.patchPersistentVolume(
      { name: "q", body: { metadata: { labels: { a: "b" } } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    const stale = await apiError(
      core.patchPersistentVolume(
        {
          name: "q",
          body: { metadata: { resourceVersion: pv.metadata?.resourceVersion, labels: { a: "c" } } },
        },
        setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
      ),
    );
    assert.equal(stale.code, 409);
    const st = await core.patchPersistentVolumeStatus(
      { name: "q", body: { status: { phase: "Released" }, spec: { storageClassName: "x" } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    assert.equal(st.status?.phase, "Released");
    assert.equal(st.spec?.storageClassName, undefined);
  });
});

describe("delete and finalizers", () => {
  it("an object with finalizers gets a deletionTimestamp and stays until the last finalizer goes", async () => {
    await core.createPersistentVolume({
      body: volume("f", { metadata: { finalizers: ["kubernetes.io/pv-protection"] } }),
    });
    await core.deletePersistentVolume({ name: "f" });
    const marked = await core.readPersistentVolume({ name: "f" });
    assert.ok(marked.metadata?.deletionTimestamp);
    const adding = await apiError(
      core.replacePersistentVolume({
        name: "f",
        body: {
          ...marked,
          metadata: { ...marked.metadata, finalizers: ["kubernetes.io/pv-protection", "new/one"] },
        },
      }),
    );
    assert.equal(adding.code, 422);
    assert.match(
      String(adding.body.message),
      /no new finalizers can be added if the object is being deleted/,
    );
    await core.replacePersistentVolume({
      name: "f",
      body: { ...marked, metadata: { ...marked.metadata, finalizers: [] } },
    });
    assert.equal((await apiError(core.readPersistentVolume({ name: "f" }))).code, 404);
  });

  it("an object without finalizers goes at once; delete preconditions are checked", async () => {
    const pv = await core.createPersistentVolume({ body: volume("g") });
    const wrong = await apiError(
      core.deletePersistentVolume({ name: "g", body: { preconditions: { uid: "not-the-uid" } } }),
    );
    assert.equal(wrong.code, 409);
    await core.deletePersistentVolume({ name: "g", body: { preconditions: { uid: pv.metadata?.uid } } });
    assert.equal((await apiError(core.readPersistentVolume({ name: "g" }))).code, 404);
    assert.equal((await apiError(core.deletePersistentVolume({ name: "g" }))).code, 404);
  });
});

describe("list", () => {
  it("filters by label and field selectors, across namespaces", async () => {
    await core.createNamespace({ body: { metadata: { name: "other" } } });
    await core.createNamespacedPersistentVolumeClaim({
      namespace: ns,
      body: claim("a", { metadata: { labels: { app: "db" } } }),
    });
    await core.createNamespacedPersistentVolumeClaim({
      namespace: "other",
      body: claim("b", { metadata: { labels: { app: "web" } } }),
    });
    const all = await core.listPersistentVolumeClaimForAllNamespaces();
    assert.deepEqual(
      all.items.map((c) => c.metadata?.name),
      ["a", "b"],
    );
    const db = await core.listPersistentVolumeClaimForAllNamespaces({ labelSelector: "app in (db)" });
    assert.deepEqual(
      db.items.map((c) => c.metadata?.name),
      ["a"],
    );
    const byName = await core.listNamespacedPersistentVolumeClaim({
      namespace: "other",
      fieldSelector: "metadata.name=b",
    });
    assert.deepEqual(
      byName.items.map((c) => c.metadata?.name),
      ["b"],
    );
    const bad = await apiError(
      core.listPersistentVolumeClaimForAllNamespaces({ fieldSelector: "spec.bogus=1" }),
    );
    assert.equal(bad.code, 400);
  });

  it("selects pods by spec.nodeName", async () => {
    const pod = (name: string, nodeName?: string) => ({
      metadata: { name },
      spec: { containers: [{ name: "c", image: "i" }], ...(nodeName ? { nodeName } : {}) },
    });
    await core.createNamespacedPod({ namespace: ns, body: pod("p1", "node-a") });
    await core.createNamespacedPod({ namespace: ns, body: pod("p2", "node-b") });
    await core.createNamespacedPod({ namespace: ns, body: pod("p3") });
    const onA = await core.listPodForAllNamespaces({ fieldSelector: "spec.nodeName=node-a" });
    assert.deepEqual(
      onA.items.map((p) => p.metadata?.name),
      ["p1"],
    );
    const unscheduled = await core.listNamespacedPod({ namespace: ns, fieldSelector: "spec.nodeName=" });
    assert.deepEqual(
      unscheduled.items.map((p) => p.metadata?.name),
      ["p3"],
    );
  });

  it("pages with limit and continue", async () => {
    for (let i = 0; i < 5; i++) await core.createPersistentVolume({ body: volume(`pv-${i}`) });
    const names: string[] = [];
    let token: string | undefined;
    let pages = 0;
    do {
      const page = await core.listPersistentVolume({ limit: 2, ...(token ? { _continue: token } : {}) });
      names.push(...page.items.map((p) => p.metadata!.name!));
      token = page.metadata?._continue;
      pages++;
    } while (token);
    assert.equal(pages, 3);
    assert.deepEqual(names, ["pv-0", "pv-1", "pv-2", "pv-3", "pv-4"]);
  });
});

describe("watch", () => {
  type Seen = { type: string; name: string | undefined; rv: string | undefined };

  async function collect(
    path: string,
    query: Record<string, string>,
    until: (seen: Seen[]) => boolean,
  ): Promise<Seen[]> {
    const seen: Seen[] = [];
    const watch = new Watch(sandbox.kubeConfig);
    return new Promise((resolve, reject) => {
      let controller: AbortController | undefined;
      const timer = setTimeout(() => {
        controller?.abort();
        reject(new Error(`watch timed out, saw ${JSON.stringify(seen)}`));
      }, 5000);
      watch
        .watch(
          path,
          query,
          (type, obj: { metadata?: { name?: string; resourceVersion?: string }; code?: number }) => {
            seen.push({
              type,
              name: obj.metadata?.name ?? String(obj.code),
              rv: obj.metadata?.resourceVersion,
            });
            if (until(seen)) {
              clearTimeout(timer);
              controller?.abort();
              resolve(seen);
            }
          },
          () => undefined,
        )
        .then((c) => {
          controller = c;
        }, reject);
    });
  }

  it("streams ADDED, MODIFIED and DELETED from a resourceVersion", async () => {
    const list = await core.listPersistentVolume();
    const from = list.metadata!.resourceVersion!;
    const watching = collect("/api/v1/persistentvolumes", { resourceVersion: from }, (s) => s.length >= 3);
    await core.createPersistentVolume({ body: volume("w") });
    await core.patchPersistentVolume(
      { name: "w", body: { metadata: { labels: { a: "b" } } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    await core.deletePersistentVolume({ name: "w" });
    const seen = await watching;
    assert.deepEqual(
      seen.map((s) => s.type),
      ["ADDED", "MODIFIED", "DELETED"],
    );
    assert.ok(BigInt(seen[2]!.rv!) > BigInt(seen[1]!.rv!));
  });

  it("replays changes made before the watch started, and answers 410 Gone when compacted away", async () => {
    const from = (await core.listPersistentVolume()).metadata!.resourceVersion!;
    await core.createPersistentVolume({ body: volume("early") });
    const replay = await collect(
      "/api/v1/persistentvolumes",
      { resourceVersion: from },
      (s) => s.length >= 1,
    );
    assert.deepEqual(
      replay.map((s) => [s.type, s.name]),
      [["ADDED", "early"]],
    );
    await sandbox.admin.compact();
    const expired = await collect(
      "/api/v1/persistentvolumes",
      { resourceVersion: from },
      (s) => s.length >= 1,
    );
    assert.deepEqual(
      expired.map((s) => [s.type, s.name]),
      [["ERROR", "410"]],
    );
  });

  it("sends a DELETED when an object stops matching the selector", async () => {
    await core.createPersistentVolume({ body: volume("sel", { metadata: { labels: { keep: "yes" } } }) });
    const from = (await core.listPersistentVolume()).metadata!.resourceVersion!;
    const watching = collect(
      "/api/v1/persistentvolumes",
      { resourceVersion: from, labelSelector: "keep=yes" },
      (s) => s.length >= 1,
    );
    await core.patchPersistentVolume(
      { name: "sel", body: { metadata: { labels: { keep: "no" } } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    assert.deepEqual(
      (await watching).map((s) => [s.type, s.name]),
      [["DELETED", "sel"]],
    );
  });
});

describe("storage.k8s.io and test hooks", () => {
  it("serves StorageClasses with defaults and VolumeAttachments with an immutable spec", async () => {
    const sc = await storage.createStorageClass({
      body: { metadata: { name: "fast" }, provisioner: "hostpath.csi.k8s.io" },
    });
    assert.equal(sc.reclaimPolicy, "Delete");
    assert.equal(sc.volumeBindingMode, "Immediate");
    const va = await storage.createVolumeAttachment({
      body: {
        metadata: { name: "va" },
        spec: { attacher: "d", nodeName: "n", source: { persistentVolumeName: "pv" } },
      },
    });
    assert.equal(va.status?.attached, false);
    const changed = await apiError(
      storage.replaceVolumeAttachment({ name: "va", body: { ...va, spec: { ...va.spec, nodeName: "m" } } }),
    );
    assert.equal(changed.code, 422);
    // volumeAttachmentStatusStrategy resets metadata (ResetObjectMetaForStatus), unlike the core types.
    const status = await storage.replaceVolumeAttachmentStatus({
      name: "va",
      body: { ...va, metadata: { ...va.metadata, annotations: { x: "y" } }, status: { attached: true } },
    });
    assert.equal(status.status?.attached, true);
    assert.equal(status.metadata?.annotations, undefined);
  });

  it("seeds raw objects, counts requests per verb and resource, and injects faults", async () => {
    await sandbox.admin.seed([
      {
        apiVersion: "v1",
        kind: "PersistentVolume",
        metadata: { name: "seeded", uid: "u-1" },
        spec: {},
        status: { phase: "Bound" },
      },
    ]);
    const pv = await core.readPersistentVolume({ name: "seeded" });
    assert.equal(pv.metadata?.uid, "u-1");
    assert.equal(pv.status?.phase, "Bound");
    await sandbox.admin.resetCounters();
    await core.replacePersistentVolumeStatus({
      name: "seeded",
      body: { ...pv, status: { phase: "Released" } },
    });
    await core.readPersistentVolume({ name: "seeded" });
    assert.deepEqual(await sandbox.admin.counters(), {
      "update persistentvolumes/status": 1,
      "get persistentvolumes": 1,
    });

    await sandbox.admin.setFaults({ conflictProbability: 1, verbs: ["update"] });
    const injected = await apiError(core.replacePersistentVolume({ name: "seeded", body: pv }));
    assert.equal(injected.code, 409);
    await sandbox.admin.setFaults({ errorProbability: 1, errorCode: 503 });
    assert.equal((await apiError(core.readPersistentVolume({ name: "seeded" }))).code, 503);
    await sandbox.admin.clearFaults();
    await core.readPersistentVolume({ name: "seeded" });
  });
});
