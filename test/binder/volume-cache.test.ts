// The binder with a watched copy of the volumes, over the sandbox: the copy
// spares the claim sync a list of every PV, but a stale copy never decides.
// A pick is read again before it is bound, and "nothing matches" is believed
// only when the copy reflects the claim's revision.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { BinderController } from "../../shared/binder/runtime/binder-controller.ts";
import type { VolumeCache } from "../../shared/binder/runtime/load-views.ts";
import type { ClaimCache } from "../../shared/binder/runtime/watched-reads.ts";
import { volumeClaimIndexKey } from "../../shared/binder/volume-helpers.ts";
import { EventRecorder } from "../../shared/kube/event-recorder.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { ObjectStore } from "../../shared/kube/object-store.ts";
import { persistentVolumeClaims, persistentVolumes, storageClasses } from "../../shared/kube/resources.ts";
import type { PersistentVolume, PersistentVolumeClaim, StorageClass } from "../../shared/kube/types.ts";
import { startWatchedStore, type WatchedStore } from "../../shared/kube/watched-store.ts";
import { createLogger } from "../../shared/log.ts";
import { waitFor } from "../forwarder/helpers.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";

let sandbox: TestSandbox;
let kube: KubeJsonClient;
let recorder: EventRecorder;

before(async () => {
  sandbox = await startTestSandbox();
  kube = new KubeJsonClient(sandbox.kubeConfig);
  recorder = new EventRecorder(kube, {
    component: "persistentvolume-controller",
    logger: { warn: () => undefined },
  });
});
after(async () => {
  await kube.close();
  await sandbox.close();
});
beforeEach(() => sandbox.admin.reset());

function pv(name: string, size: string, extra: Partial<PersistentVolume["spec"]> = {}): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name },
    spec: {
      capacity: { storage: size },
      accessModes: ["ReadWriteOnce"],
      persistentVolumeReclaimPolicy: "Retain",
      storageClassName: "",
      csi: { driver: "static.example.com", volumeHandle: name },
      ...extra,
    },
  };
}

/** Creates a volume and lets a binder without a copy make it Available, as its ADDED event would. */
async function createVolume(volume: PersistentVolume): Promise<PersistentVolume> {
  await kube.create(persistentVolumes, volume);
  const plain = new BinderController({ kube, events: recorder });
  await plain.syncVolumeByName(volume.metadata.name);
  return kube.get<PersistentVolume>(persistentVolumes, volume.metadata.name);
}

function storageClass(name: string, provisioner: string): StorageClass {
  return { apiVersion: "storage.k8s.io/v1", kind: "StorageClass", metadata: { name }, provisioner };
}

function pvc(name: string, size: string): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace: "default" },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: size } },
      storageClassName: "",
    },
  };
}

/** A copy filled by hand from a list, so a test can make it as stale as it needs; indexed as the binder's is. */
function frozenCopy(items: PersistentVolume[], rv: string): VolumeCache {
  const store = new ObjectStore<PersistentVolume>({ indexBy: volumeClaimIndexKey });
  store.replaceWithList(items, rv);
  return { synced: true, store };
}

async function listVolumes(): Promise<{ items: PersistentVolume[]; resourceVersion: string }> {
  return kube.list<PersistentVolume>(persistentVolumes);
}

async function claimSync(cache: VolumeCache, name: string) {
  const binder = new BinderController({ kube, events: recorder, volumeCache: cache });
  await sandbox.admin.resetCounters();
  const [report] = await binder.handleEvent({
    action: "add",
    kind: "PersistentVolumeClaim",
    apiVersion: "v1",
    name,
    namespace: "default",
  });
  return { report, counters: await sandbox.admin.counters() };
}

