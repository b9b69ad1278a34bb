// Keys, Event reasons and messages of the CSI external-provisioner (and
// sig-storage-lib-external-provisioner), spelled as upstream spells them.

export const annDeletionSecretName = "volume.kubernetes.io/provisioner-deletion-secret-name";
export const annDeletionSecretNamespace = "volume.kubernetes.io/provisioner-deletion-secret-namespace";
export const provisionerIdentityKey = "storage.kubernetes.io/csiProvisionerIdentity";

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
