// WORKERS (upstream --worker-threads / --workers): the keys one process syncs
// at once. A toy controller whose load is slow counts the syncs in flight;
// with 1 two events for different keys never overlap, with N they do, the
// resync pass obeys the same bound, and a sync an executor starts for another
// key (the attacher syncs a PV from a VolumeAttachment's step) runs in its
// caller's slot instead of waiting for a second one forever.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { controllerKnobsFromEnv } from "../../shared/config.ts";
import {
  ControllerRuntime,
  type ControllerSpec,
  type RuntimeOptions,
} from "../../shared/controller/index.ts";
import { SyncSlots } from "../../shared/controller/worker-pool.ts";
import type { ControllerEvent } from "../../shared/http/controller-function.ts";

type Step = { op: "touch"; name: string } | { op: "sync-other"; name: string };

class Gauge {
  now = 0;
  max = 0;
  async hold(ms: number): Promise<void> {
    this.now++;
    this.max = Math.max(this.max, this.now);
    try {
      await sleep(ms);
    } finally {
      this.now--;
    }
  }
}

function toy(gauge: Gauge, options: RuntimeOptions, keys: string[] = []) {
  // Filled in below, so an executor can start a sync of another key on the same runtime.
  let self: ControllerRuntime<string, string, Step> | undefined;
  const spec: ControllerSpec<string, string, Step> = {
    keyId: (k) => k,
    keysOf: async (e: ControllerEvent) => [e.name],
    load: async (key) => {
      await gauge.hold(40);
      return key;
    },
    absent: () => "gone",
    decide: (key) =>
      key.startsWith("parent-")
        ? { steps: [{ op: "sync-other", name: key.replace("parent-", "child-") }], outcome: "synced child" }
        : { steps: [{ op: "touch", name: key }], outcome: "touched" },
    executors: {
      async touch() {
        return 0;
      },
      async "sync-other"(step) {
        await self?.sync(step.name);
        return 0;
      },
    },
    report: (r) => r,
    resyncKeys: async () => ({ waves: [keys], counts: { keys: keys.length } }),
  };
  self = new ControllerRuntime(spec, options);
  return self;
}

function event(name: string): ControllerEvent {
  return { action: "update", kind: "Toy", apiVersion: "v1", name };
}

const names = (n: number, prefix = "k") => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

describe("WORKERS bounds the syncs in flight", () => {
  test("workers 1: six events for six keys never overlap", async () => {
    const gauge = new Gauge();
    const rt = toy(gauge, { workers: 1 });
    await Promise.all(names(6).map((n) => rt.handleEvent(event(n))));
    assert.equal(gauge.max, 1);
  });

  test("workers 3: they overlap, three at a time, never more", async () => {
    const gauge = new Gauge();
    const rt = toy(gauge, { workers: 3 });
    await Promise.all(names(9).map((n) => rt.handleEvent(event(n))));
    assert.equal(gauge.max, 3);
  });

  test("no cap (the kube-controller-manager functions' default): all at once", async () => {
    const gauge = new Gauge();
    const rt = toy(gauge, {});
    await Promise.all(names(9).map((n) => rt.handleEvent(event(n))));
    assert.equal(gauge.max, 9);
  });

  test("the resync pool obeys it too, and events running meanwhile share the same slots", async () => {
    const gauge = new Gauge();
    const rt = toy(gauge, { workers: 2, resyncConcurrency: 8 }, names(8, "r"));
    const [report] = await Promise.all([rt.resync(), ...names(4).map((n) => rt.handleEvent(event(n)))]);
    assert.equal(report.keys, 8);
    assert.deepEqual(report.errors, []);
    assert.equal(gauge.max, 2);
  });

  test("a sync started by an executor runs in its caller's slot: workers 1 does not deadlock", async () => {
    const gauge = new Gauge();
    const rt = toy(gauge, { workers: 1 });
    const done = Promise.all([rt.handleEvent(event("parent-a")), rt.handleEvent(event("parent-b"))]);
    const timeout = sleep(5_000).then(() => "stuck");
    const answer = await Promise.race([done, timeout]);
    assert.notEqual(answer, "stuck");
    assert.equal(gauge.max, 1, "parent and child loads of one event in one slot, the other event waiting");
  });
});

describe("SyncSlots", () => {
  test("waiters are served in arrival order and a freed slot goes to the first of them", async () => {
    const slots = new SyncSlots(1);
    const order: string[] = [];
    await Promise.all(
      ["a", "b", "c", "d"].map((n) =>
        slots.run(async () => {
          order.push(n);
          await sleep(5);
        }),
      ),
    );
    assert.deepEqual(order, ["a", "b", "c", "d"]);
    assert.equal(slots.running, 0, "every slot given back");
  });

  test("a failing piece of work gives its slot back", async () => {
    const slots = new SyncSlots(1);
    await assert.rejects(
      slots.run(async () => {
        throw new Error("boom");
      }),
      /boom/,
    );
    assert.equal(await slots.run(async () => "next"), "next");
    assert.equal(slots.running, 0);
  });

  test("refuses a size below 1", () => {
    assert.throws(() => new SyncSlots(0), RangeError);
  });
});

describe("WORKERS from the environment", () => {
  test("each function's upstream default, and a set value wins", () => {
    assert.equal(controllerKnobsFromEnv({}, { workers: 100 }).workers, 100, "provisioner --worker-threads");
    assert.equal(controllerKnobsFromEnv({}, { workers: 10 }).workers, 10, "attacher --worker-threads");
    assert.equal(controllerKnobsFromEnv({}).workers, undefined, "kube-controller-manager loops: no cap");
    assert.equal(controllerKnobsFromEnv({ WORKERS: " 3\n" }, { workers: 100 }).workers, 3);
  });

  test("a bad value stops the start with the variable named", () => {
    for (const bad of ["0", "-1", "2.5", "ten", "10001"])
      assert.throws(
        () => controllerKnobsFromEnv({ WORKERS: bad }),
        /^Error: WORKERS must be an integer from 1 to 10000, got/,
        bad,
      );
  });
});
