// The chaos run's parameters: defaults from issue 8, overridable by flags
// (`--claims=200`) or environment (`CHAOS_CLAIMS=200`), flags winning. Every
// parameter is printed with the result, so a run can be repeated.

export interface ChaosOptions {
  /** Claims that must end Bound: half matching pre-created static PVs, half dynamically provisioned. */
  claims: number;
  /**
   * Of the dynamic claims, the share of the expandable class with a
   * VolumeAttributesClass that the workload grows and re-tiers once Bound.
   */
  resizableFraction: number;
  /** Longest the resize workload waits to see a state (Infeasible, a class applied) before its next patch, ms. */
  resizeStepTimeoutMs: number;
  /** Extra claims created and deleted again during the run (half static, half dynamic): reclaim and leak paths. */
  churnClaims: number;
  /** Function processes per controller. */
  instances: number;
  /** The controllers hosted by one process each instance (FUNCTION=controllers) instead of a function each. */
  oneProcess: boolean;
  /** Shortest chaos phase, seconds (faults, kills and pod churn on). */
  chaosSeconds: number;
  /** The chaos phase also lasts until this fraction of claims is Bound, up to maxChaosSeconds. */
  boundFractionToEndChaos: number;
  maxChaosSeconds: number;
  /** During the chaos phase, POST /resync to a random instance of each controller this often (a PingSource), ms; 0 = never. */
  resyncIntervalMs: number;
  /** A random function process is SIGKILLed (and restarted) this often, ms; 0 = never. */
  killIntervalMs: number;
  /** Sandbox API faults: 409 on update/patch/delete, and 500/503 on any request but watch. */
  apiConflictProbability: number;
  apiErrorProbability: number;
  /** CSI driver faults: UNAVAILABLE / DEADLINE_EXCEEDED on any call. */
  csiErrorProbability: number;
  /** Of a failed mutating CSI call, the chance that the work was done before the error. */
  csiAfterProbability: number;
  /** Chance that the dispatcher delivers an event a second time (to another random instance). */
  duplicateProbability: number;
  /** Each delivery waits a random 0..maxHoldMs before joining the shuffled queue. */
  maxHoldMs: number;
  /** Deliveries in flight per controller. */
  dispatchConcurrency: number;
  /** Pods alive at once at most, and how often one is created. 0 pods = no attach/detach. */
  maxPods: number;
  podIntervalMs: number;
  podMinLifetimeMs: number;
  podMaxLifetimeMs: number;
  /** Resync passes and seconds after the chaos phase before giving up on "quiet". */
  settleMaxPasses: number;
  settleMaxSeconds: number;
  /** Seeds the harness's choices and the injected faults (process timing still varies). */
  seed: number;
  /** Parallel claim creations. */
  createConcurrency: number;
  /** Progress lines on stderr. */
  verbose: boolean;
}

export const defaultChaosOptions: ChaosOptions = {
  claims: 1000,
  churnClaims: 100,
  resizableFraction: 0.5,
  resizeStepTimeoutMs: 30_000,
  instances: 8,
  oneProcess: false,
  chaosSeconds: 60,
  boundFractionToEndChaos: 0.9,
  maxChaosSeconds: 600,
  resyncIntervalMs: 15_000,
  killIntervalMs: 3000,
  apiConflictProbability: 0.1,
  apiErrorProbability: 0.05,
  csiErrorProbability: 0.1,
  csiAfterProbability: 0.5,
  duplicateProbability: 0.25,
  maxHoldMs: 200,
  dispatchConcurrency: 16,
  maxPods: 40,
  podIntervalMs: 250,
  podMinLifetimeMs: 1000,
  podMaxLifetimeMs: 8000,
  settleMaxPasses: 40,
  settleMaxSeconds: 900,
  seed: 0,
  createConcurrency: 16,
  verbose: true,
};

type Key = keyof ChaosOptions;

function kebab(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

function envName(key: string): string {
  return `CHAOS_${key.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}`;
}

function parseValue(key: Key, raw: string): number | boolean {
  if (typeof defaultChaosOptions[key] === "boolean") {
    if (raw === "" || raw === "1" || raw === "true") return true;
    if (raw === "0" || raw === "false") return false;
    throw new Error(`${kebab(key)} must be true or false, got ${JSON.stringify(raw)}`);
  }
  const n = Number(raw);
  if (raw.trim() === "" || !Number.isFinite(n) || n < 0) {
    throw new Error(`${kebab(key)} must be a non-negative number, got ${JSON.stringify(raw)}`);
  }
  return n;
}

/** Options from `--name=value` flags and CHAOS_* variables over the defaults; throws on unknown flags. */
export function chaosOptionsFrom(argv: readonly string[], env: NodeJS.ProcessEnv): ChaosOptions {
  const out: Record<string, number | boolean> = { ...defaultChaosOptions };
  const keys = Object.keys(defaultChaosOptions) as Key[];
  for (const key of keys) {
    const raw = env[envName(key)];
    if (raw !== undefined) out[key] = parseValue(key, raw);
  }
  for (const arg of argv) {
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(arg);
    const key = m && keys.find((k) => kebab(k) === m[1]);
    if (!m || !key) {
      throw new Error(
        `unknown argument ${JSON.stringify(arg)}; flags: ${keys.map((k) => `--${kebab(k)}`).join(" ")}`,
      );
    }
    out[key] = parseValue(key, m[2] ?? "");
  }
  const options = out as unknown as ChaosOptions;
  if (options.seed === 0) options.seed = Math.floor(Math.random() * 2 ** 31) + 1;
  return checked(options);
}

export function checked(o: ChaosOptions): ChaosOptions {
  for (const key of ["claims", "churnClaims", "instances", "maxPods", "createConcurrency"] as const) {
    if (!Number.isInteger(o[key])) throw new Error(`${kebab(key)} must be an integer`);
  }
  if (o.instances < 1) throw new Error("instances must be at least 1");
  if (o.claims < 2) throw new Error("claims must be at least 2 (half static, half dynamic)");
  for (const key of [
    "boundFractionToEndChaos",
    "apiConflictProbability",
    "apiErrorProbability",
    "csiErrorProbability",
    "csiAfterProbability",
    "duplicateProbability",
    "resizableFraction",
  ] as const) {
    if (o[key] > 1) throw new Error(`${kebab(key)} is a probability (0..1)`);
  }
  if (o.podMaxLifetimeMs < o.podMinLifetimeMs) throw new Error("pod-max-lifetime-ms < pod-min-lifetime-ms");
  return o;
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
