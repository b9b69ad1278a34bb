import assert from "node:assert/strict";
import { after, before, beforeEach, describe, test } from "node:test";
import { ApiException, type V1ConfigMap } from "@kubernetes/client-node";
import { isConflict, isTransient } from "../../shared/kube/api-errors.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import {
  ConflictRetriesExhaustedError,
  type Mutate,
  retryWhileLosingRaces,
  UnconditionalWriteError,
  type UpdateObjectOptions,
  updateObject,
  updateWithRetry,
} from "../../shared/kube/optimistic-update.ts";
import {
  persistentVolumeClaims,
  persistentVolumes,
  type ResourceDescriptor,
  volumeAttachments,
} from "../../shared/kube/resources.ts";
import type {
  KubeObject,
  PersistentVolume,
  PersistentVolumeClaim,
  VolumeAttachment,
} from "../../shared/kube/types.ts";
import { backoffDelayMs } from "../../shared/retry.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";

// Unit level: an in-memory object with resourceVersion preconditions stands in
// for the server. The same behaviour over real HTTP is in the sandbox tests below.
function fakeStore(initial: V1ConfigMap) {
  let stored = structuredClone(initial);
  let rv = Number(initial.metadata?.resourceVersion ?? "1");
  const log: string[] = [];
  return {
    log,
    get: () => stored,
    bump(change: (o: V1ConfigMap) => void) {
      change(stored);
      rv++;
      stored.metadata = { ...stored.metadata, resourceVersion: String(rv) };
    },
    read: async () => {
      log.push("read");
      return structuredClone(stored);
    },
    write: async (o: V1ConfigMap) => {
      log.push(`write@${o.metadata?.resourceVersion}`);
      if (o.metadata?.resourceVersion !== String(rv)) {
        throw new ApiException(
          409,
          "Conflict",
          JSON.stringify({ kind: "Status", code: 409, reason: "Conflict" }),
          {},
        );
      }
      rv++;
      stored = structuredClone({ ...o, metadata: { ...o.metadata, resourceVersion: String(rv) } });
      return structuredClone(stored);
    },
  };
}

const noSleep = async () => {};

test("no write when mutate returns undefined or the same content", async () => {
  const store = fakeStore({
    metadata: { name: "a", resourceVersion: "5", creationTimestamp: new Date(0) },
    data: { k: "v" },
  });
  const r1 = await updateWithRetry({ read: store.read, write: store.write, mutate: () => undefined });
  assert.deepEqual([r1.written, r1.attempts], [false, 1]);
  // Edited in place to the same values, plus an explicit undefined key: still no change on the wire.
  const r2 = await updateWithRetry({
    read: store.read,
    write: store.write,
    mutate: (o) => {
      o.data = { k: "v" };
      o.binaryData = undefined;
      return o;
    },
  });
  assert.equal(r2.written, false);
  assert.deepEqual(store.log, ["read", "read"]);
});

test("mutate gets a private copy and the write carries the resourceVersion that was read", async () => {
  const store = fakeStore({ metadata: { name: "a", resourceVersion: "5" }, data: { k: "v" } });
  let seen: V1ConfigMap | undefined;
  const r = await updateWithRetry({
    read: async () => store.get(), // hands out the stored object itself
    write: store.write,
    mutate: (o) => {
      seen = o;
      o.data = { k: "w" };
      o.metadata = { ...o.metadata, resourceVersion: "999" }; // mutate must not pick the precondition
      return o;
    },
  });
  assert.notEqual(seen, store.get());
  assert.deepEqual(
    [r.written, r.attempts, r.object.data?.k, r.object.metadata?.resourceVersion],
    [true, 1, "w", "6"],
  );
  assert.deepEqual(store.log, ["write@5"]);
});

