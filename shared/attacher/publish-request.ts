// ControllerPublishVolume and ControllerUnpublishVolume requests from the
// attachment's CSI source (upstream csiAttach / GetVolumeCapabilities):
// one capability, block or mount, with one access mode chosen from all the
// PV's modes; readonly only when the driver has PUBLISH_READONLY.
import { AccessModeError, csiAccessModeForVolume } from "../csi/access-modes.ts";
import type {
  ControllerPublishVolumeRequest,
  ControllerUnpublishVolumeRequest,
  VolumeCapability,
} from "../csi/types.ts";
import type { CSIPersistentVolumeSource, PersistentVolumeSpec } from "../kube/types.ts";

export interface PublishOptions {
  /** The driver has PUBLISH_READONLY; without it the CSI spec wants readonly=false. */
  publishReadonly: boolean;
  singleNodeMultiWriter: boolean;
  /** --default-fstype: used when the PV names no fsType ("" = send none). */
  defaultFsType: string;
}

type CapabilityResult = { ok: true; value: VolumeCapability } | { ok: false; error: string };

export function volumeCapabilityFor(
  spec: PersistentVolumeSpec,
  csi: CSIPersistentVolumeSource,
  options: Pick<PublishOptions, "singleNodeMultiWriter" | "defaultFsType">,
): CapabilityResult {
  let mode: ReturnType<typeof csiAccessModeForVolume>;
  try {
    mode = csiAccessModeForVolume(spec.accessModes ?? [], options.singleNodeMultiWriter);
  } catch (err) {
    if (err instanceof AccessModeError) return { ok: false, error: err.message };
    throw err;
  }
  if (spec.volumeMode === "Block") return { ok: true, value: { block: {}, accessMode: { mode } } };
  const fsType = csi.fsType || options.defaultFsType;
  return {
    ok: true,
    value: { mount: { fsType, mountFlags: [...(spec.mountOptions ?? [])] }, accessMode: { mode } },
  };
}

/** The readonly flag the driver gets: the PV's, unless the driver cannot honour it. */
function publishReadonlyFlag(csi: CSIPersistentVolumeSource, publishReadonly: boolean): boolean {
  return publishReadonly ? csi.readOnly === true : false;
}

/** `capability` from volumeCapabilityFor: upstream checks it before it reads secrets and the node id. */
export function buildPublishRequest(input: {
  csi: CSIPersistentVolumeSource;
  capability: VolumeCapability;
  nodeId: string;
  secrets: Record<string, string> | undefined;
  publishReadonly: boolean;
}): ControllerPublishVolumeRequest {
  return {
    volumeId: input.csi.volumeHandle,
    nodeId: input.nodeId,
    volumeCapability: input.capability,
    readonly: publishReadonlyFlag(input.csi, input.publishReadonly),
    ...(input.secrets ? { secrets: input.secrets } : {}),
    volumeContext: { ...(input.csi.volumeAttributes ?? {}) },
  };
}

export function buildUnpublishRequest(input: {
  csi: CSIPersistentVolumeSource;
  nodeId: string;
  secrets: Record<string, string> | undefined;
}): ControllerUnpublishVolumeRequest {
  return {
    volumeId: input.csi.volumeHandle,
    nodeId: input.nodeId,
    ...(input.secrets ? { secrets: input.secrets } : {}),
  };
}
