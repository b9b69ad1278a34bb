import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import request from "supertest";
import { createFunctionApp } from "../../shared/http/function-app.ts";
import { serveFunction } from "../../shared/http/serve.ts";
import { echoSpec } from "./echo-function.ts";

const fixture = fileURLToPath(new URL("./fixtures/slow-function.ts", import.meta.url));

interface Child {
  stdout(): string;
  stderr(): string;
  waitFor(what: string, check: () => boolean, timeoutMs?: number): Promise<void>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  kill(signal: NodeJS.Signals): void;
}

function startChild(script: string, env: Record<string, string> = {}): Child {
  const child = spawn(process.execPath, [script], {
    env: { ...process.env, PORT: "0", LOG_LEVEL: "info", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    out += chunk;
  });
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
    err += chunk;
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  return {
    stdout: () => out,
    stderr: () => err,
    exited,
    kill: (signal) => void child.kill(signal),
    async waitFor(what, check, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (!check()) {
        if (Date.now() > deadline) {
          child.kill("SIGKILL");
          throw new Error(`timed out waiting for ${what}; stdout: ${out}; stderr: ${err}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    },
  };
}

test("a served function announces itself, then drains an in-flight request on SIGTERM and exits 0", async () => {
  const child = startChild(fixture);
  await child.waitFor("the ready line", () => child.stdout().includes("\n"));
  const ready = JSON.parse(child.stdout().trim()) as { ready: boolean; function: string; url: string };
  assert.equal(ready.ready, true);
  assert.equal(ready.function, "slow");
  assert.match(ready.url, /^http:\/\/127\.0\.0\.1:\d+$/);
  assert.deepEqual(Object.keys(ready), ["ready", "function", "url"]);

  const quick = await fetch(`${ready.url}/`, { method: "POST", body: "{}" });
  assert.equal(quick.status, 200);
  assert.deepEqual(await quick.json(), { function: "slow", results: [{ slept: 0 }] });

  const slow = fetch(`${ready.url}/`, { method: "POST", body: JSON.stringify({ sleepMs: 700 }) });
  await child.waitFor("the slow request to start", () => child.stderr().includes('"msg":"sleeping"'));
  child.kill("SIGTERM");
  await child.waitFor("shutdown to begin", () => child.stderr().includes('"msg":"shutting down"'));
  await assert.rejects(fetch(`${ready.url}/healthz`), "no new connections while draining");

  const answer = await slow;
  assert.equal(answer.status, 200);
  assert.deepEqual(await answer.json(), { function: "slow", results: [{ slept: 700 }] });
  const answered = Date.now();
  const exit = await child.exited;
  assert.deepEqual(exit, { code: 0, signal: null });
  // Not held up by the finished request's keep-alive connection (kept idle up to 120 s).
  assert.ok(Date.now() - answered < 2000, `exited ${Date.now() - answered} ms after the answer`);
  assert.match(child.stderr(), /close hook ran/);
  assert.equal(child.stdout().split("\n").filter(Boolean).length, 1, "stdout carries only the ready line");
  for (const line of child
    .stderr()
    .split("\n")
    .filter((l) => l.startsWith("{")))
    JSON.parse(line);
});

test("SIGINT shuts an idle function down with exit 0", async () => {
  const child = startChild(fixture);
  await child.waitFor("the ready line", () => child.stdout().includes("\n"));
  child.kill("SIGINT");
  assert.deepEqual(await child.exited, { code: 0, signal: null });
});

test("a bad PORT fails the start with a clear message", async () => {
  const child = startChild(fixture, { PORT: "eighty" });
  const exit = await child.exited;
  assert.notEqual(exit.code, 0);
  assert.match(child.stderr(), /PORT must be an integer/);
  assert.equal(child.stdout(), "");
});

test("serveFunction in-process: ready line, url, close hooks, idempotent close", async () => {
  const lines: string[] = [];
  const app = createFunctionApp(echoSpec());
  const hooks: string[] = [];
  const served = await serveFunction(app, {
    port: 0,
    host: "127.0.0.1",
    handleSignals: false,
    stdout: { write: (line: string) => lines.push(line) },
    onClose: [() => void hooks.push("first")],
  });
  served.addCloseHook(async () => {
    hooks.push("second");
    throw new Error("a failing hook does not stop the others");
  });
  served.addCloseHook(() => void hooks.push("third"));
  assert.deepEqual(lines, [`${JSON.stringify({ ready: true, function: "echo", url: served.url })}\n`]);
  const res = await fetch(`${served.url}/healthz`);
  assert.equal(res.status, 200);
  // Idle connections outlive Go's 90 s client idle timeout: the webhook client, not we, closes them.
  assert.ok(served.server.keepAliveTimeout > 90_000, `keepAliveTimeout ${served.server.keepAliveTimeout}`);
  await Promise.all([served.close(), served.close()]);
  assert.deepEqual(hooks, ["first", "second", "third"]);
  assert.equal(app.runtime.draining, true);
  assert.equal((await request(app).get("/readyz")).status, 503);
  await assert.rejects(fetch(`${served.url}/healthz`));
});

test("requests still running when the grace period ends are cut off", async () => {
  const app = createFunctionApp(echoSpec());
  const served = await serveFunction(app, {
    port: 0,
    host: "127.0.0.1",
    handleSignals: false,
    shutdownGraceMs: 100,
    stdout: { write: () => true },
  });
  const slow = fetch(`${served.url}/`, { method: "POST", body: JSON.stringify({ sleepMs: 3000 }) });
  await new Promise((resolve) => setTimeout(resolve, 100));
  const started = Date.now();
  await served.close();
  assert.ok(Date.now() - started < 2000, "close does not wait for the slow request");
  await assert.rejects(slow);
});
