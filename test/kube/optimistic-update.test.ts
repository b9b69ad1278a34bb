import assert from "node:assert/strict";
import { test } from "node:test";
import { ApiException, type V1ConfigMap } from "@kubernetes/client-node";
import { isConflict } from "../../shared/kube/api-errors.ts";
import {
  backoffDelayMs,
  ConflictRetriesExhaustedError,
  UnconditionalWriteError,
  updateWithRetry,
} from "../../shared/kube/optimistic-update.ts";

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
