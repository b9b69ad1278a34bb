// The runtime shell (shared/controller) with a toy controller over an
// in-memory store of counters: lost races re-load and re-decide, plans that
// ask to decide again, follow-ups, one sync per key at a time, deferred
// Events, resync waves and their errors.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  ControllerRuntime,
  type ControllerSpec,
  type Executors,
  type Plan,
  type RuntimeOptions,
  type SyncResult,
} from "../../shared/controller/index.ts";
import type { ControllerEvent } from "../../shared/http/controller-function.ts";

interface Counter {
  value: number;
  rv: number;
}

type Step =
  | { op: "set"; name: string; value: number; rv: number }
  | { op: "bump-twice"; name: string; rv: number }
  | { op: "event"; text: string }
  | { op: "fail"; message: string };

interface Key {
  name: string;
  /** A copy to decide on in attempt 1 instead of reading. */
  copy?: Counter;
}

interface State {
  name: string;
  counter: Counter;
  carried: readonly number[];
}

function conflict(): Error {
  const message = "the object has been modified";
  const body = { kind: "Status", status: "Failure", reason: "Conflict", code: 409, message };
  return Object.assign(new Error(message), { code: 409, body });
}

/** A toy world: counters with resourceVersions, a log of what happened, and knobs per test. */
class World {
  readonly store = new Map<string, Counter>();
  readonly log: string[] = [];
  readonly events: string[] = [];
  /** The counter value each load was handed as the previous round's state (undefined in round 1). */
  readonly previous: (number | undefined)[] = [];
  /** Writes that the "other writer" makes right before ours: name → times left. */
  readonly interfere = new Map<string, number>();
  active = 0;
  maxActive = 0;

  write(name: string, value: number, rv: number): number {
    const left = this.interfere.get(name) ?? 0;
    if (left > 0) {
      this.interfere.set(name, left - 1);
      const c = this.store.get(name)!;
      this.store.set(name, { value: c.value + 100, rv: c.rv + 1 });
    }
    const current = this.store.get(name);
    if (!current || current.rv !== rv) throw conflict();
    this.store.set(name, { value, rv: rv + 1 });
    return rv + 1;
  }
}

type Decide = (s: State) => Plan<Step, string>;

function spec(world: World, decide: Decide): ControllerSpec<Key, State, Step, string, number> {
  const executors: Executors<Step, Key, number> = {
    async set(step, run) {
      const rv = world.write(step.name, step.value, Number(run.precondition(step.name, String(step.rv))));
      run.wrote(step.name, String(rv));
      run.carry(step.value);
      world.log.push(`set ${step.name}=${step.value}`);
      return 1;
    },
    async "bump-twice"(step, run) {
      // Two writes to one object in one plan: the second needs the first's resourceVersion.
      for (let i = 0; i < 2; i++) {
        const rv = Number(run.precondition(step.name, String(step.rv)));
        const value = world.store.get(step.name)!.value + 1;
        run.wrote(step.name, String(world.write(step.name, value, rv)));
      }
      return { writes: 2 };
    },
    async event(step, run) {
      run.defer(
        new Promise((resolve) => setTimeout(resolve, 20)).then(() => {
          world.events.push(step.text);
        }),
      );
      return 0;
    },
    async fail(step) {
      throw new Error(step.message);
    },
  };
  return {
    keyId: (key) => key.name,
    async keysOf(e: ControllerEvent) {
      if (e.kind === "Ignored")
        return { reports: [{ id: e.name, outcome: "ignored", writes: 0, events: 0, attempts: 0 }] };
      return e.name.split(",").map((name) => ({ name }));
    },
    async load(key, ctx) {
      world.active++;
      world.maxActive = Math.max(world.maxActive, world.active);
      await new Promise((resolve) => setTimeout(resolve, 5));
      world.active--;
      world.log.push(`load ${key.name} attempt ${ctx.attempt} round ${ctx.round}`);
      world.previous.push(ctx.previous?.counter.value);
      const counter = ctx.attempt === 1 && key.copy ? key.copy : world.store.get(key.name);
      return counter ? { name: key.name, counter: { ...counter }, carried: ctx.carried } : undefined;
    },
    absent: (key) => `${key.name} is gone`,
    decide: (s) => decide(s),
    executors,
    followUpKeys: async (f) => [{ name: f }],
    repeatable: (key) => key.name.startsWith("again-"),
    report: (r: SyncResult) => r,
    async resyncKeys() {
      const names = [...world.store.keys()].sort();
      return {
        waves: [
          names.filter((n) => n < "m").map((name) => ({ name })),
          names.filter((n) => n >= "m").map((name) => ({ name })),
        ],
        counts: { counters: names.length },
      };
    },
  };
}