test("a conflict re-reads and re-decides on the new state", async () => {
  const store = fakeStore({ metadata: { name: "a", resourceVersion: "1" }, data: { n: "0" } });
  let interfere = true;
  const delays: number[] = [];
  const r = await updateWithRetry({
    read: async () => {
      const o = await store.read();
      if (interfere) {
        interfere = false;
        store.bump((s) => {
          s.data = { n: "10" };
        });
      }
      return o;
    },
    write: store.write,
    mutate: (o) => ({ ...o, data: { n: String(Number(o.data?.n) + 1) } }),
    sleep: async (ms) => {
      delays.push(ms);
    },
    random: () => 0.5,
    baseDelayMs: 100,
  });
  assert.deepEqual([r.written, r.attempts, store.get().data?.n], [true, 2, "11"]);
  assert.deepEqual(store.log, ["read", "write@1", "read", "write@2"]);
  assert.deepEqual(delays, [75]);
});

test("conflicts are bounded and end in a 409-classified error", async () => {
  const store = fakeStore({ metadata: { name: "a", resourceVersion: "1" } });
  const err = await updateWithRetry({
    read: async () => {
      const o = await store.read();
      store.bump(() => {});
      return o;
    },
    write: store.write,
    mutate: (o) => ({ ...o, data: { x: "y" } }),
    maxAttempts: 3,
    sleep: noSleep,
  }).catch((e: unknown) => e);
  assert.ok(err instanceof ConflictRetriesExhaustedError);
  assert.equal(err.attempts, 3);
  assert.equal(isConflict(err), true);
  assert.equal(store.log.filter((l) => l.startsWith("write")).length, 3);
});

test("other errors propagate at once", async () => {
  let writes = 0;
  const boom = new ApiException(422, "Invalid", "{}", {});
  await assert.rejects(
    updateWithRetry({
      read: async (): Promise<V1ConfigMap> => ({ metadata: { name: "a", resourceVersion: "1" } }),
      write: async () => {
        writes++;
        throw boom;
      },
      mutate: (o) => ({ ...o, data: { a: "b" } }),
      sleep: noSleep,
    }),
    (e) => e === boom,
  );
  assert.equal(writes, 1);
});

test("refuses an unconditional write", async () => {
  await assert.rejects(
    updateWithRetry({
      read: async (): Promise<V1ConfigMap> => ({ metadata: { name: "a" } }),
      write: async (o) => o,
      mutate: (o) => ({ ...o, data: { a: "b" } }),
    }),
    UnconditionalWriteError,
  );
});

test("backoff doubles, is jittered within [ceiling/2, ceiling] and capped", () => {
  const at = (attempt: number, r: number) =>
    backoffDelayMs(attempt, { baseDelayMs: 10, maxDelayMs: 50, random: () => r });
  assert.deepEqual([at(1, 0), at(1, 0.999)].map(Math.round), [5, 10]);
  assert.deepEqual([at(2, 0), at(3, 0)], [10, 20]);
  assert.deepEqual([at(4, 0), at(10, 0)], [25, 25]);
});

// ---------------------------------------------------------------------------
// Over real HTTP against the sandbox API server, through KubeJsonClient.

