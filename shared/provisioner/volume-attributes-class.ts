// A claim's VolumeAttributesClass at provisioning time, as the external-
// provisioner handles it: the driver must be able to modify volumes, the
// class must be this driver's, and its parameters become CreateVolume's
// mutable_parameters. Pure: the loader reads the class and passes it in.
import type { PersistentVolumeClaim, VolumeAttributesClass } from "../kube/types.ts";

export const vacMessage = {
  modifyVolumeNotSupported:
    "CSI driver does not support VolumeAttributesClass: controller MODIFY_VOLUME capability is not reported",
  /** What client-go says when the GET answers 404. */
  notFound: (name: string) => `volumeattributesclasses.storage.k8s.io "${name}" not found`,
  otherDriver: (name: string, vacDriver: string, driverName: string) =>
    `VAC ${name} referenced in PVC is for driver ${vacDriver} which does not match driver name ${driverName}`,
} as const;

/** The class the claim asks for; "" (unset or empty) is none. */
export function claimVolumeAttributesClassName(claim: PersistentVolumeClaim): string {
  return claim.spec.volumeAttributesClassName ?? "";
}

/**
 * Why the driver cannot serve the claim's class at all, before anything is
 * read (upstream checks it with the other capabilities); undefined when it can
 * or the claim names no class.
 */
export function modifyVolumeCapabilityError(
  claim: PersistentVolumeClaim,
  driverSupportsModifyVolume: boolean,
): string | undefined {
  if (claimVolumeAttributesClassName(claim) === "" || driverSupportsModifyVolume) return undefined;
  return vacMessage.modifyVolumeNotSupported;
}

/** What the class adds to the request and to the PV. */
export interface ClassAttributes {
  /** The class name the PV records. */
  name: string;
  /** CreateVolume's mutable_parameters: the class's parameters as they are. */
  mutableParameters: Record<string, string>;
}

export type ClassAttributesResult = { ok: true; value: ClassAttributes } | { ok: false; error: string };

/** The class the loader read for `name` (undefined: it does not exist), judged for `driverName`. */
export function classAttributes(
  name: string,
  vac: VolumeAttributesClass | undefined,
  driverName: string,
): ClassAttributesResult {
  if (!vac) return { ok: false, error: vacMessage.notFound(name) };
  if (vac.driverName !== driverName)
    return { ok: false, error: vacMessage.otherDriver(name, vac.driverName, driverName) };
  return { ok: true, value: { name, mutableParameters: { ...vac.parameters } } };
}
