// Whether a PV may be attached to several nodes at once, which the
// attach/detach controller and the attacher both enforce.
import type { PersistentVolume } from "./types.ts";

/** RWX or ROX lets a volume attach to several nodes; RWO/RWOP alone do not (an empty list: let the driver decide). */
export function isMultiAttachAllowed(pv: PersistentVolume): boolean {
  const modes = pv.spec.accessModes ?? [];
  if (modes.length === 0) return true;
  return modes.includes("ReadWriteMany") || modes.includes("ReadOnlyMany");
}
