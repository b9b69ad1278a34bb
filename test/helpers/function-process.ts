// Starts one function as its own process, the way `npm run serve` does
// (FUNCTION=<name> node functions/serve.ts) or the image does (a bundled
// serve.mjs as `entry`), and waits for its ready line.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";

export interface FunctionProcess {
  url: string;
  child: ChildProcess;
  stderr: () => string;
  /** SIGTERM and wait; resolves to the exit code. */
  stop(): Promise<number | null>;
}

export async function startFunctionProcess(
  name: string,
  env: Record<string, string>,
  entry = "functions/serve.ts",
): Promise<FunctionProcess> {
  const child = spawn(process.execPath, [entry], {
    env: { ...process.env, FUNCTION: name, PORT: "0", LOG_LEVEL: "warn", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let errText = "";
  child.stderr?.on("data", (d: Buffer) => {
    errText += d.toString();
  });
  const lines = createInterface({ input: child.stdout! });
  const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not get ready: ${errText}`)), 20_000);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited with ${code}: ${errText}`));
    });
    lines.once("line", (line) => {
      clearTimeout(timer);
      resolve(JSON.parse(line) as Record<string, unknown>);
    });
  });
  assert.equal(ready.ready, true);
  assert.equal(ready.function, name);
  return {
    url: String(ready.url),
    child,
    stderr: () => errText,
    stop: () =>
      new Promise((resolve) => {
        // A child that already died (SIGKILL in a test) has fired its exit event: do not wait for another.
        if (child.exitCode !== null || child.signalCode !== null) return resolve(child.exitCode);
        child.once("exit", (code) => resolve(code));
        child.kill("SIGTERM");
      }),
  };
}