function runtime(world: World, decide: Decide, options: RuntimeOptions = {}) {
  return new ControllerRuntime(spec(world, decide), { baseDelayMs: 1, maxDelayMs: 2, ...options });
}

const event = (name: string, kind = "Counter"): ControllerEvent => ({
  action: "update",
  kind,
  apiVersion: "v1",
  name,
});

/** Sets every counter to 10 once. */
const toTen: Decide = (s) =>
  s.counter.value === 10
    ? { steps: [], outcome: "at 10" }
    : { steps: [{ op: "set", name: s.name, value: 10, rv: s.counter.rv }], outcome: "set to 10" };

describe("one sync", () => {
  test("a lost race re-loads and re-decides on the fresh state, then succeeds", async () => {
    const world = new World();
    world.store.set("a", { value: 1, rv: 1 });
    world.interfere.set("a", 1);
    const [report] = await runtime(world, toTen).handleEvent(event("a"));
    assert.deepEqual(report, { id: "a", outcome: "set to 10", writes: 1, events: 0, attempts: 2 });
    assert.deepEqual(world.store.get("a"), { value: 10, rv: 3 });
    assert.deepEqual(
      world.log.filter((l) => l.startsWith("load")),
      ["load a attempt 1 round 1", "load a attempt 2 round 1"],
    );
  });

  test("a hint (the event's copy) is used in attempt 1 only: a stale copy loses the race, the retry reads", async () => {
    const world = new World();
    world.store.set("a", { value: 1, rv: 5 });
    const rt = runtime(world, toTen);
    const report = await rt.sync({ name: "a", copy: { value: 1, rv: 4 } });
    assert.equal(report.attempts, 2);
    assert.deepEqual(world.store.get("a"), { value: 10, rv: 6 });
  });

  test("races lost every time give up after maxAttempts with a 409 error", async () => {
    const world = new World();
    world.store.set("a", { value: 1, rv: 1 });
    world.interfere.set("a", 10);
    await assert.rejects(
      runtime(world, toTen, { maxAttempts: 3 }).handleEvent(event("a")),
      (err: unknown) => {
        assert.equal((err as { code?: number }).code, 409);
        assert.match(String(err), /gave up after 3 conflicting attempts/);
        return true;
      },
    );
    assert.equal(world.log.filter((l) => l.startsWith("load")).length, 3);
  });

  test("skip is asked once the key's turn has come: a copy an earlier sync of the key wrote past is not loaded", async () => {
    const world = new World();
    world.store.set("a", { value: 1, rv: 1 });
    const base = spec(world, toTen);
    // Skip a key whose copy is older than the store's counter: what an earlier sync wrote.
    const rt = new ControllerRuntime(
      {
        ...base,
        skip: (key) =>
          key.copy && key.copy.rv < (world.store.get(key.name)?.rv ?? 0) ? "written past" : undefined,
      },
      { baseDelayMs: 1, maxDelayMs: 2 },
    );
    // Both are handed in at once: the second waits for the first, which writes rv 2, so it is skipped then.
    const [first, second] = await Promise.all([
      rt.sync({ name: "a", copy: { value: 1, rv: 1 } }),
      rt.sync({ name: "a", copy: { value: 1, rv: 1 } }),
    ]);
    assert.deepEqual(first, { id: "a", outcome: "set to 10", writes: 1, events: 0, attempts: 1 });
    assert.deepEqual(second, { id: "a", outcome: "written past", writes: 0, events: 0, attempts: 0 });
    assert.deepEqual(
      world.log.filter((l) => l.startsWith("load")),
      ["load a attempt 1 round 1"],
    );
  });

  test("an object that is gone reports the controller's outcome and writes nothing", async () => {
    const world = new World();
    const [report] = await runtime(world, toTen).handleEvent(event("nobody"));
    assert.deepEqual(report, { id: "nobody", outcome: "nobody is gone", writes: 0, events: 0, attempts: 1 });
  });

  test("an event answered without a sync is passed through, and a plan's error is reported, not thrown", async () => {
    const world = new World();
    world.store.set("a", { value: 1, rv: 1 });
    const rt = runtime(world, () => ({ steps: [], outcome: "error", error: "upstream would retry" }));
    assert.deepEqual(await rt.handleEvent(event("x", "Ignored")), [
      { id: "x", outcome: "ignored", writes: 0, events: 0, attempts: 0 },
    ]);
    const [report] = await rt.handleEvent(event("a"));
    assert.equal(report?.error, "upstream would retry");
  });

  test("steps run in order, the first failure stops the rest, and deferred Events settle before the answer", async () => {
    const world = new World();
    world.store.set("a", { value: 1, rv: 1 });
    const rt = runtime(world, (s) => ({
      steps: [
        { op: "event", text: "first" },
        { op: "fail", message: "driver down" },
        { op: "set", name: s.name, value: 2, rv: s.counter.rv },
      ],
      outcome: "x",
    }));
    await assert.rejects(rt.handleEvent(event("a")), /driver down/);
    assert.deepEqual(world.events, ["first"], "the deferred Event settled before the error surfaced");
    assert.deepEqual(world.store.get("a"), { value: 1, rv: 1 }, "nothing after the failed step ran");
  });

  test("two writes to one object in one plan: the second is conditional on the first's resourceVersion", async () => {
    const world = new World();
    world.store.set("a", { value: 1, rv: 1 });
    const rt = runtime(world, (s) =>
      s.counter.rv === 1
        ? {
            steps: [
              { op: "bump-twice", name: s.name, rv: s.counter.rv },
              { op: "event", text: "bumped" },
            ],
            outcome: "bumped",
          }
        : { steps: [], outcome: "done" },
    );
    const [report] = await rt.handleEvent(event("a"));
    assert.deepEqual(report, { id: "a", outcome: "bumped", writes: 2, events: 1, attempts: 1 });
    assert.deepEqual(world.store.get("a"), { value: 3, rv: 3 });
  });
});

