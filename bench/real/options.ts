// Options of `npm run bench` against a real API server: `--kubeconfig PATH`
// (or KUBECONFIG in the environment) switches the bench from the sandbox to
// the server it names. Pure: arguments and environment in, parameters out.

import { parseArgs } from "node:util";

export const WORKLOADS = ["provision", "delete", "bind", "lateVolume", "attach"] as const;
export type Workload = (typeof WORKLOADS)[number];

/** Where upstream's binaries are, for the comparison mode. */
export interface UpstreamBinaries {
  kubeControllerManager: string;
  csiProvisioner: string;
  csiAttacher: string;
  hostpathPlugin: string;
}

export interface RealBenchParams {
  kubeconfig: string;
  workloads: readonly Workload[];
  /** Claims provisioned (and then deleted). */
  claims: number;
  /** Static PV/claim pairs bound, one run per size. */
  bindSizes: readonly number[];
  /** Runs of "a PV created after its claim" (the median is the figure). */
  lateRuns: number;
  attachments: number;
  /** Rounds of ours (and, with --compare, of upstream's, alternating). */
  rounds: number;
  /** Alternate with upstream's controllers, print the ratio per figure. */
  compare: boolean;
  upstream: UpstreamBinaries;
  /** Upstream with its default rate limits and workers instead of the tuned ones. */
  upstreamDefaults: boolean;
  /** Seconds between the /resync calls every controller gets (the PingSources' "* * * * *"). */
  resyncSeconds: number;
  /** Forwarder deliveries in flight per function; undefined = the forwarder's default. */
  forwarderConcurrency?: number;
  /** WORKERS for our controller functions (upstream's tuned column runs 100 workers); undefined: their defaults. */
  workers?: number;
  /** Our controllers in one process (FUNCTION=controllers), one delivery per change, instead of a function each. */
  oneProcess: boolean;
  /** Where our processes write V8 CPU profiles (a folder per process, written as each stops); undefined: none. */
  cpuProfDir?: string;
  /** Longest wait for one workload to finish, seconds. */
  timeoutSeconds: number;
  /** Size of the untimed pass of the selected workloads each stack gets before the timed ones; 0: none. */
  warmup: number;
}

const DEFAULT_BIN_DIR = "~/.cache/kube-storage-functions/real-cluster/bin";

export const USAGE = `usage: npm run bench -- --kubeconfig PATH [options]   (or KUBECONFIG set; npm run bench:real -- ...)
  --workloads LIST           of provision,delete,bind,lateVolume,attach (all; delete needs provision)
  --skip LIST                leave these out
  --claims N                 claims provisioned, then deleted (200)
  --bind-sizes N,N           static PV/claim pairs bound, a run per size (100,1000)
  --late-runs N              runs of a PV created after its claim; the median is the figure (5)
  --attachments N            VolumeAttachments attached (100)
  --rounds N                 rounds of ours (and of upstream's with --compare, alternating) (1)
  --compare                  also run upstream's kube-controller-manager, csi-provisioner, csi-attacher, hostpathplugin
  --upstream-defaults        upstream with its default QPS, burst and workers instead of 100 / 200 / 100
  --upstream-bin-dir DIR     where upstream's binaries are (UPSTREAM_BIN_DIR; ${DEFAULT_BIN_DIR})
  --kube-controller-manager, --csi-provisioner, --csi-attacher, --hostpath-plugin PATH
                             one binary each (KUBE_CONTROLLER_MANAGER, CSI_PROVISIONER, CSI_ATTACHER, HOSTPATH_PLUGIN)
  --resync-seconds N         how often our controllers get POST /resync (60, the PingSources' minute)
  --forwarder-concurrency N  forwarder deliveries in flight per function (the forwarder's default)
  --workers N                WORKERS of our controller functions, e.g. 100 as upstream's tuned sidecars (their defaults)
  --one-process              our controllers in one process (FUNCTION=controllers) instead of a function each
  --cpu-prof DIR             our functions and the forwarder write V8 CPU profiles to DIR/<name>/ as they stop
  --timeout-seconds N        longest wait for one workload (600)
  --warmup N                 each stack first runs the selected workloads once with N claims, pairs and
                             attachments, untimed, so the timed runs meet running processes (0: start cold) (0)`;

export class RealBenchUsageError extends Error {
  override name = "RealBenchUsageError";
}

type Env = Readonly<Record<string, string | undefined>>;

/** True when the bench should run against a real API server instead of the sandbox. */
export function wantsRealServer(args: readonly string[], env: Env): boolean {
  return args.some((a) => a === "--kubeconfig" || a.startsWith("--kubeconfig=")) || Boolean(env.KUBECONFIG);
}

function int(value: string | undefined, fallback: number, name: string, min: number, max: number): number {
  if (value === undefined) return fallback;
  if (!/^\d+$/.test(value)) throw new RealBenchUsageError(`--${name} must be a whole number, got ${value}`);
  const n = Number(value);
  if (n < min || n > max)
    throw new RealBenchUsageError(`--${name} must be between ${min} and ${max}, got ${n}`);
  return n;
}

