// Annotation keys, phases, Event reasons and messages of the PersistentVolume
// controller, with the exact spelling kubectl users and other controllers see.

export const annPreResizeCapacity = "volume.alpha.kubernetes.io/pre-resize-capacity";
export const annMigratedTo = "pv.kubernetes.io/migrated-to";

export const eventSource = "persistentvolume-controller";

export const claimPhase = { pending: "Pending", bound: "Bound", lost: "Lost" } as const;
export const volumePhase = {
  pending: "Pending",
  available: "Available",
  bound: "Bound",
  released: "Released",
  failed: "Failed",
} as const;

export const reason = {
  failedBinding: "FailedBinding",
  volumeMismatch: "VolumeMismatch",
  claimLost: "ClaimLost",
  claimMisbound: "ClaimMisbound",
  waitForFirstConsumer: "WaitForFirstConsumer",
  waitForPodScheduled: "WaitForPodScheduled",
  externalProvisioning: "ExternalProvisioning",
  provisioningFailed: "ProvisioningFailed",
  volumeUnknownReclaimPolicy: "VolumeUnknownReclaimPolicy",
  volumeFailedRecycle: "VolumeFailedRecycle",
  volumeFailedDelete: "VolumeFailedDelete",
} as const;

export const message = {
  noVolumeNoClass: "no persistent volumes available for this claim and no storage class is set",
  alreadyBoundElsewhere: (volume: string) => `volume "${volume}" already bound to a different claim.`,
  cannotBindRequested: (volume: string, why: string) => `Cannot bind to requested volume "${volume}": ${why}`,
  waitForFirstConsumer: "waiting for first consumer to be created before binding",
  waitForPod: (pod: string) => `waiting for pod ${pod} to be scheduled`,
  waitForPods: (pods: string[]) => `waiting for pods ${pods.join(",")} to be scheduled`,
  lostReference: "Bound claim has lost reference to PersistentVolume. Data on the volume is lost!",
  lostVolume: "Bound claim has lost its PersistentVolume. Data on the volume is lost!",
  misbound: "Two claims are bound to the same volume, this one is bound incorrectly",
  unknownReclaimPolicy: "Volume has unrecognized PersistentVolumeReclaimPolicy",
  noRecycler: "No recycler plugin found for the volume!",
  volumeUsedByPods: (pods: string[]) => `Volume is used by pods: ${pods.join(",")}`,
  externalProvisioning: (provisioner: string) =>
    `Waiting for a volume to be created either by the external provisioner '${provisioner}' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered.`,
  volumeModeMismatchOnVolume: (claim: string) =>
    `Cannot bind PersistentVolume to requested PersistentVolumeClaim "${claim}" due to incompatible volumeMode.`,
  volumeModeMismatchOnClaim: (volume: string) =>
    `Cannot bind PersistentVolume "${volume}" to requested PersistentVolumeClaim due to incompatible volumeMode.`,
  classNotFound: (cls: string) => `storageclass.storage.k8s.io "${cls}" not found`,
  noProvisionablePlugin: (provisioner: string) => `no volume plugin matched name: ${provisioner}`,
  noDeleter: (volume: string) =>
    `error getting deleter volume plugin for volume "${volume}": no deletable volume plugin matched`,
} as const;
