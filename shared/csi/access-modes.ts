// Kubernetes access modes -> CSI access modes, as the sidecars map them
// (csi-lib-utils accessmodes). Two tables, chosen by whether the driver has
// the SINGLE_NODE_MULTI_WRITER controller capability:
//
//   Kubernetes          without SNMW                 with SNMW
//   ReadWriteOnce       SINGLE_NODE_WRITER           SINGLE_NODE_MULTI_WRITER
//   ReadOnlyMany        MULTI_NODE_READER_ONLY       MULTI_NODE_READER_ONLY
//   ReadWriteMany       MULTI_NODE_MULTI_WRITER      MULTI_NODE_MULTI_WRITER
//   ReadWriteOncePod    SINGLE_NODE_WRITER           SINGLE_NODE_SINGLE_WRITER
//
// The provisioner sends one VolumeCapability per claim access mode
// (csiAccessModesForClaim); the attacher must pick a single mode for a PV
// with several (csiAccessModeForVolume): ReadWriteOncePod alone wins, then
// ReadWriteMany, ReadOnlyMany with ReadWriteOnce is impossible in CSI, then
// ReadOnlyMany, then ReadWriteOnce.

import type { CsiAccessMode } from "./types.ts";

export type KubeAccessMode = "ReadWriteOnce" | "ReadOnlyMany" | "ReadWriteMany" | "ReadWriteOncePod";

/** The access modes cannot be expressed in CSI; a final error for the object. */
export class AccessModeError extends Error {
  override name = "AccessModeError";
}

/**
 * The one CSI access mode for a volume with these Kubernetes access modes
 * (duplicates are ignored). Throws AccessModeError for combinations CSI
 * cannot express and for lists without a known mode.
 */
export function csiAccessModeForVolume(
  kubeModes: readonly string[],
  singleNodeMultiWriter: boolean,
): CsiAccessMode {
  const modes = new Set(kubeModes);
  if (modes.has("ReadWriteOncePod")) {
    if (modes.size > 1) {
      throw new AccessModeError(
        "Kubernetes does not support use of ReadWriteOncePod with other access modes on the same PersistentVolume",
      );
    }
    // Without SNMW the driver cannot tell pods apart; Kubernetes enforces the single pod.
    return singleNodeMultiWriter ? "SINGLE_NODE_SINGLE_WRITER" : "SINGLE_NODE_WRITER";
  }
  if (modes.has("ReadWriteMany")) return "MULTI_NODE_MULTI_WRITER";
  if (modes.has("ReadOnlyMany") && modes.has("ReadWriteOnce")) {
    throw new AccessModeError(
      "CSI does not support ReadOnlyMany and ReadWriteOnce on the same PersistentVolume",
    );
  }
  if (modes.has("ReadOnlyMany")) return "MULTI_NODE_READER_ONLY";
  if (modes.has("ReadWriteOnce"))
    return singleNodeMultiWriter ? "SINGLE_NODE_MULTI_WRITER" : "SINGLE_NODE_WRITER";
  throw new AccessModeError(`unsupported AccessMode combination: [${kubeModes.join(" ")}]`);
}

/** One CSI access mode per Kubernetes mode, in order (the provisioner's CreateVolume capabilities). */
export function csiAccessModesForClaim(
  kubeModes: readonly string[],
  singleNodeMultiWriter: boolean,
): CsiAccessMode[] {
  return kubeModes.map((mode) => csiAccessModeForVolume([mode], singleNodeMultiWriter));
}