describe("decide again", () => {
  /** A three-step protocol: 1 → 2 → 3, one step per decision, each on what the last left. */
  const stepwise: Decide = (s) =>
    s.counter.value >= 3
      ? { steps: [], outcome: `done at ${s.counter.value}, carried ${s.carried.join(",")}` }
      : {
          steps: [{ op: "set", name: s.name, value: s.counter.value + 1, rv: s.counter.rv }],
          outcome: `step to ${s.counter.value + 1}`,
          again: true,
        };

  test("a plan that asks again is decided again on the state its steps left, with what they carried", async () => {
    const world = new World();
    world.store.set("p", { value: 1, rv: 1 });
    const [report] = await runtime(world, stepwise).handleEvent(event("p"));
    assert.deepEqual(report, { id: "p", outcome: "done at 3, carried 3", writes: 2, events: 0, attempts: 1 });
    assert.deepEqual(
      world.log.filter((l) => l.startsWith("load")),
      ["load p attempt 1 round 1", "load p attempt 1 round 2", "load p attempt 1 round 3"],
    );
    assert.deepEqual(
      world.previous,
      [undefined, 1, 2],
      "each round is handed the state the last one decided on",
    );
  });

  test("a process stopped between two steps is finished by the next event", async () => {
    const world = new World();
    world.store.set("p", { value: 1, rv: 1 });
    const [first] = await runtime(world, stepwise, { maxRounds: 1 }).handleEvent(event("p"));
    assert.equal(first?.outcome, "step to 2");
    assert.deepEqual(world.store.get("p"), { value: 2, rv: 2 });
    const [second] = await runtime(world, stepwise).handleEvent(event("p"));
    assert.equal(second?.outcome, "done at 3, carried 3");
    assert.equal(second?.writes, 1);
  });
});

