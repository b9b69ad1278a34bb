import assert from "node:assert/strict";
import { after, before, beforeEach, describe, test } from "node:test";
import {
  ApiException,
  type CoreV1Api,
  type StorageV1Api,
  type V1ConfigMap,
  type V1PersistentVolumeClaim,
} from "@kubernetes/client-node";
import { isConflict, isTransient } from "../../shared/kube/api-errors.ts";
import { createKubeClients } from "../../shared/kube/client.ts";
import {
  backoffDelayMs,
  ConflictRetriesExhaustedError,
  UnconditionalWriteError,
  updatePersistentVolume,
  updatePersistentVolumeClaim,
  updatePersistentVolumeClaimStatus,
  updatePersistentVolumeStatus,
  updateVolumeAttachment,
  updateVolumeAttachmentStatus,
  updateWithRetry,
} from "../../shared/kube/optimistic-update.ts";
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
// Over real HTTP against the sandbox API server, with the real client-node.

describe("against the sandbox", () => {
  let sandbox: TestSandbox;
  let core: CoreV1Api;
  let storage: StorageV1Api;
  const key = { namespace: "default", name: "claim" };
  const fast = { baseDelayMs: 1, maxDelayMs: 5 };

  before(async () => {
    sandbox = await startTestSandbox();
    ({ core, storage } = createKubeClients(sandbox.kubeConfig));
  });
  after(() => sandbox.close());
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

  const annotate = (value: string) => (pvc: V1PersistentVolumeClaim) => {
    pvc.metadata = { ...pvc.metadata, annotations: { ...pvc.metadata?.annotations, mine: value } };
    return pvc;
  };

  test("loses to a concurrent writer, re-reads, and keeps both changes", async () => {
    let raced = false;
    const result = await updateWithRetry({
      read: async () => {
        const current = await core.readNamespacedPersistentVolumeClaim(key);
        if (!raced) {
          raced = true;
          // Someone else writes between our read and our write.
          await core.replaceNamespacedPersistentVolumeClaim({
            ...key,
            body: { ...current, metadata: { ...current.metadata, labels: { other: "writer" } } },
          });
        }
        return current;
      },
      mutate: annotate("yes"),
      write: (body) => core.replaceNamespacedPersistentVolumeClaim({ ...key, body }),
      ...fast,
    });
    assert.deepEqual([result.written, result.attempts], [true, 2]);
    const stored = await core.readNamespacedPersistentVolumeClaim(key);
    assert.equal(stored.metadata?.labels?.other, "writer");
    assert.equal(stored.metadata?.annotations?.mine, "yes");
    const counters = await sandbox.admin.counters();
    assert.equal(counters["update persistentvolumeclaims"], 3); // theirs, our lost one, our winning one
  });

  test("injected 409s are retried until a write lands", async () => {
    await sandbox.admin.setFaults({
      conflictProbability: 0.6,
      seed: 7,
      verbs: ["update"],
      resources: ["persistentvolumeclaims"],
    });
    const result = await updatePersistentVolumeClaim(core, key, annotate("through"), {
      ...fast,
      maxAttempts: 20,
    });
    await sandbox.admin.clearFaults();
    assert.equal(result.written, true);
    assert.equal(result.object.metadata?.annotations?.mine, "through");
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
    const err = await updatePersistentVolumeClaim(core, key, annotate("never"), {
      ...fast,
      maxAttempts: 3,
    }).catch((e: unknown) => e);
    await sandbox.admin.clearFaults();
    assert.ok(err instanceof ConflictRetriesExhaustedError, String(err));
    assert.equal(isConflict(err), true);
    const counters = await sandbox.admin.counters();
    assert.equal(counters["update persistentvolumeclaims"], 3);
    assert.equal(counters["get persistentvolumeclaims"], 3);
    assert.equal(
      (await core.readNamespacedPersistentVolumeClaim(key)).metadata?.annotations?.mine,
      undefined,
    );
  });

  test("no write when nothing changed", async () => {
    const before = await core.readNamespacedPersistentVolumeClaim(key);
    await sandbox.admin.resetCounters();
    const unchanged = await updatePersistentVolumeClaim(core, key, (pvc) => pvc);
    const declined = await updatePersistentVolumeClaimStatus(core, key, () => undefined);
    const sameValues = await updatePersistentVolumeClaim(core, key, (pvc) => {
      pvc.spec = { ...pvc.spec, accessModes: ["ReadWriteOnce"] };
      return pvc;
    });
    for (const r of [unchanged, declined, sameValues]) {
      assert.deepEqual([r.written, r.attempts], [false, 1]);
      assert.equal(r.object.metadata?.resourceVersion, before.metadata?.resourceVersion);
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
    const err = await updatePersistentVolumeClaim(core, key, annotate("x"), fast).catch((e: unknown) => e);
    await sandbox.admin.clearFaults();
    assert.equal(isTransient(err), true, String(err));
    assert.equal((await sandbox.admin.counters())["update persistentvolumeclaims"], 1);
  });

  test("PVC status and spec go to their own endpoints; each ignores the other half", async () => {
    const status = await updatePersistentVolumeClaimStatus(core, key, (pvc) => {
      pvc.status = { ...pvc.status, phase: "Bound" };
      pvc.spec = { ...pvc.spec, volumeName: "sneaky" }; // not a status field: the server drops it
      return pvc;
    });
    assert.equal(status.written, true);
    assert.equal(status.object.status?.phase, "Bound");
    assert.equal(status.object.spec?.volumeName, undefined);

    const spec = await updatePersistentVolumeClaim(core, key, (pvc) => {
      pvc.spec = { ...pvc.spec, volumeName: "pv1" };
      pvc.status = { phase: "Lost" }; // status on the main resource: ignored
      return pvc;
    });
    assert.equal(spec.object.spec?.volumeName, "pv1");
    assert.equal(spec.object.status?.phase, "Bound");

    const counters = await sandbox.admin.counters();
    assert.equal(counters["update persistentvolumeclaims/status"], 1);
    assert.equal(counters["update persistentvolumeclaims"], 1);
  });

  test("PV wrappers: claimRef on the spec, phase on status", async () => {
    const claim = await core.readNamespacedPersistentVolumeClaim(key);
    const bound = await updatePersistentVolume(core, "pv1", (pv) => {
      pv.spec = {
        ...pv.spec,
        claimRef: {
          kind: "PersistentVolumeClaim",
          namespace: "default",
          name: "claim",
          uid: claim.metadata?.uid,
          apiVersion: "v1",
        },
      };
      return pv;
    });
    assert.equal(bound.object.spec?.claimRef?.uid, claim.metadata?.uid);
    const phase = await updatePersistentVolumeStatus(core, "pv1", (pv) => {
      pv.status = { phase: "Bound" };
      return pv;
    });
    assert.equal(phase.object.status?.phase, "Bound");
    assert.equal(phase.object.spec?.claimRef?.name, "claim");
    const counters = await sandbox.admin.counters();
    assert.equal(counters["update persistentvolumes"], 1);
    assert.equal(counters["update persistentvolumes/status"], 1);
  });

  test("VolumeAttachment wrappers: status through /status, spec through the resource", async () => {
    const attached = await updateVolumeAttachmentStatus(storage, "va1", (va) => {
      va.status = { attached: true, attachmentMetadata: { devicePath: "/dev/xvdb" } };
      return va;
    });
    assert.equal(attached.object.status?.attached, true);
    const finalized = await updateVolumeAttachment(storage, "va1", (va) => {
      va.metadata = { ...va.metadata, finalizers: ["external-attacher/hostpath-csi-example"] };
      return va;
    });
    assert.deepEqual(finalized.object.metadata?.finalizers, ["external-attacher/hostpath-csi-example"]);
    assert.equal(finalized.object.status?.attached, true);
    const again = await updateVolumeAttachmentStatus(storage, "va1", (va) => {
      va.status = { ...va.status, attached: true };
      return va;
    });
    assert.equal(again.written, false);
    const counters = await sandbox.admin.counters();
    assert.equal(counters["update volumeattachments/status"], 1);
    assert.equal(counters["update volumeattachments"], 1);
  });
});
