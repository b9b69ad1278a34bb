// The mutable parameters (VolumeAttributesClass parameters) the sandbox
// driver accepts in CreateVolume, ControllerModifyVolume and
// ValidateVolumeCapabilities. Anything else is INVALID_ARGUMENT, which the
// external-resizer treats as infeasible:
//
//   iops        a positive integer, at most 1000000
//   throughput  a positive integer (MiB/s), at most 100000
//   tier        "standard", "premium" or "archive"
//
// Keys under csi.storage.k8s.io/ are the sidecars' metadata
// (--extra-modify-metadata adds pvc/name, pvc/namespace, pv/name): accepted
// and not recorded, as real drivers strip them.
import { invalidArgument } from "./errors.ts";

const metadataPrefix = "csi.storage.k8s.io/";

const positiveInteger =
  (max: number) =>
  (value: string): string | undefined =>
    /^[1-9][0-9]*$/.test(value) && Number(value) <= max
      ? undefined
      : `must be a positive integer of at most ${max}`;

const tiers = ["standard", "premium", "archive"];

const rules: Readonly<Record<string, (value: string) => string | undefined>> = {
  iops: positiveInteger(1_000_000),
  throughput: positiveInteger(100_000),
  tier: (value) => (tiers.includes(value) ? undefined : `must be one of ${tiers.join(", ")}`),
};

export const mutableParameterKeys: readonly string[] = Object.keys(rules);

/** Why a set of mutable parameters is not acceptable, or undefined. */
export function mutableParametersProblem(params: Readonly<Record<string, string>>): string | undefined {
  for (const [key, value] of Object.entries(params).sort(([a], [b]) => a.localeCompare(b))) {
    if (key.startsWith(metadataPrefix)) continue;
    const rule = Object.hasOwn(rules, key) ? rules[key] : undefined;
    if (!rule) {
      return `mutable parameter ${JSON.stringify(key)} is not supported (supported: ${mutableParameterKeys.join(", ")})`;
    }
    const problem = rule(value);
    if (problem) return `mutable parameter ${key}=${JSON.stringify(value)} ${problem}`;
  }
  return undefined;
}

/** The parameters to record (sidecar metadata dropped); INVALID_ARGUMENT on anything unsupported. */
export function checkMutableParameters(
  method: string,
  params: Readonly<Record<string, string>>,
): Record<string, string> {
  const problem = mutableParametersProblem(params);
  if (problem) throw invalidArgument(`${method}: ${problem}`);
  return Object.fromEntries(Object.entries(params).filter(([key]) => !key.startsWith(metadataPrefix)));
}
