// The function processes of a chaos run: N per controller, each started the
// way `npm run serve` does (FUNCTION=<name> node functions/serve.ts) and
// known by the URL of its ready line. Instances are SIGKILLed and restarted
// on purpose; one that dies on its own is restarted too, but counted and its
// stderr kept, because that is a finding.
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { sleep } from "./options.ts";

export type ControllerName =
  | "binder"
  | "provisioner"
  | "attacher"
  | "attach-detach"
  | "resizer"
  | "controllers";
export const controllerNames: readonly ControllerName[] = [
  "binder",
  "provisioner",
  "attacher",
  "attach-detach",
  "resizer",
];

/** With --one-process: every instance hosts all of controllerNames (CONTROLLERS), fed the union of their routes. */
export const oneProcessNames: readonly ControllerName[] = ["controllers"];

const serveScript = fileURLToPath(new URL("../../functions/serve.ts", import.meta.url));
const repoRoot = fileURLToPath(new URL("../../", import.meta.url));
const readyTimeoutMs = 60_000;
const stderrTailBytes = 4096;

interface Instance {
  controller: ControllerName;
  slot: number;
  url: string;
  child: ChildProcess;
  /** Set before a kill we cause, so the exit is not taken for a crash. */
  killedOnPurpose: boolean;
  stderrTail: string;
}

export interface FleetStats {
  started: number;
  killed: number;
  restarted: number;
  /** Exits we did not cause (crashes): each one is a finding. */
  unexpectedExits: { controller: string; code: number | null; signal: string | null; stderr: string }[];
  /** Restarts that failed before the ready line (and were tried again), with the first few reasons. */
  startFailures: number;
  startFailureSamples: string[];
  /** Error-level log lines of all instances, by controller, message and error (the functions log 500s so). */
  errorLogs: Record<string, number>;
}

const maxErrorKinds = 40;

/** "<controller>: <msg>: <err.message>" of an error-level pino line, or undefined for other lines. */
function errorKey(controller: string, line: string): string | undefined {
  if (!line.includes('"level":"error"') && !line.includes('"level":"fatal"')) return undefined;
  try {
    const o = JSON.parse(line) as { msg?: unknown; err?: { message?: unknown; type?: unknown } };
    const err = o.err ? `${String(o.err.type ?? "")} ${String(o.err.message ?? "")}` : "";
    // Names, uids and ports differ per line; digits and quoted names folded so alike errors count together.
    const text = `${String(o.msg ?? "")}: ${err}`.replace(/"[^"]*"/g, '"…"').replace(/\d+/g, "N");
    return `${controller}: ${text.slice(0, 240)}`;
  } catch {
    return `${controller}: ${line.slice(0, 240)}`;
  }
}

