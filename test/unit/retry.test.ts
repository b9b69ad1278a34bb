// retrying: the one retry loop under lost-race retries, CSI start-up and the
// attacher's take-back unpublish.
import assert from "node:assert/strict";
import { test } from "node:test";
import { retrying } from "../../shared/retry.ts";

const transient = new Error("transient");
const fatal = new Error("fatal");

interface Case {
  name: string;
  /** What each attempt does: an error to throw, or "ok". */
  attempts: (Error | "ok")[];
  maxAttempts: number;
  expect: { result?: string; error?: Error; calls: number; sleeps: number[] };
}

const cases: Case[] = [
  {
    name: "succeeds at once",
    attempts: ["ok"],
    maxAttempts: 3,
    expect: { result: "ok 1", calls: 1, sleeps: [] },
  },
  {
    name: "retries a retryable error, with doubling waits",
    attempts: [transient, transient, "ok"],
    maxAttempts: 5,
    expect: { result: "ok 3", calls: 3, sleeps: [100, 200] },
  },
  {
    name: "an error the caller does not retry is thrown at once",
    attempts: [transient, fatal, "ok"],
    maxAttempts: 5,
    expect: { error: fatal, calls: 2, sleeps: [100] },
  },
  {
    name: "out of attempts: the last error as it is",
    attempts: [transient, transient, transient],
    maxAttempts: 3,
    expect: { error: transient, calls: 3, sleeps: [100, 200] },
  },
];

for (const c of cases) {
  test(`retrying: ${c.name}`, async () => {
    const sleeps: number[] = [];
    let calls = 0;
    const run = retrying(
      async (attempt) => {
        calls++;
        const step = c.attempts[attempt - 1];
        if (step === undefined || step === "ok") return `ok ${attempt}`;
        throw step;
      },
      {
        maxAttempts: c.maxAttempts,
        baseDelayMs: 100,
        // No jitter: the wait is the whole ceiling.
        random: () => 1,
        sleep: async (ms) => {
          sleeps.push(ms);
        },
        retryable: (err) => err === transient,
      },
    );
    if (c.expect.error) await assert.rejects(run, (err) => err === c.expect.error);
    else assert.equal(await run, c.expect.result);
    assert.equal(calls, c.expect.calls);
    assert.deepEqual(sleeps, c.expect.sleeps);
  });
}