describe("binder with a watched volume copy", () => {
  it("binds the copy's pick on a first attempt: no list, no GET, then the usual four writes", async () => {
    for (let i = 0; i < 20; i++) await createVolume(pv(`small-${i}`, "1Gi"));
    await createVolume(pv("fits", "10Gi"));
    await createVolume(pv("fits-bigger", "20Gi"));
    await kube.create(persistentVolumeClaims, pvc("data", "5Gi"));
    const listed = await listVolumes();
    const { report, counters } = await claimSync(frozenCopy(listed.items, listed.resourceVersion), "data");
    assert.equal(report?.outcome, "bound to volume fits");
    assert.equal(report?.attempts, 1);
    assert.equal(counters["list persistentvolumes"] ?? 0, 0, JSON.stringify(counters));
    assert.equal(counters["get persistentvolumes"] ?? 0, 0, JSON.stringify(counters));
    assert.equal(counters["update persistentvolumes"], 1);
  });

  it("a stale pick (bound to another claim meanwhile) is not bound: its write loses the race, the next attempt reads it and the next best instead of listing", async () => {
    await createVolume(pv("taken", "10Gi"));
    await createVolume(pv("free", "20Gi"));
    await kube.create(persistentVolumeClaims, pvc("late", "5Gi"));
    const stale = await listVolumes();
    // Someone else binds "taken" after the copy was made.
    const taken = await kube.get<PersistentVolume>(persistentVolumes, "taken");
    await kube.replace(persistentVolumes, {
      ...taken,
      spec: {
        ...taken.spec,
        claimRef: { kind: "PersistentVolumeClaim", namespace: "other", name: "x", uid: "u-1" },
      },
    });
    const { report, counters } = await claimSync(frozenCopy(stale.items, stale.resourceVersion), "late");
    assert.equal(report?.outcome, "bound to volume free");
    assert.equal(report?.attempts, 2, "the first attempt's write, conditional on the stale copy, lost");
    assert.equal(counters["list persistentvolumes"] ?? 0, 0, JSON.stringify(counters));
    assert.equal(counters["get persistentvolumes"], 2, JSON.stringify(counters));
    const kept = await kube.get<PersistentVolume>(persistentVolumes, "taken");
    assert.equal(kept.spec.claimRef?.name, "x", "the volume bound elsewhere keeps its claim");
  });

  it("a copy far behind (every pick stale): after three fresh reads the sync lists", async () => {
    for (const name of ["s1", "s2", "s3"]) await createVolume(pv(name, "10Gi"));
    await createVolume(pv("real", "20Gi"));
    await kube.create(persistentVolumeClaims, pvc("behind", "5Gi"));
    const stale = await listVolumes();
    for (const name of ["s1", "s2", "s3"]) {
      const v = await kube.get<PersistentVolume>(persistentVolumes, name);
      await kube.replace(persistentVolumes, {
        ...v,
        spec: {
          ...v.spec,
          claimRef: { kind: "PersistentVolumeClaim", namespace: "other", name, uid: `u-${name}` },
        },
      });
    }
    const { report, counters } = await claimSync(frozenCopy(stale.items, stale.resourceVersion), "behind");
    assert.equal(report?.outcome, "bound to volume real");
    assert.equal(counters["get persistentvolumes"], 3, JSON.stringify(counters));
    assert.equal(counters["list persistentvolumes"], 1, JSON.stringify(counters));
  });

  it("claims synced at once by one binder pick different volumes from the copy: no lost race, no list", async () => {
    for (let i = 0; i < 8; i++) await createVolume(pv(`same-${i}`, "10Gi"));
    for (let i = 0; i < 8; i++) await kube.create(persistentVolumeClaims, pvc(`many-${i}`, "5Gi"));
    const listed = await listVolumes();
    const binder = new BinderController({
      kube,
      events: recorder,
      volumeCache: frozenCopy(listed.items, listed.resourceVersion),
    });
    await sandbox.admin.resetCounters();
    const reports = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        binder.handleEvent({
          action: "add",
          kind: "PersistentVolumeClaim",
          apiVersion: "v1",
          name: `many-${i}`,
          namespace: "default",
        }),
      ),
    );
    const counters = await sandbox.admin.counters();
    const bound = reports.flat().map((r) => r.outcome);
    assert.equal(new Set(bound).size, 8, JSON.stringify(bound));
    for (const outcome of bound) assert.match(outcome, /^bound to volume same-\d$/);
    assert.equal(counters["list persistentvolumes"] ?? 0, 0, JSON.stringify(counters));
    assert.equal(counters["get persistentvolumes"] ?? 0, 0, JSON.stringify(counters));
    assert.equal(counters["update persistentvolumes"], 8, "one claimRef write per claim: no conflicts");
  });

  it("no match in a copy older than the claim: the sync lists and finds the volume the copy missed", async () => {
    const before = await listVolumes();
    await createVolume(pv("new", "10Gi"));
    await kube.create(persistentVolumeClaims, pvc("fresh", "5Gi"));
    const { report, counters } = await claimSync(frozenCopy(before.items, before.resourceVersion), "fresh");
    assert.equal(report?.outcome, "bound to volume new");
    assert.equal(counters["list persistentvolumes"], 1, JSON.stringify(counters));
  });

  it("no match in a copy behind the claim, but its watch is busy: the sync waits for it, then binds, without a list", async () => {
    const before = await listVolumes();
    const copy = frozenCopy(before.items, before.resourceVersion);
    await kube.create(persistentVolumeClaims, pvc("waits", "5Gi"));
    // A volume created after the claim, which the "watch" delivers a moment into the sync.
    const late = await createVolume(pv("arrives", "10Gi"));
    // Busy: the watch delivered something just now (still older than the claim).
    copy.store.listed(before.resourceVersion);
    setTimeout(() => copy.store.apply("add", late), 30);
    const { report, counters } = await claimSync(copy, "waits");
    assert.equal(report?.outcome, "bound to volume arrives");
    assert.equal(counters["list persistentvolumes"] ?? 0, 0, JSON.stringify(counters));
  });

  /** A claim of class `cls` synced with a copy that missed a fitting volume of that class, made just before it. */
  async function missedVolume(cls: StorageClass, claimName: string) {
    await kube.create(storageClasses, cls);
    const before = await listVolumes();
    const volume = `${cls.metadata.name}-missed`;
    await createVolume(pv(volume, "10Gi", { storageClassName: cls.metadata.name }));
    const claim = pvc(claimName, "5Gi");
    await kube.create(persistentVolumeClaims, {
      ...claim,
      spec: { ...claim.spec, storageClassName: cls.metadata.name },
    });
    const synced = await claimSync(frozenCopy(before.items, before.resourceVersion), claimName);
    return { ...synced, volume: await kube.get<PersistentVolume>(persistentVolumes, volume) };
  }

  it("no match in a copy behind the claim, whose class provisions one: handed to its provisioner, no list, no wait", async () => {
    // Upstream's informer would miss that volume too: the claim gets a new one instead.
    const { report, counters, volume } = await missedVolume(
      storageClass("fast", "csi.example.com"),
      "handed",
    );
    assert.equal(report?.outcome, "waiting for external provisioner csi.example.com", JSON.stringify(report));
    assert.equal(counters["list persistentvolumes"] ?? 0, 0, JSON.stringify(counters));
    assert.equal(volume.spec.claimRef, undefined);
  });

  it("no match in a copy behind the claim, whose class provisions nothing: the sync lists and binds the volume the copy missed", async () => {
    const cls = storageClass("local", "kubernetes.io/no-provisioner");
    const { report, counters, volume } = await missedVolume(cls, "static");
    assert.equal(report?.outcome, "bound to volume local-missed");
    assert.equal(counters["list persistentvolumes"], 1, JSON.stringify(counters));
    assert.equal(volume.spec.claimRef?.name, "static");
  });

  it("a copy still making its first list: the sync waits for it and decides from it, without a list", async () => {
    for (let i = 0; i < 5; i++) await createVolume(pv(`starting-${i}`, "1Gi"));
    await createVolume(pv("starting-fits", "10Gi"));
    await kube.create(persistentVolumeClaims, pvc("early", "5Gi"));
    const listed = await listVolumes();
    // The copy's first list lands a moment into the sync, as it does in a process just started.
    let synced = false;
    const store = new ObjectStore<PersistentVolume>({ indexBy: volumeClaimIndexKey });
    const starting: VolumeCache = {
      get synced() {
        return synced;
      },
      store,
      whenSynced: () =>
        new Promise((resolve) =>
          setTimeout(() => {
            store.replaceWithList(listed.items, listed.resourceVersion);
            synced = true;
            resolve(true);
          }, 30),
        ),
    };
    const { report, counters } = await claimSync(starting, "early");
    assert.equal(report?.outcome, "bound to volume starting-fits");
    assert.equal(counters["list persistentvolumes"] ?? 0, 0, JSON.stringify(counters));
  });

  it("a copy that does not sync in time: the sync lists, as without a copy", async () => {
    await createVolume(pv("never-cached", "10Gi"));
    await kube.create(persistentVolumeClaims, pvc("impatient", "5Gi"));
    const stuck: VolumeCache = {
      synced: false,
      store: new ObjectStore<PersistentVolume>(),
      whenSynced: async () => false,
    };
    const { report, counters } = await claimSync(stuck, "impatient");
    assert.equal(report?.outcome, "bound to volume never-cached");
    assert.equal(counters["list persistentvolumes"], 1, JSON.stringify(counters));
  });

  it("no match in a copy that reflects the claim's revision: Pending, without a list", async () => {
    await createVolume(pv("tiny", "1Gi"));
    await kube.create(persistentVolumeClaims, pvc("big", "5Gi"));
    const listed = await listVolumes();
    const { report, counters } = await claimSync(frozenCopy(listed.items, listed.resourceVersion), "big");
    const claim = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "big", "default");
    assert.equal(claim.spec.volumeName, undefined);
    assert.equal(claim.status?.phase, "Pending", JSON.stringify(report));
    assert.equal(counters["list persistentvolumes"] ?? 0, 0, JSON.stringify(counters));
  });

  it("a resync binds a claim its copy (past the claim's revision) says nothing matches: the pass's own list refreshes the copy", async () => {
    // The one volume that fits is held by a losing race's claimRef when the claim is made and the copy taken.
    const held = await createVolume(pv("held", "10Gi"));
    await kube.replace(persistentVolumes, {
      ...held,
      spec: {
        ...held.spec,
        claimRef: { kind: "PersistentVolumeClaim", namespace: "other", name: "x", uid: "u-x" },
      },
    });
    await kube.create(persistentVolumeClaims, pvc("patient", "5Gi"));
    const listed = await listVolumes();
    const copy = frozenCopy(listed.items, listed.resourceVersion);
    // The race is rolled back after the copy: its event never reaches this binder.
    const taken = await kube.get<PersistentVolume>(persistentVolumes, "held");
    const { claimRef: _, ...unclaimed } = taken.spec;
    await kube.replace(persistentVolumes, { ...taken, spec: unclaimed });

    const { report } = await claimSync(copy, "patient");
    assert.equal(report?.outcome.startsWith("bound"), false, "the event's sync trusts the copy");
    const binder = new BinderController({ kube, events: recorder, volumeCache: copy });
    const pass = await binder.resync();
    assert.deepEqual(pass.errors, []);
    const claim = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "patient", "default");
    assert.equal(claim.spec.volumeName, "held");
    assert.equal(claim.status?.phase, "Bound");
    assert.equal(
      copy.store.get("", "held")?.spec.claimRef?.name,
      "patient",
      "the copy learned the list and the bind",
    );
  });

  it("a watched store that would crowd the heap is dropped: not synced, empty, and the binder lists instead", async () => {
    await createVolume(pv("big-cluster", "10Gi"));
    const watched = startWatchedStore<PersistentVolume>({
      kubeConfig: sandbox.kubeConfig,
      json: kube,
      resource: persistentVolumes,
      log: createLogger({ name: "test", level: "silent" }),
      maxHeapShare: 0, // any heap at all is too much
    });
    try {
      assert.equal(await watched.whenSynced(10_000), false, "a copy dropped at its first list never syncs");
      assert.equal(watched.dropped, true);
      assert.equal(watched.synced, false);
      assert.equal(watched.store.size, 0);
      await kube.create(persistentVolumeClaims, pvc("listed", "1Gi"));
      const { report, counters } = await claimSync(watched, "listed");
      assert.equal(report?.outcome, "bound to volume big-cluster");
      assert.equal(counters["list persistentvolumes"], 1, JSON.stringify(counters));
      assert.equal(watched.store.size, 0, "the dropped copy does not fill up from the list");
    } finally {
      await watched.stop();
    }
  });

  it("a watched store follows the API: it syncs, sees creates and deletes, and covers their revisions", async () => {
    await createVolume(pv("before", "1Gi"));
    const watched: WatchedStore<PersistentVolume> = startWatchedStore<PersistentVolume>({
      kubeConfig: sandbox.kubeConfig,
      json: kube,
      resource: persistentVolumes,
      log: createLogger({ name: "test", level: "silent" }),
    });
    try {
      assert.equal(await watched.whenSynced(10_000), true);
      assert.ok(watched.store.get("", "before"), "the first list is in");
      assert.equal(await watched.whenSynced(0), true, "a synced copy answers at once, window or not");
      const created = await createVolume(pv("after", "2Gi"));
      await waitFor(() => watched.store.covers(created.metadata.resourceVersion), "the create");
      assert.equal(watched.store.get("", "after")?.metadata.uid, created.metadata.uid);
      await kube.delete(persistentVolumes, "before");
      await waitFor(() => watched.store.get("", "before") === undefined, "the delete");
      assert.deepEqual(
        watched.store.items().map((v) => v.metadata.name),
        ["after"],
      );
      // And the binder over it binds a claim created after all that, without a list.
      await kube.create(persistentVolumeClaims, pvc("watched", "1Gi"));

      await waitFor(() => watched.store.get("", "after") !== undefined, "the volume");
      const { report, counters } = await claimSync(watched, "watched");
      assert.equal(report?.outcome, "bound to volume after");
      assert.equal(counters["list persistentvolumes"] ?? 0, 0, JSON.stringify(counters));
    } finally {
      await watched.stop();
    }
  });
});

