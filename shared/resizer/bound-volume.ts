// Whether a claim is one of this resizer's: Bound to a PV of our driver whose
// claimRef names this very claim (upstream pvCanBeExpanded / the modify
// controller's checks). Pure.
import type { PersistentVolume, PersistentVolumeClaim } from "../kube/types.ts";

/** Why the claim is not ours to resize or modify, or undefined when it is. */
export function notOurs(
  claim: PersistentVolumeClaim,
  pv: PersistentVolume | undefined,
  driverName: string,
): string | undefined {
  if (claim.status?.phase !== "Bound") return "claim is not Bound";
  const volumeName = claim.spec.volumeName;
  if (!volumeName) return "claim names no volume";
  if (!pv) return `volume ${volumeName} not found`;
  const driver = pv.spec.csi?.driver;
  if (driver !== driverName) return `volume ${volumeName} is not a CSI volume of ${driverName}`;
  const ref = pv.spec.claimRef;
  if (!ref || ref.namespace !== claim.metadata.namespace || ref.uid !== claim.metadata.uid)
    return `volume ${volumeName} is not bound to this claim`;
  return undefined;
}

/** The claim's namespace/name, as upstream's messages print it (klog.KObj). */
export function claimId(claim: PersistentVolumeClaim): string {
  return `${claim.metadata.namespace ?? ""}/${claim.metadata.name}`;
}
