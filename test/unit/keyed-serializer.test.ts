// KeyedSerializer: one piece of work per key at a time, in order; other keys
// do not wait; a failure does not block the key; idle keys are forgotten.
import assert from "node:assert/strict";
import { test } from "node:test";
import { KeyedSerializer } from "../../shared/keyed-serializer.ts";

function gate(): { promise: Promise<void>; open: () => void } {
  let open = () => {};
  const promise = new Promise<void>((r) => {
    open = r;
  });
  return { promise, open };
}

test("work for one key runs one at a time, in arrival order; another key does not wait", async () => {
  const s = new KeyedSerializer();
  const log: string[] = [];
  const first = gate();
  const a1 = s.run("a", async () => {
    log.push("a1 start");
    await first.promise;
    log.push("a1 end");
    return 1;
  });
  const a2 = s.run("a", async () => {
    log.push("a2 start");
    return 2;
  });
  const b1 = s.run("b", async () => {
    log.push("b1");
    return 3;
  });
  assert.equal(await b1, 3);
  assert.deepEqual(log, ["a1 start", "b1"], "b ran while a1 held a; a2 waited");
  first.open();
  assert.deepEqual(await Promise.all([a1, a2]), [1, 2]);
  assert.deepEqual(log, ["a1 start", "b1", "a1 end", "a2 start"]);
});

test("a failure is the caller's, and the key is free again; idle keys are forgotten", async () => {
  const s = new KeyedSerializer();
  await assert.rejects(
    s.run("k", async () => {
      throw new Error("boom");
    }),
    /boom/,
  );
  assert.equal(await s.run("k", async () => "after"), "after");
  await new Promise((r) => setImmediate(r));
  assert.equal(s.busyKeys, 0);
});
