// kube-apiserver's mutating storage admission plugins, both on by default and
// run before any webhook, on the CREATE of a main resource:
//
//   DefaultStorageClass           a claim with no class at all (neither the beta
//                                 annotation nor spec.storageClassName, "" counts
//                                 as a class) gets the default one: the newest
//                                 class annotated is-default-class "true" (or
//                                 the beta key), ties by name; none: unchanged.
//   StorageObjectInUseProtection  kubernetes.io/pvc-protection on a new claim,
//                                 kubernetes.io/pv-protection on a new PV,
//                                 appended when absent. Not
//                                 kubernetes.io/vac-protection on a new
//                                 VolumeAttributesClass (upstream, with the
//                                 class GA): its remover, kube-controller-manager's
//                                 vac-protection controller, is not played
//                                 here, so a deleted class would wait forever.
//
// PersistentVolumeClaimResize, the validating one, is claim-resize.ts. A
// sandbox started with `disableAdmissionPlugins` is a kube-apiserver run with
// --disable-admission-plugins: our webhooks then do these jobs alone.
import { defaultStorageClass } from "../../shared/kube/claim-class.ts";
import type { StorageClass } from "../../shared/kube/types.ts";
import {
  annBetaStorageClass,
  pvcProtectionFinalizer,
  pvProtectionFinalizer,
} from "../../shared/kube/well-known.ts";
import type { KubeObject } from "./store.ts";

export const STORAGE_ADMISSION_PLUGINS = [
  "DefaultStorageClass",
  "StorageObjectInUseProtection",
  "PersistentVolumeClaimResize",
] as const;

export type StorageAdmissionPlugin = (typeof STORAGE_ADMISSION_PLUGINS)[number];

/**
 * The two that change new objects. A sandbox that runs no protection
 * controller goes without them (or every deleted claim and PV would wait for
 * its finalizer forever), as a kube-apiserver started with
 * --disable-admission-plugins=DefaultStorageClass,StorageObjectInUseProtection.
 */
export const MUTATING_STORAGE_PLUGINS: readonly StorageAdmissionPlugin[] = [
  "DefaultStorageClass",
  "StorageObjectInUseProtection",
];

function specOf(o: KubeObject): Record<string, unknown> | undefined {
  const s = o.spec;
  return s !== null && typeof s === "object" && !Array.isArray(s)
    ? (s as Record<string, unknown>)
    : undefined;
}

function addFinalizer(o: KubeObject, finalizer: string): void {
  const finalizers = o.metadata.finalizers ?? [];
  if (!finalizers.includes(finalizer)) o.metadata.finalizers = [...finalizers, finalizer];
}

/**
 * Applies the enabled mutating plugins to a decoded object about to be
 * created (in place). `classes` is called only when a claim needs a default.
 */
export function admitStorageCreate(
  plural: string,
  group: string,
  o: KubeObject,
  enabled: ReadonlySet<StorageAdmissionPlugin>,
  classes: () => readonly KubeObject[],
): void {
  if (group !== "") return;
  if (plural === "persistentvolumeclaims") {
    if (enabled.has("DefaultStorageClass")) {
      // Before validation the spec may be anything, so not claimHasClass's typed read; the same rule.
      const claimSpec = specOf(o);
      const hasClass =
        o.metadata.annotations?.[annBetaStorageClass] !== undefined ||
        (claimSpec?.storageClassName !== undefined && claimSpec.storageClassName !== null);
      const def = hasClass ? undefined : defaultStorageClass(classes() as readonly StorageClass[]);
      if (def?.metadata.name) o.spec = { ...claimSpec, storageClassName: def.metadata.name };
    }
    if (enabled.has("StorageObjectInUseProtection")) addFinalizer(o, pvcProtectionFinalizer);
  } else if (plural === "persistentvolumes") {
    if (enabled.has("StorageObjectInUseProtection")) addFinalizer(o, pvProtectionFinalizer);
  }
}
