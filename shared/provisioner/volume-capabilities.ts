// CreateVolume's volumeCapabilities for a claim: one capability per access
// mode the claim asks for (upstream maps each mode on its own, so a claim with
// RWO + ROX yields two capabilities rather than the combination error), block
// for `volumeMode: Block`, else mount with the class's fsType and mountOptions.
import type { PersistentVolumeClaim, StorageClass } from "../kube/types.ts";

export type CsiAccessMode =
  | "SINGLE_NODE_WRITER"
  | "SINGLE_NODE_READER_ONLY"
  | "MULTI_NODE_READER_ONLY"
  | "MULTI_NODE_SINGLE_WRITER"
  | "MULTI_NODE_MULTI_WRITER"
  | "SINGLE_NODE_SINGLE_WRITER"
  | "SINGLE_NODE_MULTI_WRITER";

export type VolumeCapability =
  | { block: Record<string, never>; accessMode: { mode: CsiAccessMode } }
  | { mount: { fsType: string; mountFlags: string[] }; accessMode: { mode: CsiAccessMode } };

export interface VolumeCapabilityOptions {
  /** The driver reports the controller capability SINGLE_NODE_MULTI_WRITER. */
  supportsSingleNodeMultiWriter?: boolean;
}

export type VolumeCapabilitiesResult = { ok: true; value: VolumeCapability[] } | { ok: false; error: string };

export function volumeCapabilitiesForClaim(
  claim: PersistentVolumeClaim,
  storageClass: StorageClass,
  fsType: string,
  options: VolumeCapabilityOptions = {},
): VolumeCapabilitiesResult {
  const block = claim.spec.volumeMode === "Block";
  const capabilities: VolumeCapability[] = [];
  for (const accessMode of claim.spec.accessModes ?? []) {
    const mode = csiAccessModeFor(accessMode, options.supportsSingleNodeMultiWriter ?? false);
    if (!mode) return { ok: false, error: `unsupported AccessMode combination: [${accessMode}]` };
    capabilities.push(
      block
        ? { block: {}, accessMode: { mode } }
        : { mount: { fsType, mountFlags: [...(storageClass.mountOptions ?? [])] }, accessMode: { mode } },
    );
  }
  return { ok: true, value: capabilities };
}

// NOTE: local copy of csi-lib-utils accessmodes.ToCSIAccessMode for a single
// mode; shared/csi/access-modes.ts (being written) should replace it once it exists.
function csiAccessModeFor(mode: string, singleNodeMultiWriter: boolean): CsiAccessMode | undefined {
  switch (mode) {
    case "ReadWriteOncePod":
      return singleNodeMultiWriter ? "SINGLE_NODE_SINGLE_WRITER" : "SINGLE_NODE_WRITER";
    case "ReadWriteMany":
      return "MULTI_NODE_MULTI_WRITER";
    case "ReadOnlyMany":
      return "MULTI_NODE_READER_ONLY";
    case "ReadWriteOnce":
      return singleNodeMultiWriter ? "SINGLE_NODE_MULTI_WRITER" : "SINGLE_NODE_WRITER";
    default:
      return undefined;
  }
}