function list(value: string | undefined): string[] | undefined {
  return value
    ?.split(",")
    .map((s) => s.trim())
    .filter(Boolean);
}

function expandHome(path: string, env: Env): string {
  return path.startsWith("~/") ? `${env.HOME ?? "/root"}${path.slice(1)}` : path;
}

function workloadList(value: string | undefined, name: string): Workload[] | undefined {
  const names = list(value);
  if (names === undefined) return undefined;
  for (const w of names)
    if (!(WORKLOADS as readonly string[]).includes(w))
      throw new RealBenchUsageError(`--${name}: unknown workload ${w} (expected ${WORKLOADS.join(", ")})`);
  return names as Workload[];
}

export function realParamsFromArgs(args: readonly string[], env: Env): RealBenchParams {
  let values: Record<string, string | boolean | undefined>;
  try {
    values = parseArgs({
      args: [...args],
      options: {
        kubeconfig: { type: "string" },
        workloads: { type: "string" },
        skip: { type: "string" },
        claims: { type: "string" },
        "bind-sizes": { type: "string" },
        "late-runs": { type: "string" },
        attachments: { type: "string" },
        rounds: { type: "string" },
        compare: { type: "boolean" },
        "upstream-defaults": { type: "boolean" },
        "upstream-bin-dir": { type: "string" },
        "kube-controller-manager": { type: "string" },
        "csi-provisioner": { type: "string" },
        "csi-attacher": { type: "string" },
        "hostpath-plugin": { type: "string" },
        "resync-seconds": { type: "string" },
        "forwarder-concurrency": { type: "string" },
        workers: { type: "string" },
        "one-process": { type: "boolean" },
        "cpu-prof": { type: "string" },
        "timeout-seconds": { type: "string" },
        warmup: { type: "string" },
      },
    }).values;
  } catch (err) {
    throw new RealBenchUsageError((err as Error).message);
  }
  const str = (k: string): string | undefined => {
    const v = values[k];
    return typeof v === "string" ? v : undefined;
  };
  const kubeconfig = str("kubeconfig") ?? env.KUBECONFIG;
  if (!kubeconfig) throw new RealBenchUsageError("--kubeconfig PATH (or KUBECONFIG) names the API server");
  const only = workloadList(str("workloads"), "workloads") ?? [...WORKLOADS];
  const skip = new Set(workloadList(str("skip"), "skip") ?? []);
  const workloads = only.filter((w) => !skip.has(w));
  if (workloads.includes("delete") && !workloads.includes("provision"))
    throw new RealBenchUsageError("the delete workload deletes what provision made: run both");
  const binDir = expandHome(str("upstream-bin-dir") ?? env.UPSTREAM_BIN_DIR ?? DEFAULT_BIN_DIR, env);
  const bin = (flag: string, envName: string, file: string): string =>
    expandHome(str(flag) ?? env[envName] ?? `${binDir}/${file}`, env);
  const bindSizes = list(str("bind-sizes"))?.map((s) => int(s, 0, "bind-sizes", 1, 100_000)) ?? [100, 1000];
  const concurrency = str("forwarder-concurrency");
  const workers = str("workers");
  const cpuProf = str("cpu-prof");
  if (cpuProf === "") throw new RealBenchUsageError("--cpu-prof needs a folder");
  return {
    kubeconfig: expandHome(kubeconfig, env),
    workloads,
    claims: int(str("claims"), 200, "claims", 1, 100_000),
    bindSizes,
    lateRuns: int(str("late-runs"), 5, "late-runs", 1, 100),
    attachments: int(str("attachments"), 100, "attachments", 1, 100_000),
    rounds: int(str("rounds"), 1, "rounds", 1, 100),
    compare: values.compare === true,
    upstream: {
      kubeControllerManager: bin(
        "kube-controller-manager",
        "KUBE_CONTROLLER_MANAGER",
        "kube-controller-manager",
      ),
      csiProvisioner: bin("csi-provisioner", "CSI_PROVISIONER", "csi-provisioner"),
      csiAttacher: bin("csi-attacher", "CSI_ATTACHER", "csi-attacher"),
      hostpathPlugin: bin("hostpath-plugin", "HOSTPATH_PLUGIN", "hostpathplugin"),
    },
    upstreamDefaults: values["upstream-defaults"] === true,
    resyncSeconds: int(str("resync-seconds"), 60, "resync-seconds", 1, 3600),
    ...(concurrency !== undefined
      ? { forwarderConcurrency: int(concurrency, 16, "forwarder-concurrency", 1, 1024) }
      : {}),
    ...(workers !== undefined ? { workers: int(workers, 10, "workers", 1, 10_000) } : {}),
    oneProcess: values["one-process"] === true,
    ...(cpuProf !== undefined ? { cpuProfDir: expandHome(cpuProf, env) } : {}),
    timeoutSeconds: int(str("timeout-seconds"), 600, "timeout-seconds", 1, 86_400),
    warmup: int(str("warmup"), 0, "warmup", 0, 100_000),
  };
}
