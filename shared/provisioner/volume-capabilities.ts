// CreateVolume's volumeCapabilities for a claim: one capability per access
// mode the claim asks for (upstream maps each mode on its own, so a claim with
// RWO + ROX yields two capabilities rather than the combination error), block
// for `volumeMode: Block`, else mount with the class's fsType and mountOptions.
import { AccessModeError, csiAccessModesForClaim } from "../csi/access-modes.ts";
import type { CsiAccessMode } from "../csi/types.ts";
import type { PersistentVolumeClaim, StorageClass } from "../kube/types.ts";

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
  let modes: CsiAccessMode[];
  try {
    modes = csiAccessModesForClaim(
      claim.spec.accessModes ?? [],
      options.supportsSingleNodeMultiWriter ?? false,
    );
  } catch (err) {
    if (err instanceof AccessModeError) return { ok: false, error: err.message };
    throw err;
  }
  const block = claim.spec.volumeMode === "Block";
  const value = modes.map(
    (mode): VolumeCapability =>
      block
        ? { block: {}, accessMode: { mode } }
        : { mount: { fsType, mountFlags: [...(storageClass.mountOptions ?? [])] }, accessMode: { mode } },
  );
  return { ok: true, value };
}