function startProcess(
  controller: ControllerName,
  slot: number,
  env: Record<string, string>,
  onError: (key: string) => void,
): Promise<Instance> {
  const child = spawn(process.execPath, [serveScript], {
    cwd: repoRoot,
    env: { ...process.env, ...env, FUNCTION: controller, PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "error" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const instance: Instance = { controller, slot, url: "", child, killedOnPurpose: false, stderrTail: "" };
  let partial = "";
  child.stderr?.on("data", (d: Buffer) => {
    const text = d.toString();
    // Only a tail: a long run under faults may log a lot, and only the end explains a crash.
    instance.stderrTail = (instance.stderrTail + text).slice(-stderrTailBytes);
    const lines = (partial + text).split("\n");
    partial = lines.pop() ?? "";
    for (const line of lines) {
      const key = errorKey(controller, line);
      if (key) onError(key);
    }
  });
  return new Promise((resolve, reject) => {
    let stdout = "";
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(
        new Error(`${controller} #${slot} not ready within ${readyTimeoutMs} ms: ${instance.stderrTail}`),
      );
    }, readyTimeoutMs);
    const onExit = (code: number | null): void => {
      clearTimeout(timer);
      reject(
        new Error(`${controller} #${slot} exited with ${code} before it was ready: ${instance.stderrTail}`),
      );
    };
    child.once("exit", onExit);
    const onData = (d: Buffer): void => {
      stdout += d.toString();
      const newline = stdout.indexOf("\n");
      if (newline < 0) return;
      child.stdout?.off("data", onData);
      // Keep draining stdout so a chatty process never blocks on a full pipe.
      child.stdout?.resume();
      clearTimeout(timer);
      child.off("exit", onExit);
      try {
        const ready = JSON.parse(stdout.slice(0, newline)) as { ready?: unknown; url?: unknown };
        if (ready.ready !== true || typeof ready.url !== "string") throw new Error("no ready line");
        instance.url = ready.url;
        resolve(instance);
      } catch (err) {
        child.kill("SIGKILL");
        reject(new Error(`${controller} #${slot}: unexpected first line ${JSON.stringify(stdout)}: ${err}`));
      }
    };
    child.stdout?.on("data", onData);
  });
}

export class Fleet {
  private readonly env: Record<string, string>;
  private readonly perController: number;
  private readonly live = new Map<ControllerName, Instance[]>();
  /** Controllers with an instance being restarted: at most one down per controller at a time. */
  private readonly restarting = new Set<ControllerName>();
  private readonly pendingRestarts = new Set<Promise<void>>();
  private stopping = false;
  private readonly counts: FleetStats = {
    started: 0,
    killed: 0,
    restarted: 0,
    unexpectedExits: [],
    startFailures: 0,
    startFailureSamples: [],
    errorLogs: {},
  };

  private readonly killAllOnExit = (): void => {
    for (const i of [...this.live.values()].flat()) i.child.kill("SIGKILL");
  };

  /** The functions each instance slot runs: controllerNames, or oneProcessNames. */
  readonly controllers: readonly ControllerName[];

  constructor(options: {
    env: Record<string, string>;
    instances: number;
    controllers?: readonly ControllerName[];
  }) {
    this.env = options.env;
    this.perController = options.instances;
    this.controllers = options.controllers ?? controllerNames;
    for (const c of this.controllers) this.live.set(c, []);
    // A harness that dies (an uncaught error, Ctrl-C) must not leave 32 function processes behind.
    process.once("exit", this.killAllOnExit);
  }

  /** Starts every instance, a few at a time (each start costs a second of CPU on a small machine). */
  async start(): Promise<void> {
    const todo = this.controllers.flatMap((c) =>
      Array.from({ length: this.perController }, (_, slot) => ({ c, slot })),
    );
    // One instance of each controller at a time.
    const parallel = this.controllers.length;
    for (let i = 0; i < todo.length; i += parallel) {
      await Promise.all(todo.slice(i, i + parallel).map(({ c, slot }) => this.launch(c, slot)));
    }
  }

  private async launch(controller: ControllerName, slot: number): Promise<void> {
    const instance = await startProcess(controller, slot, this.env, (key) => this.countError(key));
    this.counts.started++;
    instance.child.once("exit", (code, signal) => this.onExit(instance, code, signal));
    this.live.get(controller)!.push(instance);
  }

  private countError(key: string): void {
    const logs = this.counts.errorLogs;
    if (logs[key] === undefined && Object.keys(logs).length >= maxErrorKinds) key = "(other error lines)";
    logs[key] = (logs[key] ?? 0) + 1;
  }

  private onExit(instance: Instance, code: number | null, signal: NodeJS.Signals | null): void {
    const list = this.live.get(instance.controller)!;
    const at = list.indexOf(instance);
    if (at >= 0) list.splice(at, 1);
    if (instance.killedOnPurpose || this.stopping) return;
    this.counts.unexpectedExits.push({
      controller: instance.controller,
      code,
      signal,
      stderr: instance.stderrTail.slice(-1500),
    });
    this.restart(instance.controller, instance.slot);
  }

  private restart(controller: ControllerName, slot: number): void {
    this.restarting.add(controller);
    const p = (async () => {
      // Bounded: a function that cannot start again is reported, not retried for ever.
      for (let attempt = 1; attempt <= 5 && !this.stopping; attempt++) {
        try {
          await this.launch(controller, slot);
          this.counts.restarted++;
          return;
        } catch (err) {
          this.counts.startFailures++;
          if (this.counts.startFailureSamples.length < 5) {
            // The reason is serve.ts's "failed to start: <error>" line; the stack below it says little.
            const text = String(err);
            const reason = /serve: failed to start: (.*)/.exec(text)?.[1] ?? text.split("\n")[0] ?? text;
            this.counts.startFailureSamples.push(`${controller}: ${reason.slice(0, 300)}`);
          }
          if (attempt === 5) {
            this.counts.unexpectedExits.push({
              controller,
              code: null,
              signal: null,
              stderr: `restart failed: ${String(err).slice(0, 1500)}`,
            });
          }
          await sleep(500);
        }
      }
    })().finally(() => {
      this.restarting.delete(controller);
      this.pendingRestarts.delete(p);
    });
    this.pendingRestarts.add(p);
  }

  /** A live instance of the controller, chosen at random; undefined while none is up. */
  pick(controller: ControllerName, random: () => number): { url: string } | undefined {
    const list = this.live.get(controller)!;
    if (list.length === 0) return undefined;
    return list[Math.floor(random() * list.length)];
  }

  liveCount(controller: ControllerName): number {
    return this.live.get(controller)!.length;
  }

  /**
   * SIGKILLs one random instance of a random controller that has none down
   * already (so every controller keeps at least one instance when N >= 2),
   * and starts its replacement in the background. Returns what was killed.
   */
  killOne(random: () => number): string | undefined {
    const candidates = this.controllers.filter(
      (c) => !this.restarting.has(c) && this.live.get(c)!.length > (this.perController > 1 ? 1 : 0),
    );
    if (candidates.length === 0 || this.stopping) return undefined;
    const controller = candidates[Math.floor(random() * candidates.length)]!;
    const list = this.live.get(controller)!;
    const victim = list[Math.floor(random() * list.length)]!;
    victim.killedOnPurpose = true;
    list.splice(list.indexOf(victim), 1);
    victim.child.kill("SIGKILL");
    this.counts.killed++;
    this.restart(controller, victim.slot);
    return `${controller}#${victim.slot}`;
  }

  /** Resolves once no restart is pending (bounded by each restart's own attempts). */
  async restarts(): Promise<void> {
    while (this.pendingRestarts.size > 0) await Promise.all([...this.pendingRestarts]);
  }

  stats(): FleetStats {
    return structuredClone(this.counts);
  }

  async stop(): Promise<void> {
    this.stopping = true;
    process.off("exit", this.killAllOnExit);
    await this.restarts().catch(() => undefined);
    const all = [...this.live.values()].flat();
    await Promise.all(
      all.map(
        (i) =>
          new Promise<void>((resolve) => {
            if (i.child.exitCode !== null || i.child.signalCode !== null) return resolve();
            const timer = setTimeout(() => i.child.kill("SIGKILL"), 5000);
            i.child.once("exit", () => {
              clearTimeout(timer);
              resolve();
            });
            i.child.kill("SIGTERM");
          }),
      ),
    );
  }
}
