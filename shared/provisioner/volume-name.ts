// The CreateVolume name (and PV name) for a claim: derived from the claim's
// UID alone, so every retry, by any instance, asks the driver for the same
// volume (CreateVolume is idempotent by name).
import type { PersistentVolumeClaim } from "../kube/types.ts";

export interface VolumeNameOptions {
  /** --volume-name-prefix (default "pvc"). */
  prefix?: string;
  /** --volume-name-uuid-length: -1 (default) keeps the UID as is; n >= 0 strips its dashes and keeps n characters. */
  uuidLength?: number;
}

export type VolumeNameResult = { ok: true; value: string } | { ok: false; error: string };

export function volumeNameForClaim(
  claim: PersistentVolumeClaim,
  options: VolumeNameOptions = {},
): VolumeNameResult {
  const prefix = options.prefix ?? "pvc";
  const uuidLength = options.uuidLength ?? -1;
  const uid = claim.metadata.uid ?? "";
  if (prefix.length === 0) return { ok: false, error: "volume name prefix cannot be of length 0" };
  if (uid.length === 0) return { ok: false, error: "corrupted PVC object, it is missing UID" };
  if (uuidLength < 0) return { ok: true, value: `${prefix}-${uid}` };
  const compact = uid.replaceAll("-", "");
  // Upstream would panic slicing past the end; an error is the useful equivalent.
  if (uuidLength > compact.length) {
    return {
      ok: false,
      error: `volume name UUID length ${uuidLength} is longer than the claim UID without dashes (${compact.length})`,
    };
  }
  return { ok: true, value: `${prefix}-${compact.slice(0, uuidLength)}` };
}