describe("follow-ups", () => {
  const chain: Decide = (s) => ({
    steps: [],
    outcome: "looked",
    followUps:
      s.name === "a"
        ? ["b", "c", "b", "a", "again-x"]
        : s.name === "b"
          ? ["d"]
          : s.name === "again-x"
            ? ["again-x"]
            : [],
  });

  function synced(reports: readonly SyncResult[]): string[] {
    return reports.map((r) => r.id);
  }

  test("are synced after the key, once each unless repeatable, within the budget", async () => {
    const world = new World();
    for (const n of ["a", "b", "c", "d", "again-x"]) world.store.set(n, { value: 0, rv: 1 });
    assert.deepEqual(synced(await runtime(world, chain, { maxFollowUps: 8 }).handleEvent(event("a"))), [
      "a",
      "b",
      "c",
      "again-x",
      "d",
      "again-x",
      "again-x",
    ]);
  });

  test("a follow-up that names itself forever stops at the default budget", async () => {
    const world = new World();
    world.store.set("again-x", { value: 0, rv: 1 });
    const reports = await runtime(world, chain).handleEvent(event("again-x"));
    assert.equal(reports.length, 1 + 16);
  });

  test("maxFollowUps bounds them (skipped repeats count), followUpDepth stops later generations", async () => {
    const world = new World();
    for (const n of ["a", "b", "c", "d", "again-x"]) world.store.set(n, { value: 0, rv: 1 });
    assert.deepEqual(synced(await runtime(world, chain, { maxFollowUps: 3 }).handleEvent(event("a"))), [
      "a",
      "b",
      "c",
    ]);
    assert.deepEqual(synced(await runtime(world, chain, { followUpDepth: 1 }).handleEvent(event("a"))), [
      "a",
      "b",
      "c",
      "again-x",
    ]);
  });
});

describe("keys and resync", () => {
  test("syncs of one key never overlap in a process; different keys run at once", async () => {
    const world = new World();
    world.store.set("a", { value: 0, rv: 1 });
    world.store.set("b", { value: 0, rv: 1 });
    const rt = runtime(world, toTen);
    await Promise.all([rt.handleEvent(event("a")), rt.handleEvent(event("a")), rt.handleEvent(event("a"))]);
    assert.equal(world.maxActive, 1, "one load of a at a time");
    assert.equal(
      world.log.filter((l) => l.startsWith("set")).length,
      1,
      "the later syncs saw the first's write",
    );
    world.maxActive = 0;
    await Promise.all([rt.handleEvent(event("a")), rt.handleEvent(event("b"))]);
    assert.equal(world.maxActive, 2);
  });

  test("resync runs each wave through the bounded pool, one wave after the other, and reports errors by key", async () => {
    const world = new World();
    for (const n of ["a", "b", "c", "m", "n"]) world.store.set(n, { value: 0, rv: 1 });
    world.interfere.set("c", 10);
    const rt = runtime(
      world,
      (s) => (s.name === "n" ? { steps: [], outcome: "error", error: "cannot" } : toTen(s)),
      { resyncConcurrency: 2, maxAttempts: 2 },
    );
    const report = await rt.resync();
    assert.equal(report.counters, 5);
    assert.equal(report.writes, 3);
    assert.deepEqual([...report.errors].sort(), [
      "c: gave up after 2 conflicting attempts: the object has been modified",
      "n: cannot",
    ]);
    assert.equal(world.maxActive, 2, "the pool ran two keys at once, never more");
    const sets = world.log.filter((l) => l.startsWith("set"));
    assert.deepEqual(sets.at(-1), "set m=10", "the second wave ran after the first");
  });
});
