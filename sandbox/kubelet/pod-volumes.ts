// Which CSI volumes a pod on this node needs, resolved as the kubelet's
// desired-state populator does: each claim must exist and be bound to a PV
// that is bound back to it; the PV's CSI source gives the driver, handle,
// capability, context and whether the driver needs an attach (its CSIDriver
// says attachRequired: false, or it must be attached). Pure.

import { uniqueVolumeName } from "../../shared/attach-detach/volume-attachment-name.ts";
import { AccessModeError, csiAccessModeForVolume } from "../../shared/csi/access-modes.ts";
import type { VolumeCapability } from "../../shared/csi/types.ts";
import { ephemeralClaimName } from "../../shared/kube/pod-claims.ts";
import type { CSIDriver, PersistentVolume, PersistentVolumeClaim, Pod } from "../../shared/kube/types.ts";

export interface PodVolumeView {
  claim(namespace: string, name: string): PersistentVolumeClaim | undefined;
  volume(name: string): PersistentVolume | undefined;
  csiDriver(name: string): CSIDriver | undefined;
}

export interface CsiVolumeToMount {
  /** kubernetes.io/csi/<driver>^<handle> */
  uniqueName: string;
  /** The PV's name: the volume's name in events and paths. */
  pvName: string;
  driver: string;
  volumeHandle: string;
  attachRequired: boolean;
  block: boolean;
  capability: VolumeCapability;
  readonly: boolean;
  volumeContext: Record<string, string>;
}

export type PodVolumes = { ready: true; volumes: CsiVolumeToMount[] } | { ready: false; reason: string };

export function resolvePodVolumes(pod: Pod, view: PodVolumeView): PodVolumes {
  const namespace = pod.metadata.namespace ?? "default";
  const volumes: CsiVolumeToMount[] = [];
  for (const v of pod.spec.volumes ?? []) {
    const claimName =
      v.persistentVolumeClaim?.claimName ?? (v.ephemeral ? ephemeralClaimName(pod, v) : undefined);
    if (!claimName) continue;
    const claim = view.claim(namespace, claimName);
    if (!claim) return { ready: false, reason: `persistentvolumeclaim "${claimName}" not found` };
    const pvName = claim.spec.volumeName;
    const pv = pvName ? view.volume(pvName) : undefined;
    if (!pvName || !pv || claim.status?.phase !== "Bound") {
      return { ready: false, reason: `PVC ${namespace}/${claimName} is not bound` };
    }
    if (pv.spec.claimRef?.uid !== claim.metadata.uid) {
      return { ready: false, reason: `PV ${pvName} is not bound back to PVC ${namespace}/${claimName}` };
    }
    const csi = pv.spec.csi;
    // Only CSI volumes are mounted in the sandbox; others have nothing to do.
    if (!csi) continue;
    let mode: ReturnType<typeof csiAccessModeForVolume>;
    try {
      mode = csiAccessModeForVolume(pv.spec.accessModes ?? [], false);
    } catch (err) {
      if (err instanceof AccessModeError) return { ready: false, reason: `PV ${pvName}: ${err.message}` };
      throw err;
    }
    const block = pv.spec.volumeMode === "Block";
    const capability: VolumeCapability = block
      ? { block: {}, accessMode: { mode } }
      : { mount: { fsType: csi.fsType ?? "", mountFlags: pv.spec.mountOptions ?? [] }, accessMode: { mode } };
    volumes.push({
      uniqueName: uniqueVolumeName(csi.driver, csi.volumeHandle),
      pvName,
      driver: csi.driver,
      volumeHandle: csi.volumeHandle,
      attachRequired: view.csiDriver(csi.driver)?.spec.attachRequired !== false,
      block,
      capability,
      readonly: v.persistentVolumeClaim?.readOnly === true || csi.readOnly === true,
      volumeContext: { ...csi.volumeAttributes },
    });
  }
  return { ready: true, volumes };
}
