// The admission function's settings, from the environment. Checked at start
// so a typo fails the process instead of the first review.
//
//   PROVISIONER_DRIVERS                      ""     provisioner names our provisioner function serves (comma-separated)
//   ADMISSION_LOOKUP_TIMEOUT_MS              2000   deadline per API lookup (below kube-apiserver's webhook timeout)
//   ADMISSION_CACHE_TTL_MS                   5000   how long looked-up StorageClasses/CSIDrivers are reused (0 = not)
//   ADMISSION_CACHE_MAX_ENTRIES              1000   CSIDriver names kept at most
//   ADMISSION_FAILURE_POLICY_MUTATE_PVC      Ignore when StorageClasses cannot be read: admit without the class-dependent changes, with a warning
//   ADMISSION_FAILURE_POLICY_VALIDATE_PVC    Fail   when an expansion's StorageClass cannot be read: deny (retry later)
//   ADMISSION_FAILURE_POLICY_VALIDATE_VA     Fail   when the attacher's CSIDriver cannot be read: deny (retry later)

import { driverNamesFromEnv, integerFromEnv } from "../config.ts";

/** What a hook does when a lookup it needs fails: admit without it (with a warning), or deny. */
export type FailurePolicy = "Ignore" | "Fail";

export interface AdmissionConfig {
  provisionerDrivers: ReadonlySet<string>;
  lookupTimeoutMs: number;
  cacheTtlMs: number;
  cacheMaxEntries: number;
  failurePolicy: {
    mutateClaims: FailurePolicy;
    validateClaims: FailurePolicy;
    validateAttachments: FailurePolicy;
  };
}

/**
 * Knative keeps its own webhooks at 2 s and kube-apiserver's default webhook
 * timeout is 10 s: 2 s leaves room for the rest of the review and the network.
 */
export const DEFAULT_LOOKUP_TIMEOUT_MS = 2_000;
export const DEFAULT_CACHE_TTL_MS = 5_000;
export const DEFAULT_CACHE_MAX_ENTRIES = 1_000;

export function defaultAdmissionConfig(): AdmissionConfig {
  return {
    provisionerDrivers: new Set(),
    lookupTimeoutMs: DEFAULT_LOOKUP_TIMEOUT_MS,
    cacheTtlMs: DEFAULT_CACHE_TTL_MS,
    cacheMaxEntries: DEFAULT_CACHE_MAX_ENTRIES,
    failurePolicy: { mutateClaims: "Ignore", validateClaims: "Fail", validateAttachments: "Fail" },
  };
}

function policy(env: NodeJS.ProcessEnv, key: string, fallback: FailurePolicy): FailurePolicy {
  const raw = env[key]?.trim().toLowerCase();
  if (raw === undefined || raw === "") return fallback;
  if (raw === "ignore") return "Ignore";
  if (raw === "fail") return "Fail";
  throw new Error(`${key} must be Ignore or Fail, got ${JSON.stringify(env[key])}`);
}

export function admissionConfigFromEnv(env: NodeJS.ProcessEnv = process.env): AdmissionConfig {
  const defaults = defaultAdmissionConfig();
  return {
    provisionerDrivers: driverNamesFromEnv(env, "PROVISIONER_DRIVERS"),
    lookupTimeoutMs: integerFromEnv(env, "ADMISSION_LOOKUP_TIMEOUT_MS", defaults.lookupTimeoutMs, {
      min: 1,
      max: 30_000,
    }),
    cacheTtlMs: integerFromEnv(env, "ADMISSION_CACHE_TTL_MS", defaults.cacheTtlMs, { min: 0, max: 300_000 }),
    cacheMaxEntries: integerFromEnv(env, "ADMISSION_CACHE_MAX_ENTRIES", defaults.cacheMaxEntries, {
      min: 1,
      max: 1_000_000,
    }),
    failurePolicy: {
      mutateClaims: policy(env, "ADMISSION_FAILURE_POLICY_MUTATE_PVC", defaults.failurePolicy.mutateClaims),
      validateClaims: policy(
        env,
        "ADMISSION_FAILURE_POLICY_VALIDATE_PVC",
        defaults.failurePolicy.validateClaims,
      ),
      validateAttachments: policy(
        env,
        "ADMISSION_FAILURE_POLICY_VALIDATE_VA",
        defaults.failurePolicy.validateAttachments,
      ),
    },
  };
}
