// What every `npm run bench` module shares: progress on stderr, statistics,
// a figure next to its target, function processes (spawned the way
// `npm run serve` or a container runs them) and their peak RSS, the sandbox
// in a temporary directory, and the objects the benches create.
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { stop as stopEsbuild } from "esbuild";
import { FUNCTION_PROCESS_ENV } from "../functions/node-options.ts";
import { MUTATING_STORAGE_PLUGINS } from "../sandbox/apiserver/storage-admission.ts";
import { type Sandbox, type SandboxOptions, startSandbox } from "../sandbox/start.ts";
import { buildFunctions, SERVE_BUNDLE } from "../scripts/build-functions.ts";
import { primeCodeCache } from "../scripts/prime-code-cache.ts";
import { claimAdmissionReview } from "../shared/admission/claim-review.ts";
import type { KubeObject } from "../shared/kube/types.ts";

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const DRIVER_NAME = "hostpath.csi.k8s.io";

const started = performance.now();

/** One progress line on stderr (stdout carries only the final JSON). */
export function progress(message: string): void {
  const seconds = ((performance.now() - started) / 1000).toFixed(1).padStart(6);
  process.stderr.write(`[bench ${seconds}s] ${message}\n`);
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Rounds to `digits` decimals (figures in the JSON stay readable). */
export function round(value: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

export function median(values: readonly number[]): number {
  return percentile(values, 50);
}

/** Nearest-rank percentile; NaN for no values. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length, Math.max(1, rank)) - 1]!;
}

/** A figure next to its target. */
export interface Target {
  value: number;
  target: string;
  met: boolean;
}

export function atMost(value: number, limit: number, unit = ""): Target {
  return {
    value,
    target: `<= ${limit}${unit ? ` ${unit}` : ""}`,
    met: Number.isFinite(value) && value <= limit,
  };
}

export function atLeast(value: number, limit: number, unit = ""): Target {
  return {
    value,
    target: `>= ${limit}${unit ? ` ${unit}` : ""}`,
    met: Number.isFinite(value) && value >= limit,
  };
}

/**
 * Milliseconds one core takes for a fixed loop (median of 3). The same
 * machine has been seen to run it in 550 ms one hour and 900 ms the next (a
 * shared host), so every figure stands next to the speed it was taken at.
 */
export function cpuLoopMs(): number {
  const times: number[] = [];
  for (let run = 0; run < 3; run++) {
    const t0 = performance.now();
    let x = 0;
    for (let i = 0; i < 100_000_000; i++) x += i % 7;
    if (x < 0) throw new Error("unreachable: keeps the loop from being optimized away");
    times.push(performance.now() - t0);
  }
  return round(median(times), 0);
}

/** The machine's load average, so a reader can tell a quiet run from a loaded one. */
export function load(): { loadAverage1m: number; cpus: number } {
  return { loadAverage1m: round(loadavg()[0] ?? 0, 2), cpus: navigator.hardwareConcurrency };
}

/** CPU seconds so far: the whole machine's busy time, and this process's own plus its reaped children's. */
export interface CpuSnapshot {
  at: number;
  machineBusySeconds: number;
  ownSeconds: number;
}

export const CLOCK_TICKS = 100; // USER_HZ on Linux

/** /proc/stat's cpu fields this machine ran something in: user, nice, system, irq, softirq. */
const BUSY_FIELDS = [0, 1, 2, 5, 6];

/**
 * Busy ticks of the whole machine from /proc/stat's first line: not idle or
 * iowait, nor steal (a virtual machine's CPU time its host gave to others),
 * nor guest time (already counted in user and nice).
 */
export function parseMachineTicks(procStat: string): number {
  const fields = (procStat.split("\n")[0] ?? "").trim().split(/\s+/).slice(1).map(Number);
  return BUSY_FIELDS.reduce((sum, i) => sum + (Number.isFinite(fields[i]) ? (fields[i] as number) : 0), 0);
}

export function cpuSnapshot(): CpuSnapshot {
  let machine = Number.NaN;
  let own = Number.NaN;
  try {
    machine = parseMachineTicks(readFileSync("/proc/stat", "utf8")) / CLOCK_TICKS;
    // utime stime cutime cstime are fields 14-17, counted after the parenthesised command name.
    const stat = readFileSync("/proc/self/stat", "utf8");
    const after = stat
      .slice(stat.lastIndexOf(")") + 2)
      .split(" ")
      .map(Number);
    own = ((after[11] ?? 0) + (after[12] ?? 0) + (after[13] ?? 0) + (after[14] ?? 0)) / CLOCK_TICKS;
  } catch {
    // Not Linux: the load figure is left out (NaN).
  }
  return { at: performance.now(), machineBusySeconds: machine, ownSeconds: own };
}

/**
 * How busy the rest of the machine was between two snapshots: CPU used by
 * processes that are neither the bench nor its (exited) children, as a
 * percentage of all cores. Take `after` once the bench's children are gone.
 */
export function otherLoad(
  before: CpuSnapshot,
  after: CpuSnapshot,
): { otherProcessesCpuPercent: number; cpus: number } {
  const cpus = navigator.hardwareConcurrency;
  const wall = (after.at - before.at) / 1000;
  const other = after.machineBusySeconds - before.machineBusySeconds - (after.ownSeconds - before.ownSeconds);
  return { otherProcessesCpuPercent: round(Math.max(0, (100 * other) / (wall * cpus)), 0), cpus };
}

function statusMiB(pid: number | undefined, field: "VmHWM" | "VmRSS"): number {
  if (pid === undefined) return Number.NaN;
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const kib = new RegExp(`^${field}:\\s+(\\d+)\\s+kB`, "m").exec(status)?.[1];
    return kib === undefined ? Number.NaN : round(Number(kib) / 1024, 1);
  } catch {
    return Number.NaN;
  }
}

/** Peak resident set size of a live process (VmHWM), in MiB; NaN when it cannot be read. */
export function peakRssMiB(pid: number | undefined): number {
  return statusMiB(pid, "VmHWM");
}

/** Resident set size of a live process now (VmRSS), in MiB. */
export function rssMiB(pid: number | undefined): number {
  return statusMiB(pid, "VmRSS");
}

export interface SpawnedFunction {
  name: string;
  url: string;
  child: ChildProcess;
  /** performance.now() when spawn() was called. */
  spawnedAt: number;
  /** Milliseconds from spawn to the ready line. */
  readyMs: number;
  stderr(): string;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves once the process is gone. */
  stop(graceMs?: number): Promise<void>;
}

export interface SpawnOptions {
  /** Shown in errors and returned as `name`. */
  name: string;
  /** Node arguments: the script and anything before it (`["functions/serve.ts"]`, `["dist/functions/serve.mjs"]`). */
  args: string[];
  env: Record<string, string>;
  readyTimeoutMs?: number;
}

/**
 * Spawns `node <args>` with the function's environment and resolves on its
 * ready line (`{"ready":true,...,"url":...}` on stdout), as `npm start` does.
 */
export function spawnFunction(options: SpawnOptions): Promise<SpawnedFunction> {
  const spawnedAt = performance.now();
  const child = spawn(process.execPath, options.args, {
    cwd: REPO,
    env: { ...process.env, PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "warn", ...options.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let errText = "";
  child.stderr?.on("data", (d: Buffer) => {
    // Keep the tail only: a chatty process must not grow the bench's memory.
    errText = (errText + d.toString()).slice(-8192);
  });
  const gone = new Promise<void>((r) => child.once("exit", () => r()));
  const stop = async (graceMs = 5000): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
    await gone;
    clearTimeout(timer);
  };
  const lines = createInterface({ input: child.stdout! });
  return new Promise<SpawnedFunction>((resolvePromise, reject) => {
    const timeoutMs = options.readyTimeoutMs ?? 30_000;
    const timer = setTimeout(() => {
      void stop(0);
      reject(new Error(`${options.name} not ready within ${timeoutMs} ms: ${errText}`));
    }, timeoutMs);
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${options.name} exited (${code ?? signal}) before it was ready: ${errText}`));
    });
    child.once("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    lines.on("line", (line) => {
      let ready: { ready?: unknown; url?: unknown };
      try {
        ready = JSON.parse(line) as { ready?: unknown; url?: unknown };
      } catch {
        return;
      }
      if (ready.ready !== true || typeof ready.url !== "string") return;
      clearTimeout(timer);
      resolvePromise({
        name: options.name,
        url: ready.url,
        child,
        spawnedAt,
        readyMs: performance.now() - spawnedAt,
        stderr: () => errText,
        stop,
      });
    });
  });
}

/** `node functions/serve.ts` with FUNCTION=<name>: the TypeScript sources, as `npm run serve` runs them. */
export function serveArgs(): string[] {
  return [join(REPO, "functions", "serve.ts")];
}

let bundlesBuilt: Promise<string> | undefined;

const BUNDLES_PREFIX = "ksf-bench-bundles-";

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

/**
 * A bench killed by a signal never reaches its exit handler, so its bundle
 * directory stays behind; each names its bench's pid, and the next bench
 * removes those whose process is gone.
 */
export async function removeOrphanedBundles(dir = tmpdir()): Promise<string[]> {
  const names = await readdir(dir).catch(() => [] as string[]);
  const orphans = names.filter((name) => {
    const pid = Number(name.slice(BUNDLES_PREFIX.length).split("-")[0]);
    return name.startsWith(BUNDLES_PREFIX) && Number.isInteger(pid) && pid > 0 && !processAlive(pid);
  });
  await Promise.all(orphans.map((name) => rm(join(dir, name), { recursive: true, force: true })));
  return orphans;
}

/**
 * What the image runs (deploy/Dockerfile): the bundles of `npm run
 * build:functions`, with their code caches, in the image's environment (functions/node-options.ts). Built once per bench run,
 * into a directory of its own so a concurrent `npm run build:functions` is
 * not disturbed.
 */
export async function shippedFunction(): Promise<{ args: string[]; env: Record<string, string> }> {
  bundlesBuilt ??= (async () => {
    await removeOrphanedBundles();
    const dir = await mkdtemp(join(tmpdir(), `${BUNDLES_PREFIX}${process.pid}-`));
    process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
    await buildFunctions({ outDir: dir });
    // esbuild's service process would otherwise live on, counted as the machine's other load.
    await stopEsbuild();
    await primeCodeCache(dir);
    return join(dir, SERVE_BUNDLE);
  })();
  return { args: [await bundlesBuilt], env: { ...FUNCTION_PROCESS_ENV } };
}

export interface BenchSandbox {
  sandbox: Sandbox;
  dir: string;
  /** Environment every function needs to reach the sandbox. */
  env: Record<string, string>;
  close(): Promise<void>;
}

/**
 * The sandbox (API server and CSI driver, no injected latency) in a fresh temporary directory.
 * The benches create no pods, so no scheduler, kubelets or pod gc watch the API server beside them.
 */
export async function startBenchSandbox(options: Omit<SandboxOptions, "dir"> = {}): Promise<BenchSandbox> {
  const dir = await mkdtemp(join(tmpdir(), "ksf-bench-"));
  // The benches run no protection controller and resize nothing.
  const sandbox = await startSandbox({
    scheduler: false,
    kubelets: false,
    podGc: false,
    expander: false,
    disableAdmissionPlugins: MUTATING_STORAGE_PLUGINS,
    ...options,
    dir,
  });
  return {
    sandbox,
    dir,
    env: {
      KUBECONFIG: sandbox.kubeconfigPath,
      CSI_ENDPOINT: sandbox.csi.endpoint,
      DRIVER_NAME: sandbox.csi.driver.config.name,
      PROVISIONER_DRIVERS: sandbox.csi.driver.config.name,
    },
    close: async () => {
      await sandbox.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A StorageClass of the sandbox driver, default unless told otherwise. */
export function storageClass(
  name: string,
  options: { isDefault?: boolean; provisioner?: string } = {},
): KubeObject {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: {
      name,
      ...(options.isDefault !== false
        ? { annotations: { "storageclass.kubernetes.io/is-default-class": "true" } }
        : {}),
    },
    provisioner: options.provisioner ?? DRIVER_NAME,
    reclaimPolicy: "Delete",
    volumeBindingMode: "Immediate",
  };
}

/** A claim as a user writes it: no class (the default class applies), 1Gi, RWO. */
export function claim(name: string, extra: { storageClassName?: string; storage?: string } = {}): KubeObject {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace: "default" },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: extra.storage ?? "1Gi" } },
      volumeMode: "Filesystem",
      ...(extra.storageClassName !== undefined ? { storageClassName: extra.storageClassName } : {}),
    },
  };
}

/** The CREATE AdmissionReview kube-apiserver sends for `claim(name)` (v1, dryRun false). */
export function claimCreateReview(name: string, uid: string): object {
  return claimAdmissionReview({
    uid,
    operation: "CREATE",
    name,
    namespace: "default",
    userInfo: { username: "kubernetes-admin", groups: ["system:masters", "system:authenticated"] },
    object: claim(name),
  });
}

/** Counters of the sandbox API server as a plain object (verb + resource -> requests). */
export function counters(sandbox: Sandbox): Record<string, number> {
  return Object.fromEntries(sandbox.apiServer.counters);
}

export interface BoundTracker {
  /** Claim name -> performance.now() when the API server first stored it Bound. */
  boundAt: Map<string, number>;
  /** Resolves once `names` are all Bound, or rejects after `timeoutMs`. */
  waitFor(names: readonly string[], timeoutMs: number): Promise<void>;
  close(): void;
}

/**
 * Notes when each claim becomes Bound, from the API server's own change feed
 * (in-process: no request, so no counter moves and no polling delay).
 */
export function trackBoundClaims(sandbox: Sandbox): BoundTracker {
  const boundAt = new Map<string, number>();
  const waiters = new Set<() => void>();
  const unsubscribe = sandbox.apiServer.store.subscribe((change) => {
    if (change.resource.plural !== "persistentvolumeclaims" || change.type === "DELETED") return;
    const status = change.object.status as { phase?: unknown } | undefined;
    const name = change.object.metadata.name;
    if (status?.phase !== "Bound" || name === undefined || boundAt.has(name)) return;
    boundAt.set(name, performance.now());
    for (const w of [...waiters]) w();
  });
  return {
    boundAt,
    waitFor: (names, timeoutMs) =>
      new Promise<void>((resolvePromise, reject) => {
        const check = (): boolean => names.every((n) => boundAt.has(n));
        if (check()) return resolvePromise();
        const done = (): void => {
          if (!check()) return;
          clearTimeout(timer);
          waiters.delete(done);
          resolvePromise();
        };
        const timer = setTimeout(() => {
          waiters.delete(done);
          const missing = names.filter((n) => !boundAt.has(n));
          reject(new Error(`${missing.length} of ${names.length} claims not Bound after ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.add(done);
      }),
    close: () => {
      unsubscribe();
      waiters.clear();
    },
  };
}
