// Fault injection for tests and chaos runs: conflicts on writes, server
// errors, RBAC refusals (403) and latency, optionally limited to some verbs
// and resources.
import { seededRandom } from "../seeded-random.ts";
import { ApiError } from "./status.ts";

export interface FaultSettings {
  /** Probability of a 409 Conflict on update, patch and delete. */
  conflictProbability?: number;
  /** Probability of a server error (errorCode) on any matching request. */
  errorProbability?: number;
  errorCode?: InjectedErrorCode;
  /** Added to every matching request. */
  latencyMs?: number;
  verbs?: string[];
  resources?: string[];
  /** Seed for a reproducible sequence; Math.random when absent. */
  seed?: number;
}

export type InjectedErrorCode = 403 | 429 | 500 | 502 | 503 | 504;
const injectableCodes: readonly number[] = [403, 429, 500, 502, 503, 504];

const conflictVerbs = new Set(["update", "patch", "delete"]);

function clampProbability(v: unknown): number | undefined {
  return typeof v === "number" && Number.isFinite(v) ? Math.min(1, Math.max(0, v)) : undefined;
}

function stringList(v: unknown): string[] | undefined {
  return Array.isArray(v) && v.every((x) => typeof x === "string") ? v : undefined;
}

/** Validates untrusted settings from the admin endpoint. */
export function parseFaultSettings(body: unknown): FaultSettings {
  if (!body || typeof body !== "object" || Array.isArray(body))
    throw new Error("fault settings must be an object");
  const b = body as Record<string, unknown>;
  const out: FaultSettings = {};
  const cp = clampProbability(b.conflictProbability);
  if (cp !== undefined) out.conflictProbability = cp;
  const ep = clampProbability(b.errorProbability);
  if (ep !== undefined) out.errorProbability = ep;
  if (b.errorCode !== undefined) {
    if (typeof b.errorCode !== "number" || !injectableCodes.includes(b.errorCode)) {
      throw new Error(`errorCode must be one of ${injectableCodes.join(", ")}`);
    }
    out.errorCode = b.errorCode as InjectedErrorCode;
  }
  if (typeof b.latencyMs === "number" && b.latencyMs >= 0 && b.latencyMs <= 60_000)
    out.latencyMs = b.latencyMs;
  const verbs = stringList(b.verbs);
  if (verbs) out.verbs = verbs;
  const resources = stringList(b.resources);
  if (resources) out.resources = resources;
  if (typeof b.seed === "number") out.seed = b.seed;
  return out;
}

export class FaultInjector {
  private settings: FaultSettings = {};
  private random: () => number = Math.random;

  set(settings: FaultSettings): void {
    this.settings = settings;
    this.random = settings.seed === undefined ? Math.random : seededRandom(settings.seed);
  }

  get current(): FaultSettings {
    return this.settings;
  }

  clear(): void {
    this.set({});
  }

  private applies(verb: string, resource: string): boolean {
    const s = this.settings;
    return (!s.verbs || s.verbs.includes(verb)) && (!s.resources || s.resources.includes(resource));
  }

  latencyFor(verb: string, resource: string): number {
    return this.applies(verb, resource) ? (this.settings.latencyMs ?? 0) : 0;
  }

  /** The injected failure for this request, if the dice say so. */
  failureFor(verb: string, resource: string, name: string): ApiError | undefined {
    if (!this.applies(verb, resource)) return undefined;
    const s = this.settings;
    if (s.errorProbability && this.random() < s.errorProbability) {
      return injectedError(s.errorCode ?? 503, verb, resource, name);
    }
    if (s.conflictProbability && conflictVerbs.has(verb) && this.random() < s.conflictProbability) {
      return new ApiError(
        409,
        "Conflict",
        `Operation cannot be fulfilled on ${resource} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
        { name, kind: resource },
      );
    }
    return undefined;
  }
}

function injectedError(code: InjectedErrorCode, verb: string, resource: string, name: string): ApiError {
  switch (code) {
    case 403:
      // As RBAC refuses a service account without the verb on the resource.
      return new ApiError(
        403,
        "Forbidden",
        `${resource} "${name}" is forbidden: User "system:serviceaccount:sandbox:function" cannot ${verb} resource "${resource}" in API group "" (injected fault)`,
        { name, kind: resource },
      );
    case 429:
      return new ApiError(
        429,
        "TooManyRequests",
        "Too many requests, please try again later. (injected fault)",
        {
          retryAfterSeconds: 1,
        },
      );
    case 500:
      return new ApiError(500, "InternalError", "Internal error occurred: injected fault");
    case 502:
      return new ApiError(502, "InternalError", "bad gateway (injected fault)");
    case 504:
      return new ApiError(
        504,
        "Timeout",
        "the server was unable to return a response in the time allotted (injected fault)",
      );
    case 503:
      return new ApiError(
        503,
        "ServiceUnavailable",
        "the server is currently unable to handle the request (injected fault)",
        {
          retryAfterSeconds: 1,
        },
      );
  }
}
