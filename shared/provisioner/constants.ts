// Keys, finalizers, Event reasons and messages of the CSI external-provisioner
// (and sig-storage-lib-external-provisioner), spelled as upstream spells them,
// plus the one finalizer of our own that makes provisioning leak-proof.

export const annStorageProvisioner = "volume.kubernetes.io/storage-provisioner";
export const annBetaStorageProvisioner = "volume.beta.kubernetes.io/storage-provisioner";
export const annSelectedNode = "volume.kubernetes.io/selected-node";
export const annDynamicallyProvisioned = "pv.kubernetes.io/provisioned-by";
export const annDeletionSecretName = "volume.kubernetes.io/provisioner-deletion-secret-name";
export const annDeletionSecretNamespace = "volume.kubernetes.io/provisioner-deletion-secret-namespace";
export const provisionerIdentityKey = "storage.kubernetes.io/csiProvisionerIdentity";

/** Upstream's PV finalizer: the backing volume must be deleted before the PV object goes. */
export const pvFinalizer = "external-provisioner.volume.kubernetes.io/finalizer";

/**
 * Ours, on the claim: "a backing volume may exist for this claim that no PV
 * records yet". Set before CreateVolume is ever called (by the admission
 * webhook at creation, or by the provisioner), removed only once a PV
 * records the volume or the volume is known not to exist. A claim deleted
 * mid-provisioning therefore waits for the cleanup instead of leaking.
 */
export const provisioningFinalizer = "storage.kube-storage-functions.io/provisioning";
/** Backoff that must survive the process: failures so far and the earliest next try. */
export const annProvisioningFailures = "storage.kube-storage-functions.io/provisioning-failures";
export const annProvisioningRetryAfter = "storage.kube-storage-functions.io/provisioning-retry-after";

export const reason = {
  provisioning: "Provisioning",
  provisioningSucceeded: "ProvisioningSucceeded",
  provisioningFailed: "ProvisioningFailed",
  volumeFailedDelete: "VolumeFailedDelete",
} as const;

export const message = {
  provisioning: (claimKey: string) => `External provisioner is provisioning volume for claim "${claimKey}"`,
  succeeded: (volume: string) => `Successfully provisioned volume ${volume}`,
  failed: (cls: string, err: string) => `failed to provision volume with StorageClass "${cls}": ${err}`,
  infeasible: "Volume provisioning failed with infeasible error. Retries will be delayed.",
  selectorNotSupported: "claim Selector is not supported",
  classNotFound: (cls: string) => `storageclass.storage.k8s.io "${cls}" not found`,
  stillAttached: (pv: string, node: string) => `persistentvolume ${pv} is still attached to node ${node}`,
} as const;
