// The warnings kube-apiserver attaches to PVC and PV writes
// (GetWarningsForPersistentVolumeClaim / GetWarningsForPersistentVolume).
// kube-apiserver drops a warning text it has already recorded for the
// request, so repeating one the API server also emits is harmless.

import { parseQuantityMilli } from "../kube/quantity.ts";
import type { PersistentVolume, PersistentVolumeClaim } from "../kube/types.ts";
import { annBetaStorageClass } from "../kube/well-known.ts";
import { message } from "./constants.ts";

const betaClassField = `metadata.annotations[${annBetaStorageClass}]`;

function fractional(text: string | undefined): boolean {
  if (text === undefined) return false;
  try {
    return parseQuantityMilli(text) % 1000n !== 0n;
  } catch {
    return false; // unparsable sizes are validation's business, not a warning
  }
}

export function claimWarnings(claim: PersistentVolumeClaim): string[] {
  const warnings: string[] = [];
  if (claim.metadata.annotations?.[annBetaStorageClass] !== undefined)
    warnings.push(`${betaClassField}: ${message.deprecatedBetaClass}`);
  for (const kind of ["requests", "limits"] as const) {
    const value = claim.spec.resources?.[kind]?.storage;
    if (value !== undefined && fractional(value))
      warnings.push(`spec.resources.${kind}[storage]: ${message.fractionalBytes(value)}`);
  }
  return warnings;
}

export function volumeWarnings(volume: PersistentVolume): string[] {
  const warnings: string[] = [];
  if (volume.metadata.annotations?.[annBetaStorageClass] !== undefined)
    warnings.push(`${betaClassField}: ${message.deprecatedBetaClass}`);
  if (volume.spec.persistentVolumeReclaimPolicy === "Recycle")
    warnings.push(`spec.persistentVolumeReclaimPolicy: ${message.deprecatedRecycle}`);
  return warnings;
}
