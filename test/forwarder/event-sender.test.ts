// One EventSender for a forwarder's whole life: every request it makes
// listens on the forwarder's one stop signal, so each must let go of it when
// it ends, delivered, refused, retried or cut, or a long-running forwarder
// would pile up listeners on that signal.
import assert from "node:assert/strict";
import { getEventListeners } from "node:events";
import { test } from "node:test";
import { newChange } from "../../shared/forwarder/change.ts";
import { EventSender } from "../../shared/forwarder/event-sender.ts";
import { DEFAULT_RETRY } from "../../shared/forwarder/retry-policy.ts";
import { persistentVolumeClaims } from "../../shared/kube/resources.ts";
import { createLogger } from "../../shared/log.ts";
import { pvc, startReceiver } from "./helpers.ts";

test("requests leave no listener on the stop signal, whatever their answer", async () => {
  // By the claim's number: delivered, refused (400), a server error then delivered, a cut connection then delivered.
  const attempts = new Map<string, number>();
  const receiver = await startReceiver((req) => {
    const name = req.event?.ref.name ?? "";
    const attempt = (attempts.get(name) ?? 0) + 1;
    attempts.set(name, attempt);
    const kind = Number(name.slice(1)) % 4;
    if (kind === 1) return { status: 400 };
    if (kind === 2 && attempt === 1) return { status: 500 };
    if (kind === 3 && attempt === 1) return { destroy: true };
    return {};
  });
  const stop = new AbortController();
  const sender = new EventSender({
    url: receiver.url,
    label: receiver.url,
    source: "https://127.0.0.1:6443",
    timeoutMs: 5_000,
    retry: { ...DEFAULT_RETRY, baseMs: 5, maxMs: 20 },
    connections: 8,
    signal: stop.signal,
    log: createLogger({ name: "forwarder", level: "silent" }),
  });
  try {
    const reports = await Promise.all(
      Array.from({ length: 120 }, (_, i) =>
        sender.send([newChange("add", persistentVolumeClaims, pvc(`c${i}`))], () => false),
      ),
    );
    const outcomes = new Set(reports.flat().map((r) => r.outcome));
    assert.deepEqual([...outcomes].sort(), ["delivered", "rejected"]);
    assert.ok(
      reports.flat().some((r) => r.attempts > 1),
      "some were retried",
    );
    assert.equal(getEventListeners(stop.signal, "abort").length, 0);
  } finally {
    await sender.close();
    await receiver.close();
  }
});