describe("binder: a bound claim's event judged on its own copy and the watched volume", () => {
  /** A claim bound to a volume by a binder without a copy, as the API holds them now. */
  async function boundPair(name: string): Promise<PersistentVolumeClaim> {
    await createVolume(pv(`${name}-pv`, "10Gi"));
    await kube.create(persistentVolumeClaims, pvc(name, "5Gi"));
    const plain = new BinderController({ kube, events: recorder });
    await plain.syncClaimByKey("default", name);
    await plain.syncClaimByKey("default", name);
    const claim = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, name, "default");
    assert.equal(claim.status?.phase, "Bound");
    return claim;
  }

  async function claimEvent(cache: VolumeCache, name: string, object: unknown) {
    const binder = new BinderController({ kube, events: recorder, volumeCache: cache });
    await sandbox.admin.resetCounters();
    const reports = await binder.handleEvent({
      action: "update",
      kind: "PersistentVolumeClaim",
      apiVersion: "v1",
      name,
      namespace: "default",
      object: object as Record<string, unknown>,
    });
    return { reports, counters: await sandbox.admin.counters() };
  }

  it("a copy that covers the claim and agrees: nothing to do, without a single request", async () => {
    const claim = await boundPair("settled");
    const listed = await listVolumes();
    const { reports, counters } = await claimEvent(
      frozenCopy(listed.items, listed.resourceVersion),
      "settled",
      claim,
    );
    assert.equal(reports[0]?.outcome, "already bound (event copy, watched volume)");
    assert.deepEqual(counters, {}, "no reads, no writes");
  });

  it("a copy behind the claim's revision that shows the two bound to each other: nothing to do, no request", async () => {
    const before = await listVolumes();
    const claim = await boundPair("ahead");
    const { reports, counters } = await claimEvent(
      frozenCopy(
        [...before.items, await kube.get<PersistentVolume>(persistentVolumes, "ahead-pv")],
        before.resourceVersion,
      ),
      "ahead",
      claim,
    );
    assert.equal(reports[0]?.outcome, "already bound (event copy, watched volume)");
    assert.deepEqual(counters, {});
  });

  it("a copy behind the claim's revision whose volume is not Bound to it (yet): the usual fresh reads", async () => {
    const before = await listVolumes();
    const claim = await boundPair("behind");
    const fresh = await kube.get<PersistentVolume>(persistentVolumes, "behind-pv");
    const stale = { ...fresh, status: { phase: "Available" } };
    const { reports, counters } = await claimEvent(
      frozenCopy([...before.items, stale], before.resourceVersion),
      "behind",
      claim,
    );
    assert.equal(reports[0]?.outcome, "already bound to volume behind-pv");
    assert.equal(counters["get persistentvolumeclaims"], 1, JSON.stringify(counters));
  });

  it("copies that disagree (the volume bound to another claim in the copy): the usual fresh reads decide", async () => {
    const claim = await boundPair("doubted");
    const listed = await listVolumes();
    const stale = listed.items.map((v) =>
      v.metadata.name === "doubted-pv" && v.spec.claimRef
        ? { ...v, spec: { ...v.spec, claimRef: { ...v.spec.claimRef, uid: "someone-else" } } }
        : v,
    );
    const { reports, counters } = await claimEvent(
      frozenCopy(stale, listed.resourceVersion),
      "doubted",
      claim,
    );
    assert.equal(reports[0]?.outcome, "already bound to volume doubted-pv", "the fresh volume is still ours");
    assert.equal(counters["get persistentvolumes"], 1, JSON.stringify(counters));
  });

  it("an event whose copy is another claim, or has an odd shape, is not judged from the copy", async () => {
    const claim = await boundPair("odd");
    const listed = await listVolumes();
    const copy = frozenCopy(listed.items, listed.resourceVersion);
    const other = { ...claim, metadata: { ...claim.metadata, name: "someone-else" } };
    const oddStatus = { ...claim, status: { ...claim.status, capacity: { storage: 5 } } };
    for (const object of [other, oddStatus, { ...claim, spec: "nope" }]) {
      const { reports, counters } = await claimEvent(copy, "odd", object);
      assert.equal(reports[0]?.outcome, "already bound to volume odd-pv");
      assert.equal(counters["get persistentvolumeclaims"], 1, JSON.stringify(counters));
    }
  });
  it("a PV's event binds a waiting claim the copy cannot know about yet: the fresh PV is judged with the copy, no list", async () => {
    await kube.create(persistentVolumeClaims, pvc("waiting", "5Gi"));
    await createVolume(pv("big", "50Gi"));
    // The copy is newer than the claim but has not seen the PV created after it.
    const stale = await listVolumes();
    const created = await kube.create(persistentVolumes, pv("arrived", "10Gi"));
    const binder = new BinderController({
      kube,
      events: recorder,
      volumeCache: frozenCopy(stale.items, stale.resourceVersion),
    });
    await sandbox.admin.resetCounters();
    const reports = await binder.handleEvent({
      action: "add",
      kind: "PersistentVolume",
      apiVersion: "v1",
      name: "arrived",
      object: created as unknown as Record<string, unknown>,
    });
    assert.deepEqual(
      reports.map((r) => r.outcome),
      ["volume is available", "bound to volume arrived"],
    );
    const counters = await sandbox.admin.counters();
    assert.equal(counters["list persistentvolumes"] ?? 0, 0, JSON.stringify(counters));
    assert.equal(counters["list persistentvolumeclaims"], 1, JSON.stringify(counters));
  });
});

