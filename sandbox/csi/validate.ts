// Request checks every real driver makes before touching anything: required
// fields, well-formed capabilities and capacity ranges. Failures are
// INVALID_ARGUMENT with a message naming the call and the field.
import type { CapacityRange, CsiAccessMode, VolumeCapability } from "../../shared/csi/types.ts";
import { invalidArgument } from "./errors.ts";
import type { VolumeKind } from "./state.ts";

export function requireField(method: string, field: string, value: string | undefined): string {
  if (!value) throw invalidArgument(`${method}: ${field} missing in request`);
  return value;
}

/** int64 from the wire as a number; huge values lose precision, not order. */
export function bytes(method: string, field: string, value: bigint | undefined): number {
  const n = Number(value ?? 0n);
  if (!Number.isFinite(n) || n < 0) throw invalidArgument(`${method}: ${field} must not be negative`);
  return n;
}

export interface Range {
  /** 0 when unset. */
  required: number;
  /** 0 when unset. */
  limit: number;
}

export function capacityRange(method: string, range: CapacityRange | undefined): Range {
  const required = bytes(method, "capacity_range.required_bytes", range?.requiredBytes);
  const limit = bytes(method, "capacity_range.limit_bytes", range?.limitBytes);
  if (limit > 0 && required > limit) {
    throw invalidArgument(
      `${method}: capacity_range.required_bytes ${required} is larger than limit_bytes ${limit}`,
    );
  }
  return { required, limit };
}

/** Whether a volume of this size satisfies the range. */
export function fits(range: Range, sizeBytes: number): boolean {
  return sizeBytes >= range.required && (range.limit === 0 || sizeBytes <= range.limit);
}

const singleNodeMultiWriterModes: readonly CsiAccessMode[] = [
  "SINGLE_NODE_SINGLE_WRITER",
  "SINGLE_NODE_MULTI_WRITER",
];

export function isMultiNode(mode: CsiAccessMode): boolean {
  return mode.startsWith("MULTI_NODE_");
}

/** Why one capability is unusable, or undefined when it is fine. */
export function capabilityProblem(cap: VolumeCapability, singleNodeMultiWriter: boolean): string | undefined {
  const mode = cap.accessMode?.mode ?? "UNKNOWN";
  if (mode === "UNKNOWN") return "access_mode missing";
  if (!singleNodeMultiWriter && singleNodeMultiWriterModes.includes(mode)) {
    return `access mode ${mode} needs the SINGLE_NODE_MULTI_WRITER capability`;
  }
  if (cap.accessType !== "block" && cap.accessType !== "mount") {
    return "access_type missing (block or mount)";
  }
  return undefined;
}

/**
 * Checks a list of capabilities and returns the volume kind they ask for;
 * block and mount together are contradictory.
 */
export function capabilitiesKind(
  method: string,
  field: string,
  caps: readonly VolumeCapability[] | undefined,
  singleNodeMultiWriter: boolean,
): VolumeKind {
  if (!caps || caps.length === 0) throw invalidArgument(`${method}: ${field} missing in request`);
  caps.forEach((cap, i) => {
    const problem = capabilityProblem(cap, singleNodeMultiWriter);
    if (problem) throw invalidArgument(`${method}: ${field}[${i}]: ${problem}`);
  });
  const kinds = new Set(caps.map((c) => c.accessType as VolumeKind));
  if (kinds.size > 1) throw invalidArgument(`${method}: ${field} ask for both block and mount access`);
  return [...kinds][0]!;
}
