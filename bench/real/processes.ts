// Child processes of the real-server bench that are not functions: the
// sandbox CSI driver (a JSON ready line) and upstream's binaries (no ready
// line: the caller checks readiness its own way). Output is kept as a tail
// for error messages; stop() is SIGTERM, then SIGKILL after a grace.

import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";

export interface Child {
  name: string;
  child: ChildProcess;
  /** The last few KiB of stdout and stderr. */
  output(): string;
  exited(): boolean;
  /** Resolves once the output's tail matches `pattern` (call it right after start); rejects on exit or timeout. */
  waitForOutput(pattern: RegExp, timeoutMs: number): Promise<void>;
  stop(graceMs?: number): Promise<void>;
}

export function startChild(
  name: string,
  command: string,
  args: readonly string[],
  env: Record<string, string>,
  cwd?: string,
): Child {
  const child = spawn(command, [...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
    ...(cwd ? { cwd } : {}),
  });
  let tail = "";
  const listeners = new Set<() => void>();
  const keep = (d: Buffer): void => {
    const text = d.toString();
    // Lines may be cut between chunks: match over the tail, not the chunk.
    tail = (tail + text).slice(-8192);
    for (const l of [...listeners]) l();
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  const gone = new Promise<void>((r) => child.once("exit", () => r()));
  child.once("error", (err) => keep(Buffer.from(`spawn failed: ${err.message}\n`)));
  const exited = (): boolean => child.exitCode !== null || child.signalCode !== null;
  return {
    name,
    child,
    output: () => tail,
    exited,
    waitForOutput: (pattern, timeoutMs) =>
      new Promise<void>((resolve, reject) => {
        const done = (err?: Error): void => {
          clearTimeout(timer);
          listeners.delete(check);
          child.off("exit", onExit);
          if (err) reject(err);
          else resolve();
        };
        const check = (): void => {
          if (pattern.test(tail)) done();
        };
        const onExit = (): void => done(new Error(`${name} exited: ${tail}`));
        const timer = setTimeout(
          () => done(new Error(`${name}: no ${pattern} within ${timeoutMs} ms: ${tail}`)),
          timeoutMs,
        );
        listeners.add(check);
        child.once("exit", onExit);
        check();
      }),
    stop: async (graceMs = 5000) => {
      if (exited() || child.pid === undefined) return;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
      await gone;
      clearTimeout(timer);
    },
  };
}

/** Resolves with the first stdout line that parses as JSON and satisfies `ready`. */
export function readyLine<T>(
  c: Child,
  ready: (line: Record<string, unknown>) => T | undefined,
  timeoutMs = 30_000,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      reject(new Error(`${c.name} not ready within ${timeoutMs} ms: ${c.output()}`));
    }, timeoutMs);
    c.child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${c.name} exited (${code ?? signal}) before it was ready: ${c.output()}`));
    });
    createInterface({ input: c.child.stdout! }).on("line", (line) => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch {
        return;
      }
      if (typeof parsed !== "object" || parsed === null) return;
      const value = ready(parsed as Record<string, unknown>);
      if (value === undefined) return;
      clearTimeout(timer);
      resolve(value);
    });
  });
}

/** Polls `check` every `everyMs` until it is true; rejects after `timeoutMs` or when `c` exits. */
export async function pollUntil(
  what: string,
  check: () => Promise<boolean>,
  timeoutMs: number,
  c?: Child,
  everyMs = 250,
): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (c?.exited()) throw new Error(`${c.name} exited before ${what}: ${c.output()}`);
    if (performance.now() > deadline)
      throw new Error(`timed out waiting for ${what}${c ? `: ${c.output()}` : ""}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
