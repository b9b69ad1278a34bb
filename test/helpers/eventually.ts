// Polls a read until it yields a value, failing the test with what was
// awaited when the deadline passes: the sandbox's parts act asynchronously.
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";

export async function eventually<T>(
  what: string,
  read: () => Promise<T | undefined>,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(50);
  }
}