describe("against the sandbox", () => {
  let sandbox: TestSandbox;
  let kube: KubeJsonClient;
  const key = { namespace: "default", name: "claim" };
  const fast = { baseDelayMs: 1, maxDelayMs: 5 };
  const getClaim = () => kube.get<PersistentVolumeClaim>(persistentVolumeClaims, key.name, key.namespace);

  before(async () => {
    sandbox = await startTestSandbox();
    kube = new KubeJsonClient(sandbox.kubeConfig);
  });
  after(async () => {
    await kube.close();
    await sandbox.close();
  });
  beforeEach(async () => {
    await sandbox.admin.reset();
    await sandbox.admin.seed([
      {
        apiVersion: "v1",
        kind: "PersistentVolumeClaim",
        metadata: { name: "claim", namespace: "default" },
        spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
        status: { phase: "Pending" },
      },
      {
        apiVersion: "v1",
        kind: "PersistentVolume",
        metadata: { name: "pv1" },
        spec: {
          capacity: { storage: "1Gi" },
          accessModes: ["ReadWriteOnce"],
          persistentVolumeReclaimPolicy: "Delete",
          csi: { driver: "hostpath.csi.example", volumeHandle: "vol-1" },
        },
        status: { phase: "Available" },
      },
      {
        apiVersion: "storage.k8s.io/v1",
        kind: "VolumeAttachment",
        metadata: { name: "va1" },
        spec: {
          attacher: "hostpath.csi.example",
          nodeName: "node1",
          source: { persistentVolumeName: "pv1" },
        },
      },
    ]);
    await sandbox.admin.resetCounters();
  });

  const annotate = (value: string) => (pvc: PersistentVolumeClaim) => {
    pvc.metadata = { ...pvc.metadata, annotations: { ...pvc.metadata.annotations, mine: value } };
    return pvc;
  };
  const updateClaim = (mutate: Mutate<PersistentVolumeClaim>, options: UpdateObjectOptions = {}) =>
    updateObject<PersistentVolumeClaim>(kube, persistentVolumeClaims, key, mutate, options);

  test("loses to a concurrent writer, re-reads, and keeps both changes", async () => {
    // A client whose first read is followed at once by someone else's write,
    // so our conditional write carries a stale resourceVersion.
    class RacedClient extends KubeJsonClient {
      raced = false;
      override async get<T extends KubeObject>(r: ResourceDescriptor, name: string, namespace?: string) {
        const current = await super.get<T>(r, name, namespace);
        if (!this.raced) {
          this.raced = true;
          await super.replace(r, {
            ...current,
            metadata: { ...current.metadata, labels: { other: "writer" } },
          });
        }
        return current;
      }
    }
    const raced = new RacedClient(sandbox.kubeConfig);
    const result = await updateObject(raced, persistentVolumeClaims, key, annotate("yes"), fast).finally(() =>
      raced.close(),
    );
    assert.equal(raced.raced, true);
    assert.deepEqual([result.written, result.attempts], [true, 2]);
    assert.equal(result.object.metadata.annotations?.mine, "yes");
    const stored = await getClaim();
    assert.equal(stored.metadata.labels?.other, "writer");
    assert.equal(stored.metadata.annotations?.mine, "yes");
    const counters = await sandbox.admin.counters();
    assert.equal(counters["update persistentvolumeclaims"], 3); // theirs, our lost one, our winning one
    assert.equal(counters["get persistentvolumeclaims"], 3); // two reads by us, one to check
  });

  test("injected 409s are retried until a write lands", async () => {
    await sandbox.admin.setFaults({
      conflictProbability: 0.6,
      seed: 7,
      verbs: ["update"],
      resources: ["persistentvolumeclaims"],
    });
    const result = await updateClaim(annotate("through"), { ...fast, maxAttempts: 20 });
    await sandbox.admin.clearFaults();
    assert.equal(result.written, true);
    assert.equal(result.object.metadata.annotations?.mine, "through");
    const counters = await sandbox.admin.counters();
    assert.equal(counters["update persistentvolumeclaims"], result.attempts);
    assert.equal(counters["get persistentvolumeclaims"], result.attempts);
    assert.ok(
      result.attempts > 1,
      `expected at least one injected conflict, got ${result.attempts} attempt(s)`,
    );
  });

  test("retries are bounded: persistent conflicts end in a 409-classified error, nothing written", async () => {
    await sandbox.admin.setFaults({
      conflictProbability: 1,
      verbs: ["update"],
      resources: ["persistentvolumeclaims"],
    });
    const err = await updateClaim(annotate("never"), { ...fast, maxAttempts: 3 }).catch((e: unknown) => e);
    await sandbox.admin.clearFaults();
    assert.ok(err instanceof ConflictRetriesExhaustedError, String(err));
    assert.equal(err.attempts, 3);
    assert.equal(isConflict(err), true);
    const counters = await sandbox.admin.counters();
    assert.equal(counters["update persistentvolumeclaims"], 3);
    assert.equal(counters["get persistentvolumeclaims"], 3);
    assert.equal((await getClaim()).metadata.annotations?.mine, undefined);
  });

  test("no write when nothing changed", async () => {
    const before = await getClaim();
    await sandbox.admin.resetCounters();
    const unchanged = await updateClaim((pvc) => pvc);
    const declined = await updateClaim(() => undefined, { subresource: "status" });
    const sameValues = await updateClaim((pvc) => {
      pvc.spec = { ...pvc.spec, accessModes: ["ReadWriteOnce"] };
      return pvc;
    });
    for (const r of [unchanged, declined, sameValues]) {
      assert.deepEqual([r.written, r.attempts], [false, 1]);
      assert.equal(r.object.metadata.resourceVersion, before.metadata.resourceVersion);
    }
    assert.deepEqual(await sandbox.admin.counters(), { "get persistentvolumeclaims": 3 });
  });

  test("other errors propagate without retry", async () => {
    await sandbox.admin.setFaults({
      errorProbability: 1,
      errorCode: 503,
      verbs: ["update"],
      resources: ["persistentvolumeclaims"],
    });
    const err = await updateClaim(annotate("x"), fast).catch((e: unknown) => e);
    await sandbox.admin.clearFaults();
    assert.equal(isTransient(err), true, String(err));
    assert.equal((await sandbox.admin.counters())["update persistentvolumeclaims"], 1);
  });

  test("refuses a mutate that renames the object, before any write", async () => {
    await assert.rejects(
      updateClaim((pvc) => {
        pvc.metadata = { ...pvc.metadata, name: "elsewhere" };
        return pvc;
      }),
      TypeError,
    );
    assert.deepEqual(await sandbox.admin.counters(), { "get persistentvolumeclaims": 1 });
  });

  test("PVC status and spec go to their own endpoints; each ignores the other half", async () => {
    const status = await updateClaim(
      (pvc) => {
        pvc.status = { ...pvc.status, phase: "Bound" };
        pvc.spec = { ...pvc.spec, volumeName: "sneaky" }; // not a status field: the server drops it
        return pvc;
      },
      { subresource: "status" },
    );
    assert.equal(status.written, true);
    assert.equal(status.object.status?.phase, "Bound");
    assert.equal(status.object.spec.volumeName, undefined);

    const spec = await updateClaim((pvc) => {
      pvc.spec = { ...pvc.spec, volumeName: "pv1" };
      pvc.status = { phase: "Lost" }; // status on the main resource: ignored
      return pvc;
    });
    assert.equal(spec.written, true);
    assert.equal(spec.object.spec.volumeName, "pv1");
    assert.equal(spec.object.status?.phase, "Bound");

    const counters = await sandbox.admin.counters();
    assert.equal(counters["update persistentvolumeclaims/status"], 1);
    assert.equal(counters["update persistentvolumeclaims"], 1);
  });

  test("PV: claimRef on the spec, phase on status", async () => {
    const claim = await getClaim();
    const bound = await updateObject<PersistentVolume>(kube, persistentVolumes, { name: "pv1" }, (pv) => {
      pv.spec = {
        ...pv.spec,
        claimRef: {
          kind: "PersistentVolumeClaim",
          namespace: "default",
          name: "claim",
          uid: claim.metadata.uid,
          apiVersion: "v1",
        },
      };
      return pv;
    });
    assert.equal(bound.written, true);
    assert.equal(bound.object.spec.claimRef?.uid, claim.metadata.uid);
    const phase = await updateObject<PersistentVolume>(
      kube,
      persistentVolumes,
      { name: "pv1" },
      (pv) => {
        pv.status = { phase: "Bound" };
        return pv;
      },
      { subresource: "status" },
    );
    assert.equal(phase.written, true);
    assert.equal(phase.object.status?.phase, "Bound");
    assert.equal(phase.object.spec.claimRef?.name, "claim");
    const counters = await sandbox.admin.counters();
    assert.equal(counters["update persistentvolumes"], 1);
    assert.equal(counters["update persistentvolumes/status"], 1);
  });

  test("VolumeAttachment: status through /status, spec through the resource", async () => {
    const updateVa = (mutate: Mutate<VolumeAttachment>, options: UpdateObjectOptions = {}) =>
      updateObject<VolumeAttachment>(kube, volumeAttachments, { name: "va1" }, mutate, options);
    const attached = await updateVa(
      (va) => {
        va.status = { attached: true, attachmentMetadata: { devicePath: "/dev/xvdb" } };
        return va;
      },
      { subresource: "status" },
    );
    assert.equal(attached.written, true);
    assert.equal(attached.object.status?.attached, true);
    const finalized = await updateVa((va) => {
      va.metadata = { ...va.metadata, finalizers: ["external-attacher/hostpath-csi-example"] };
      return va;
    });
    assert.deepEqual(finalized.object.metadata.finalizers, ["external-attacher/hostpath-csi-example"]);
    assert.equal(finalized.object.status?.attached, true);
    const again = await updateVa(
      (va) => {
        va.status = { ...va.status, attached: true };
        return va;
      },
      { subresource: "status" },
    );
    assert.equal(again.written, false);
    const counters = await sandbox.admin.counters();
    assert.equal(counters["update volumeattachments/status"], 1);
    assert.equal(counters["update volumeattachments"], 1);
  });

  test("fields this code does not know survive spec and status round trips", async () => {
    const someFutureField = { nested: ["a", "b"], enabled: true };
    await sandbox.admin.seed([
      {
        apiVersion: "v1",
        kind: "PersistentVolume",
        metadata: { name: "future-pv" },
        spec: {
          capacity: { storage: "1Gi" },
          accessModes: ["ReadWriteOnce"],
          persistentVolumeReclaimPolicy: "Delete",
          csi: { driver: "hostpath.csi.example", volumeHandle: "vol-f", someFutureCsiField: "keep" },
          someFutureField,
        },
        status: { phase: "Available", someFutureStatus: { since: "now" } },
        someFutureTopLevel: { x: 1 },
      },
    ]);
    const futureKey = { name: "future-pv" };
    const spec = await updateObject<PersistentVolume>(kube, persistentVolumes, futureKey, (pv) => {
      pv.spec.storageClassName = "fast";
      return pv;
    });
    const status = await updateObject<PersistentVolume>(
      kube,
      persistentVolumes,
      futureKey,
      (pv) => {
        pv.status = { ...pv.status, phase: "Released" };
        return pv;
      },
      { subresource: "status" },
    );
    assert.deepEqual([spec.written, status.written], [true, true]);
    const stored = await kube.get<PersistentVolume>(persistentVolumes, "future-pv");
    assert.equal(stored.spec.storageClassName, "fast");
    assert.equal(stored.status?.phase, "Released");
    assert.deepEqual(stored.spec.someFutureField, someFutureField);
    assert.equal(stored.spec.csi?.someFutureCsiField, "keep");
    assert.deepEqual(stored.status?.someFutureStatus, { since: "now" });
    assert.deepEqual(stored.someFutureTopLevel, { x: 1 });
    // The write answers carry them too (what a caller would write next).
    assert.deepEqual(spec.object.spec.someFutureField, someFutureField);
    assert.deepEqual(status.object.spec.someFutureField, someFutureField);
  });
});

describe("retryWhileLosingRaces", () => {
  const sleep = async (): Promise<void> => undefined;
  const status = (code: number): ApiException<string> => new ApiException(code, "lost", "{}", {});

  test("runs the pass again after a 409 or a 404 and returns what the last pass returned", async () => {
    const thrown = [status(409), status(404)];
    const attempts: number[] = [];
    const result = await retryWhileLosingRaces(
      async (attempt) => {
        attempts.push(attempt);
        const err = thrown.shift();
        if (err) throw err;
        return "done";
      },
      { sleep },
    );
    assert.equal(result, "done");
    assert.deepEqual(attempts, [1, 2, 3]);
  });

  test("any other error ends it at once; endless races end in ConflictRetriesExhaustedError", async () => {
    let calls = 0;
    await assert.rejects(
      retryWhileLosingRaces(
        async () => {
          calls++;
          throw status(500);
        },
        { sleep },
      ),
      { code: 500 },
    );
    assert.equal(calls, 1);
    await assert.rejects(
      retryWhileLosingRaces(
        async () => {
          throw status(409);
        },
        { sleep, maxAttempts: 3 },
      ),
      (err) => err instanceof ConflictRetriesExhaustedError && err.attempts === 3,
    );
  });
});
