// Which volume a VolumeAttachment is about: the PV it names or the inline
// spec it carries (CSI migration of inline volumes), exactly one of them, and
// its CSI source. Error texts are upstream's (csi_handler.go csiAttach /
// csiDetach / getProcessedPVSpec), since they end up in VA status.

import { isMultiAttachAllowed } from "../kube/multi-attach.ts";
import type {
  CSIPersistentVolumeSource,
  PersistentVolume,
  PersistentVolumeSpec,
  VolumeAttachment,
} from "../kube/types.ts";
import { annAttachLock } from "../kube/well-known.ts";

type SourceResult =
  | {
      ok: true;
      /** The PV spec or the inline spec: access modes, volume mode, mount options. */
      spec: PersistentVolumeSpec;
      csi: CSIPersistentVolumeSource;
      /** Set when the source is a PV. */
      pv?: PersistentVolume;
    }
  | { ok: false; error: string };

export const sourceErrors = {
  both: "both InlineCSIVolumeSource and PersistentVolumeName specified in VA source",
  neither: "neither InlineCSIVolumeSource nor PersistentVolumeName specified in VA source",
  inlineWithoutCsi: "inline volume spec contains nil CSI source",
  notCsi: "pv spec contained non-csi source that was not migrated",
  pvNotFound: (name: string) => `persistentvolume "${name}" not found`,
  pvDeleting: (name: string) => `PersistentVolume "${name}" is marked for deletion`,
  reservedElsewhere: (name: string, node: string) =>
    `PersistentVolume "${name}" is reserved for node "${node}" by the attach/detach controller (single-node access mode)`,
} as const;

/** The PV name the attachment references, if it references one. */
export function attachedVolumeName(va: VolumeAttachment): string | undefined {
  return va.spec.source.persistentVolumeName ?? undefined;
}

/** The shape of the source alone, before any PV is read. */
function checkSourceShape(va: VolumeAttachment): { ok: true } | { ok: false; error: string } {
  const { persistentVolumeName, inlineVolumeSpec } = va.spec.source;
  if (persistentVolumeName && inlineVolumeSpec) return { ok: false, error: sourceErrors.both };
  if (!persistentVolumeName && !inlineVolumeSpec) return { ok: false, error: sourceErrors.neither };
  return { ok: true };
}

/**
 * The CSI source of the attachment. `pv` is the PV named by the attachment,
 * undefined when it does not exist. `forAttach` refuses a PV that is being
 * deleted (upstream attaches nothing to a dying volume but still detaches it).
 */
export function resolveSource(
  va: VolumeAttachment,
  pv: PersistentVolume | undefined,
  options: { forAttach: boolean },
): SourceResult {
  const shape = checkSourceShape(va);
  if (!shape.ok) return shape;
  const pvName = va.spec.source.persistentVolumeName;
  if (pvName) {
    // Observed: the VA names a PV; it must exist and (for attach) not be dying.
    if (!pv) return { ok: false, error: sourceErrors.pvNotFound(pvName) };
    if (options.forAttach && pv.metadata.deletionTimestamp)
      return { ok: false, error: sourceErrors.pvDeleting(pv.metadata.name) };
    if (!pv.spec.csi) return { ok: false, error: sourceErrors.notCsi };
    // The fence behind the attach/detach controller's lock: a single-node volume reserved for another
    // node is never published here, even if a stale reconcile created this attachment.
    const reservedFor = pv.metadata.annotations?.[annAttachLock];
    if (options.forAttach && reservedFor && reservedFor !== va.spec.nodeName && !isMultiAttachAllowed(pv))
      return { ok: false, error: sourceErrors.reservedElsewhere(pv.metadata.name, reservedFor) };
    return { ok: true, spec: pv.spec, csi: pv.spec.csi, pv };
  }
  // Observed: an inline spec (a migrated in-line volume); it must carry a CSI source.
  const inline = va.spec.source.inlineVolumeSpec as PersistentVolumeSpec;
  if (!inline.csi) return { ok: false, error: sourceErrors.inlineWithoutCsi };
  return { ok: true, spec: inline, csi: inline.csi };
}
