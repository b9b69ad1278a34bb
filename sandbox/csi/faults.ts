// Fault injection for tests and chaos runs: latency and gRPC errors on some
// or all CSI methods. A transient error on a mutating call may be raised
// before the work or after it: a timeout after the volume really exists is
// exactly what makes callers leak volumes, so both must happen.
import { seededRandom } from "../seeded-random.ts";
import { type ErrorCodeName, errorCodeNames, isErrorCodeName } from "./errors.ts";

export interface CsiFaultSettings {
  /** Delay before every matching call (including the injected error). */
  latencyMs?: number;
  /** Chance, 0..1, that a matching call fails with one of errorCodes. */
  errorProbability?: number;
  /** Codes to pick from, uniformly; UNAVAILABLE when absent. */
  errorCodes?: ErrorCodeName[];
  /** CSI method names ("CreateVolume"); every method when absent. */
  methods?: string[];
  /** Seed for a reproducible sequence; Math.random when absent. */
  seed?: number;
  /**
   * For a mutating call failing with UNAVAILABLE or DEADLINE_EXCEEDED: the
   * chance, 0..1, that the work is done before the error is answered.
   * Default 0.5. Other codes always fail before doing anything.
   */
  afterProbability?: number;
}

/** What the dice decided for one call. */
export interface FaultDecision {
  latencyMs: number;
  error?: { code: ErrorCodeName; after: boolean };
}

/** Codes that leave the caller not knowing whether the call took effect. */
const ambiguousCodes: readonly ErrorCodeName[] = ["UNAVAILABLE", "DEADLINE_EXCEEDED"];

function probability(name: string, v: unknown): number | undefined {
  if (v === undefined) return undefined;
  if (typeof v !== "number" || !Number.isFinite(v) || v < 0 || v > 1) {
    throw new Error(`${name} must be a number from 0 to 1`);
  }
  return v;
}

/** Validates untrusted settings (from the admin endpoint); throws with a clear message. */
export function parseCsiFaultSettings(body: unknown, knownMethods: readonly string[]): CsiFaultSettings {
  if (!body || typeof body !== "object" || Array.isArray(body)) {
    throw new Error("fault settings must be a JSON object");
  }
  const b = body as Record<string, unknown>;
  const known = new Set([
    "latencyMs",
    "errorProbability",
    "errorCodes",
    "methods",
    "seed",
    "afterProbability",
  ]);
  for (const key of Object.keys(b)) {
    if (!known.has(key)) throw new Error(`unknown fault setting ${JSON.stringify(key)}`);
  }
  const out: CsiFaultSettings = {};
  if (b.latencyMs !== undefined) {
    if (typeof b.latencyMs !== "number" || !(b.latencyMs >= 0 && b.latencyMs <= 600_000)) {
      throw new Error("latencyMs must be a number from 0 to 600000");
    }
    out.latencyMs = b.latencyMs;
  }
  const ep = probability("errorProbability", b.errorProbability);
  if (ep !== undefined) out.errorProbability = ep;
  const ap = probability("afterProbability", b.afterProbability);
  if (ap !== undefined) out.afterProbability = ap;
  if (b.errorCodes !== undefined) {
    if (!Array.isArray(b.errorCodes) || b.errorCodes.length === 0 || !b.errorCodes.every(isErrorCodeName)) {
      throw new Error(`errorCodes must be a non-empty list of gRPC code names: ${errorCodeNames.join(", ")}`);
    }
    out.errorCodes = b.errorCodes;
  }
  if (b.methods !== undefined) {
    if (!Array.isArray(b.methods) || !b.methods.every((m) => typeof m === "string")) {
      throw new Error("methods must be a list of CSI method names");
    }
    out.methods = b.methods.map((m: string) => normalizeMethod(m, knownMethods));
  }
  if (b.seed !== undefined) {
    if (typeof b.seed !== "number" || !Number.isInteger(b.seed)) throw new Error("seed must be an integer");
    out.seed = b.seed;
  }
  return out;
}

/** Accepts "CreateVolume" or the full "/csi.v1.Controller/CreateVolume". */
function normalizeMethod(m: string, knownMethods: readonly string[]): string {
  const short = m.slice(m.lastIndexOf("/") + 1);
  if (!knownMethods.includes(short)) {
    throw new Error(`unknown CSI method ${JSON.stringify(m)}; known: ${knownMethods.join(", ")}`);
  }
  return short;
}

export class CsiFaultInjector {
  private settings: CsiFaultSettings = {};
  private random: () => number = Math.random;

  get current(): CsiFaultSettings {
    return this.settings;
  }

  set(settings: CsiFaultSettings): void {
    this.settings = { ...settings };
    this.random = settings.seed === undefined ? Math.random : seededRandom(settings.seed);
  }

  clear(): void {
    this.set({});
  }

  decide(method: string, mutating: boolean): FaultDecision {
    const s = this.settings;
    if (s.methods && !s.methods.includes(method)) return { latencyMs: 0 };
    const decision: FaultDecision = { latencyMs: s.latencyMs ?? 0 };
    if (s.errorProbability && this.random() < s.errorProbability) {
      const codes = s.errorCodes ?? ["UNAVAILABLE"];
      const code = codes[Math.min(codes.length - 1, Math.floor(this.random() * codes.length))]!;
      const after = mutating && ambiguousCodes.includes(code) && this.random() < (s.afterProbability ?? 0.5);
      decision.error = { code, after };
    }
    return decision;
  }
}
