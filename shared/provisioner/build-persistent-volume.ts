// The PersistentVolume that records a volume the driver created, built the
// way the external-provisioner builds it: name = volume name, spec.csi from
// the response, policy and mount options from the class, node affinity from
// the accessible topology, pre-bound to the claim with its uid, and the
// VolumeAttributesClass whose parameters the volume was created with.
import type { Volume } from "../csi/types.ts";
import { formatBytes, parseQuantityBytes } from "../kube/quantity.ts";
import type {
  PersistentVolume,
  PersistentVolumeClaim,
  SecretReference,
  StorageClass,
} from "../kube/types.ts";
import {
  annControllerModifySecretName,
  annControllerModifySecretNamespace,
  annDynamicallyProvisioned,
  pvDeletionProtectionFinalizer,
} from "../kube/well-known.ts";
import type { SecretKind } from "./class-parameters.ts";
import { annDeletionSecretName, annDeletionSecretNamespace, provisionerIdentityKey } from "./constants.ts";
import type { SecretRef } from "./secret-templates.ts";
import { nodeAffinityFromTopology } from "./topology.ts";

export interface BuildVolumeInput {
  claim: PersistentVolumeClaim;
  storageClass: StorageClass;
  pvName: string;
  driverName: string;
  identity: string;
  fsType: string;
  volume: Volume;
  secretRefs: Partial<Record<SecretKind, SecretRef>>;
  /** The VolumeAttributesClass whose parameters CreateVolume carried; "" or undefined: none. */
  volumeAttributesClassName?: string | undefined;
  /** spec.csi.readOnly, passed to ControllerPublishVolume (--controller-publish-readonly). */
  readOnly?: boolean;
}

export type BuildVolumeResult =
  | { ok: true; value: PersistentVolume }
  /** The driver made a smaller volume than asked: upstream deletes it and retries. */
  | { ok: false; error: string; tooSmall: true };

function ref(r: SecretRef | undefined): SecretReference | undefined {
  return r ? { name: r.name, namespace: r.namespace } : undefined;
}

export function buildPersistentVolume(input: BuildVolumeInput): BuildVolumeResult {
  const { claim, storageClass, volume } = input;
  const requested = parseQuantityBytes(claim.spec.resources?.requests?.storage ?? "0");
  // A driver that reports 0 leaves the size unknown: record what was asked for.
  const bytes = volume.capacityBytes === 0n ? requested : volume.capacityBytes;
  if (bytes < requested) {
    return {
      ok: false,
      tooSmall: true,
      error: `created volume capacity ${bytes} less than requested capacity ${requested}`,
    };
  }
  const block = claim.spec.volumeMode === "Block";
  const policy = storageClass.reclaimPolicy ?? "Delete";
  const refs = input.secretRefs;
  const csi: PersistentVolume["spec"]["csi"] = {
    driver: input.driverName,
    volumeHandle: volume.volumeId,
    // Upstream sets the identity first and copies volume_context over it.
    volumeAttributes: { [provisionerIdentityKey]: input.identity, ...volume.volumeContext },
    ...(!block && input.fsType ? { fsType: input.fsType } : {}),
    ...(input.readOnly ? { readOnly: true } : {}),
    ...(refs.controllerPublish ? { controllerPublishSecretRef: ref(refs.controllerPublish) } : {}),
    ...(refs.nodeStage ? { nodeStageSecretRef: ref(refs.nodeStage) } : {}),
    ...(refs.nodePublish ? { nodePublishSecretRef: ref(refs.nodePublish) } : {}),
    ...(refs.controllerExpand ? { controllerExpandSecretRef: ref(refs.controllerExpand) } : {}),
    ...(refs.nodeExpand ? { nodeExpandSecretRef: ref(refs.nodeExpand) } : {}),
  };
  // Deletion uses the provisioner's secret; the class may be gone by then. Upstream always
  // writes the pair, empty without a provisioner secret ("no secrets", not "ask the class").
  const annotations: Record<string, string> = {
    [annDynamicallyProvisioned]: input.driverName,
    [annDeletionSecretName]: refs.provisioner?.name ?? "",
    [annDeletionSecretNamespace]: refs.provisioner?.namespace ?? "",
  };
  // The resizer's ControllerModifyVolume secret; written only when the class names one.
  if (refs.controllerModify) {
    annotations[annControllerModifySecretName] = refs.controllerModify.name;
    annotations[annControllerModifySecretNamespace] = refs.controllerModify.namespace;
  }
  const nodeAffinity = nodeAffinityFromTopology(volume.accessibleTopology);
  const pv: PersistentVolume = {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: {
      name: input.pvName,
      annotations,
      // The finalizer keeps the PV until the backing volume is deleted; only Delete volumes get deleted.
      ...(policy === "Delete" ? { finalizers: [pvDeletionProtectionFinalizer] } : {}),
    },
    spec: {
      accessModes: [...(claim.spec.accessModes ?? [])],
      capacity: { storage: formatBytes(bytes) },
      claimRef: {
        kind: "PersistentVolumeClaim",
        apiVersion: "v1",
        namespace: claim.metadata.namespace,
        name: claim.metadata.name,
        uid: claim.metadata.uid,
        resourceVersion: claim.metadata.resourceVersion,
      },
      persistentVolumeReclaimPolicy: policy,
      storageClassName: storageClass.metadata.name,
      volumeMode: claim.spec.volumeMode ?? "Filesystem",
      csi,
      ...(storageClass.mountOptions?.length ? { mountOptions: [...storageClass.mountOptions] } : {}),
      ...(nodeAffinity ? { nodeAffinity } : {}),
      ...(input.volumeAttributesClassName
        ? { volumeAttributesClassName: input.volumeAttributesClassName }
        : {}),
    },
  };
  return { ok: true, value: pv };
}