describe("binder: reads from the watched copy of the claims", () => {
  function claimCopy(items: PersistentVolumeClaim[], rv: string): ClaimCache {
    const store = new ObjectStore<PersistentVolumeClaim>();
    store.replaceWithList(items, rv);
    return { synced: true, store };
  }

  async function listClaims() {
    return kube.list<PersistentVolumeClaim>(persistentVolumeClaims);
  }

  /** A claim bound to a volume by a binder without copies, as the API holds them now. */
  async function boundPair(name: string): Promise<PersistentVolume> {
    await createVolume(pv(`${name}-pv`, "10Gi"));
    await kube.create(persistentVolumeClaims, pvc(name, "5Gi"));
    const plain = new BinderController({ kube, events: recorder });
    await plain.syncClaimByKey("default", name);
    await plain.syncClaimByKey("default", name);
    return kube.get<PersistentVolume>(persistentVolumes, `${name}-pv`);
  }

  async function volumeEvent(claimCache: ClaimCache, volume: PersistentVolume) {
    const binder = new BinderController({ kube, events: recorder, claimCache });
    await sandbox.admin.resetCounters();
    const reports = await binder.handleEvent({
      action: "update",
      kind: "PersistentVolume",
      apiVersion: "v1",
      name: volume.metadata.name,
      object: volume as unknown as Record<string, unknown>,
    });
    return { reports, counters: await sandbox.admin.counters() };
  }

  /** A claim's DELETED event, as the forwarder delivers it. */
  function claimDeleted(binder: BinderController, deleted: PersistentVolumeClaim) {
    return binder.handleEvent({
      action: "delete",
      kind: "PersistentVolumeClaim",
      apiVersion: "v1",
      name: deleted.metadata.name,
      namespace: deleted.metadata.namespace ?? "default",
      object: deleted as unknown as Record<string, unknown>,
    });
  }

  it("a bound volume's echo, with a claim copy that has reached it: nothing to do, without a single request", async () => {
    const volume = await boundPair("echo");
    const claims = await listClaims();
    const { reports, counters } = await volumeEvent(claimCopy(claims.items, claims.resourceVersion), volume);
    assert.equal(reports[0]?.outcome, "already bound (event copy, watched claim)");
    assert.deepEqual(counters, {}, "no reads, no writes");
  });

  it("a claim copy without the claim, or with another claim by that name (UID): the claim is read live", async () => {
    const volume = await boundPair("unsure");
    const claims = await listClaims();
    const impostor = claims.items.map((c) =>
      c.metadata.name === "unsure" ? { ...c, metadata: { ...c.metadata, uid: "an-older-claim" } } : c,
    );
    const without = claims.items.filter((c) => c.metadata.name !== "unsure");
    for (const items of [impostor, without]) {
      const { reports, counters } = await volumeEvent(claimCopy(items, claims.resourceVersion), volume);
      assert.notEqual(reports[0]?.outcome, "already bound (event copy, watched claim)");
      assert.equal(counters["get persistentvolumeclaims"], 1, JSON.stringify(counters));
      assert.equal(counters["update persistentvolumes"] ?? 0, 0, "the volume is not released");
    }
    const kept = await kube.get<PersistentVolume>(persistentVolumes, "unsure-pv");
    assert.equal(kept.spec.claimRef?.name, "unsure");
    assert.equal(kept.status?.phase, "Bound");
  });

  it("a claim event the claim copy has reached: the claim comes from the copy, not a GET", async () => {
    await createVolume(pv("for-copied", "10Gi"));
    const created = await kube.create(persistentVolumeClaims, pvc("copied", "5Gi"));
    const claims = await listClaims();
    const binder = new BinderController({
      kube,
      events: recorder,
      claimCache: claimCopy(claims.items, claims.resourceVersion),
    });
    await sandbox.admin.resetCounters();
    const [report] = await binder.handleEvent({
      action: "add",
      kind: "PersistentVolumeClaim",
      apiVersion: "v1",
      name: "copied",
      namespace: "default",
      object: created as unknown as Record<string, unknown>,
    });
    const counters = await sandbox.admin.counters();
    assert.equal(report?.outcome, "bound to volume for-copied");
    assert.equal(counters["get persistentvolumeclaims"] ?? 0, 0, JSON.stringify(counters));
  });

  it("a claim's deletion, with a claim copy that has not seen it yet: the claim is read live and the volume released", async () => {
    const volume = await boundPair("deleted");
    // The copy still holds the claim (same UID), as a watch that lags the forwarded DELETE would.
    const lagging = await listClaims();
    await kube.delete(persistentVolumeClaims, "deleted", "default");
    const binder = new BinderController({
      kube,
      events: recorder,
      claimCache: claimCopy(lagging.items, lagging.resourceVersion),
    });
    const claimCopyOf = lagging.items.find((c) => c.metadata.name === "deleted")!;
    const deleted = {
      ...claimCopyOf,
      metadata: { ...claimCopyOf.metadata, resourceVersion: String(Number(lagging.resourceVersion) + 1) },
    };
    await sandbox.admin.resetCounters();
    const reports = await claimDeleted(binder, deleted);
    assert.match(reports.map((r) => r.outcome).join(), /volume is released/);
    const released = await kube.get<PersistentVolume>(persistentVolumes, volume.metadata.name);
    assert.equal(released.status?.phase, "Released");
  });

  it("a claim's deletion the claim copy has seen: one live read of the claim (the release's proof), the volume released", async () => {
    const volume = await boundPair("gone-for-good");
    const before = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "gone-for-good", "default");
    await kube.delete(persistentVolumeClaims, "gone-for-good", "default");
    const after = await listClaims();
    const binder = new BinderController({
      kube,
      events: recorder,
      claimCache: claimCopy(after.items, after.resourceVersion),
    });
    const deleted = { ...before, metadata: { ...before.metadata, resourceVersion: after.resourceVersion } };
    await sandbox.admin.resetCounters();
    const reports = await claimDeleted(binder, deleted);
    assert.match(reports.map((r) => r.outcome).join(), /volume is released/);
    const counters = await sandbox.admin.counters();
    assert.equal(counters["get persistentvolumeclaims"], 1, JSON.stringify(counters));
    assert.equal(
      (await kube.get<PersistentVolume>(persistentVolumes, volume.metadata.name)).status?.phase,
      "Released",
    );
  });

  it("a claim's deletion the claim copy's watch reported: no live read, the volume released", async () => {
    const volume = await boundPair("reported");
    const claims = await listClaims();
    const store = new ObjectStore<PersistentVolumeClaim>({ rememberDeleted: 100 });
    store.replaceWithList(claims.items, claims.resourceVersion);
    const before = claims.items.find((c) => c.metadata.name === "reported")!;
    await kube.delete(persistentVolumeClaims, "reported", "default");
    const after = await listClaims();
    const deleted = { ...before, metadata: { ...before.metadata, resourceVersion: after.resourceVersion } };
    // What the copy's own watch does with the DELETED event.
    store.apply("delete", deleted);
    const binder = new BinderController({ kube, events: recorder, claimCache: { synced: true, store } });
    await sandbox.admin.resetCounters();
    const reports = await claimDeleted(binder, deleted);
    assert.match(reports.map((r) => r.outcome).join(), /volume is released/);
    const counters = await sandbox.admin.counters();
    assert.equal(counters["get persistentvolumeclaims"] ?? 0, 0, JSON.stringify(counters));
    assert.equal(
      (await kube.get<PersistentVolume>(persistentVolumes, volume.metadata.name)).status?.phase,
      "Released",
    );

    // Another claim of that name (a new UID) in the copy neither hides the old one's deletion nor is taken for it.
    const again = await kube.create(persistentVolumeClaims, pvc("reported", "5Gi"));
    store.apply("add", again);
    const released = await kube.get<PersistentVolume>(persistentVolumes, volume.metadata.name);
    const { counters: later } = await volumeEvent({ synced: true, store }, released);
    assert.equal(later["get persistentvolumeclaims"] ?? 0, 0, JSON.stringify(later));
    const still = await kube.get<PersistentVolume>(persistentVolumes, volume.metadata.name);
    assert.equal(still.spec.claimRef?.uid, before.metadata.uid);
    assert.equal(still.status?.phase, "Released");
  });

  it("a new volume nudges the claims waiting for it from the claim copy: no list of claims", async () => {
    await kube.create(persistentVolumeClaims, pvc("nudged", "5Gi"));
    const claims = await listClaims();
    const created = await kube.create(persistentVolumes, pv("nudging", "10Gi"));
    const binder = new BinderController({
      kube,
      events: recorder,
      claimCache: claimCopy(claims.items, claims.resourceVersion),
    });
    await sandbox.admin.resetCounters();
    const reports = await binder.handleEvent({
      action: "add",
      kind: "PersistentVolume",
      apiVersion: "v1",
      name: "nudging",
      object: created as unknown as Record<string, unknown>,
    });
    assert.deepEqual(
      reports.map((r) => r.outcome),
      ["volume is available", "bound to volume nudging"],
    );
    const counters = await sandbox.admin.counters();
    assert.equal(counters["list persistentvolumeclaims"] ?? 0, 0, JSON.stringify(counters));
  });

  it("a Released volume's event, its claim absent from the claim copy: no read of the claim (gone for good), even from a copy behind the event", async () => {
    const volume = await boundPair("released");
    const before = await listClaims();
    await kube.delete(persistentVolumeClaims, "released", "default");
    const plain = new BinderController({ kube, events: recorder });
    await plain.syncVolumeByName(volume.metadata.name);
    const released = await kube.get<PersistentVolume>(persistentVolumes, volume.metadata.name);
    assert.equal(released.status?.phase, "Released");
    const without = before.items.filter((c) => c.metadata.name !== "released");
    // A copy far behind the event: only the phase makes its word enough.
    const { reports, counters } = await volumeEvent(claimCopy(without, "1"), released);
    assert.equal(counters["get persistentvolumeclaims"] ?? 0, 0, JSON.stringify(counters));
    assert.equal(counters["update persistentvolumes"] ?? 0, 0, JSON.stringify(reports));
    // The same copy still holding the claim (lagging its deletion) proves nothing: the claim is read live.
    const holding = await volumeEvent(claimCopy(before.items, "1"), released);
    assert.equal(holding.counters["get persistentvolumeclaims"], 1, JSON.stringify(holding.counters));
    assert.equal(
      (await kube.get<PersistentVolume>(persistentVolumes, volume.metadata.name)).status?.phase,
      "Released",
    );
  });

  it("a provisioned volume nudging its claim: claim and candidate come from copies that have reached its event, no GET", async () => {
    const claim = await kube.create(persistentVolumeClaims, pvc("nudged-copies", "5Gi"));
    // As a provisioner creates it: pointing at the claim, UID included.
    const created = await kube.create(
      persistentVolumes,
      pv("nudging-copies", "10Gi", {
        claimRef: {
          kind: "PersistentVolumeClaim",
          namespace: "default",
          name: "nudged-copies",
          uid: claim.metadata.uid!,
        },
      }),
    );
    const claims = await listClaims();
    const volumes = await kube.list<PersistentVolume>(persistentVolumes);
    const binder = new BinderController({
      kube,
      events: recorder,
      claimCache: claimCopy(claims.items, claims.resourceVersion),
      volumeCache: frozenCopy(volumes.items, volumes.resourceVersion),
    });
    await sandbox.admin.resetCounters();
    const reports = await binder.handleEvent({
      action: "add",
      kind: "PersistentVolume",
      apiVersion: "v1",
      name: "nudging-copies",
      object: created as unknown as Record<string, unknown>,
    });
    assert.ok(
      reports.some((r) => r.outcome === "bound to volume nudging-copies"),
      JSON.stringify(reports),
    );
    const counters = await sandbox.admin.counters();
    assert.equal(counters["get persistentvolumeclaims"] ?? 0, 0, JSON.stringify(counters));
    assert.equal(counters["get persistentvolumes"] ?? 0, 0, JSON.stringify(counters));
    const bound = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "nudged-copies", "default");
    assert.equal(bound.spec.volumeName, "nudging-copies");
  });

  it("a new static volume nudging a waiting claim: its copy (not yet Available) does not fit, so it is read fresh and bound", async () => {
    await kube.create(persistentVolumeClaims, pvc("nudged-static", "5Gi"));
    const created = await kube.create(persistentVolumes, pv("nudging-static", "10Gi"));
    const claims = await listClaims();
    const volumes = await kube.list<PersistentVolume>(persistentVolumes);
    const binder = new BinderController({
      kube,
      events: recorder,
      claimCache: claimCopy(claims.items, claims.resourceVersion),
      volumeCache: frozenCopy(volumes.items, volumes.resourceVersion),
    });
    const reports = await binder.handleEvent({
      action: "add",
      kind: "PersistentVolume",
      apiVersion: "v1",
      name: "nudging-static",
      object: created as unknown as Record<string, unknown>,
    });
    assert.deepEqual(
      reports.map((r) => r.outcome),
      ["volume is available", "bound to volume nudging-static"],
    );
  });

  it("a Released volume's deletion, its claim absent from the claim copy: no claim sync, not a single request", async () => {
    const volume = await boundPair("released-then-deleted");
    await kube.delete(persistentVolumeClaims, "released-then-deleted", "default");
    const plain = new BinderController({ kube, events: recorder });
    await plain.syncVolumeByName(volume.metadata.name);
    const released = await kube.get<PersistentVolume>(persistentVolumes, volume.metadata.name);
    assert.equal(released.status?.phase, "Released");
    await kube.delete(persistentVolumes, volume.metadata.name);
    const claims = await listClaims();
    const binder = new BinderController({
      kube,
      events: recorder,
      claimCache: claimCopy(claims.items, claims.resourceVersion),
    });
    await sandbox.admin.resetCounters();
    const reports = await binder.handleEvent({
      action: "delete",
      kind: "PersistentVolume",
      apiVersion: "v1",
      name: volume.metadata.name,
      object: released as unknown as Record<string, unknown>,
    });
    assert.deepEqual(reports, []);
    assert.deepEqual(await sandbox.admin.counters(), { "get persistentvolumes": 1 });
  });

  it("a Bound volume's deletion: its claim is synced (read live: the copy has not seen the volume go) and marked Lost", async () => {
    const volume = await boundPair("bound-then-deleted");
    await kube.delete(persistentVolumes, volume.metadata.name);
    const claims = await listClaims();
    const binder = new BinderController({
      kube,
      events: recorder,
      claimCache: claimCopy(claims.items, claims.resourceVersion),
    });
    const reports = await binder.handleEvent({
      action: "delete",
      kind: "PersistentVolume",
      apiVersion: "v1",
      name: volume.metadata.name,
      object: volume as unknown as Record<string, unknown>,
    });
    assert.equal(reports.length, 1, JSON.stringify(reports));
    const lost = await kube.get<PersistentVolumeClaim>(
      persistentVolumeClaims,
      "bound-then-deleted",
      "default",
    );
    assert.equal(lost.status?.phase, "Lost");
  });

  it("an event older than the claim copy's state of that very claim: acknowledged as superseded, not a single request", async () => {
    await createVolume(pv("for-echo", "10Gi"));
    const created = await kube.create(persistentVolumeClaims, pvc("echoed", "5Gi"));
    await kube.patch(
      persistentVolumeClaims,
      "echoed",
      "default",
      { metadata: { labels: { a: "b" } } },
      "merge",
    );
    const claims = await listClaims();
    const binder = new BinderController({
      kube,
      events: recorder,
      claimCache: claimCopy(claims.items, claims.resourceVersion),
    });
    await sandbox.admin.resetCounters();
    const [report] = await binder.handleEvent({
      action: "add",
      kind: "PersistentVolumeClaim",
      apiVersion: "v1",
      name: "echoed",
      namespace: "default",
      object: created as unknown as Record<string, unknown>,
    });
    assert.equal(report?.outcome, "superseded (the watched copy is newer)");
    assert.deepEqual(await sandbox.admin.counters(), {});
    // Another claim by that name (another UID) in the copy proves nothing about this one.
    const other = claims.items.map((c) =>
      c.metadata.name === "echoed" ? { ...c, metadata: { ...c.metadata, uid: "another" } } : c,
    );
    const judged = new BinderController({
      kube,
      events: recorder,
      claimCache: claimCopy(other, claims.resourceVersion),
    });
    const [again] = await judged.handleEvent({
      action: "add",
      kind: "PersistentVolumeClaim",
      apiVersion: "v1",
      name: "echoed",
      namespace: "default",
      object: created as unknown as Record<string, unknown>,
    });
    assert.notEqual(again?.outcome, "superseded (the watched copy is newer)");
  });

  it("the binder's own writes reach its copies: the echo of its claim update is superseded, not a single request", async () => {
    await createVolume(pv("for-own-echo", "10Gi"));
    const created = await kube.create(persistentVolumeClaims, pvc("own-echo", "5Gi"));
    const claims = await listClaims();
    const volumes = await kube.list<PersistentVolume>(persistentVolumes);
    const claimCache = claimCopy(claims.items, claims.resourceVersion);
    const binder = new BinderController({
      kube,
      events: recorder,
      claimCache,
      volumeCache: frozenCopy(volumes.items, volumes.resourceVersion),
    });
    const [bound] = await binder.handleEvent({
      action: "add",
      kind: "PersistentVolumeClaim",
      apiVersion: "v1",
      name: "own-echo",
      namespace: "default",
      object: created as unknown as Record<string, unknown>,
    });
    assert.equal(bound?.outcome, "bound to volume for-own-echo");
    const now = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "own-echo", "default");
    assert.equal(
      claimCache.store.get("default", "own-echo")?.metadata.resourceVersion,
      now.metadata.resourceVersion,
    );
    // The claim update's echo: volumeName set, status not written yet (one revision before the status write).
    const echo = {
      ...now,
      metadata: { ...now.metadata, resourceVersion: String(Number(now.metadata.resourceVersion) - 1) },
      status: { phase: "Pending" },
    };
    await sandbox.admin.resetCounters();
    const [report] = await binder.handleEvent({
      action: "update",
      kind: "PersistentVolumeClaim",
      apiVersion: "v1",
      name: "own-echo",
      namespace: "default",
      object: echo as unknown as Record<string, unknown>,
    });
    assert.equal(report?.outcome, "superseded (the watched copy is newer)");
    assert.deepEqual(await sandbox.admin.counters(), {});
  });

  it("a copy that claims to be current but is not: the write loses its race, and the next attempt reads live", async () => {
    await createVolume(pv("for-stale", "10Gi"));
    const created = await kube.create(persistentVolumeClaims, pvc("stale", "5Gi"));
    const claims = await listClaims();
    // Someone changes the claim after the copy was made; the copy says it is newer than everything.
    const current = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "stale", "default");
    await kube.replace(persistentVolumeClaims, {
      ...current,
      metadata: { ...current.metadata, labels: { touched: "yes" } },
    });
    const binder = new BinderController({
      kube,
      events: recorder,
      claimCache: claimCopy(claims.items, "999999999"),
    });
    const [report] = await binder.handleEvent({
      action: "add",
      kind: "PersistentVolumeClaim",
      apiVersion: "v1",
      name: "stale",
      namespace: "default",
      object: created as unknown as Record<string, unknown>,
    });
    assert.equal(report?.outcome, "bound to volume for-stale");
    assert.ok((report?.attempts ?? 0) >= 2, `attempts: ${report?.attempts}`);
    const bound = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "stale", "default");
    assert.equal(bound.metadata.labels?.touched, "yes", "the other writer's change is kept");
    assert.equal(bound.spec.volumeName, "for-stale");
  });
});
