// Annotation keys and finalizers that more than one controller reads or
// writes, spelled as Kubernetes spells them (pkg/controller/volume/
// persistentvolume/util, component-helpers/storage/volume, the
// storage-class admission plugin), plus the two of our own that cross
// controllers. Keys only one controller uses stay in its constants.ts.

/** On a PV: the provisioner that created it. */
export const annDynamicallyProvisioned = "pv.kubernetes.io/provisioned-by";
/** On a claim: the provisioner expected to create its volume. */
export const annStorageProvisioner = "volume.kubernetes.io/storage-provisioner";
export const annBetaStorageProvisioner = "volume.beta.kubernetes.io/storage-provisioner";
/** On a WaitForFirstConsumer claim: the node the scheduler picked. */
export const annSelectedNode = "volume.kubernetes.io/selected-node";
/** On a claim: the binder finished binding it. */
export const annBindCompleted = "pv.kubernetes.io/bind-completed";
/** On a claim or PV: the binder (not the user) bound it. */
export const annBoundByController = "pv.kubernetes.io/bound-by-controller";
/** The deprecated class annotation; it wins over spec.storageClassName. */
export const annBetaStorageClass = "volume.beta.kubernetes.io/storage-class";
/** On a StorageClass: "true" marks the default class. */
export const annDefaultClass = "storageclass.kubernetes.io/is-default-class";
export const annBetaDefaultClass = "storageclass.beta.kubernetes.io/is-default-class";

/** StorageObjectInUseProtection: stays on a claim while a pod uses it. */
export const pvcProtectionFinalizer = "kubernetes.io/pvc-protection";
/** StorageObjectInUseProtection: stays on a PV while it is bound. */
export const pvProtectionFinalizer = "kubernetes.io/pv-protection";
/** Upstream's PVDeletionProtectionFinalizer: the backing volume goes before the PV object does. */
export const pvDeletionProtectionFinalizer = "external-provisioner.volume.kubernetes.io/finalizer";

/**
 * Ours, on the claim: "a backing volume may exist for this claim that no PV
 * records yet". Set before CreateVolume is ever called (by the admission
 * webhook at creation, or by the provisioner), removed only once a PV
 * records the volume or the volume is known not to exist. A claim deleted
 * mid-provisioning therefore waits for the cleanup instead of leaking.
 */
export const provisioningFinalizer = "storage.kube-storage-functions.io/provisioning";

/**
 * Ours, on a single-node (RWO/RWOP) PV: the node it is reserved for. Taken
 * with a conditional write before a VolumeAttachment is created and released
 * once no VolumeAttachment for that node is left, so two reconciles running
 * at once for different nodes can never attach the volume twice.
 */
export const annAttachLock = "attachdetach.kube-storage-functions.io/node";

/**
 * On a Node: its kubelet leaves attach and detach to the attach/detach controller (upstream
 * looks only at the annotation's presence). Nodes without it attach their volumes themselves.
 */
export const annControllerManagedAttachDetach = "volumes.kubernetes.io/controller-managed-attach-detach";

/** On a claim: the external resizer that expands it (kcm sets it for CSI-migrated in-tree volumes). */
export const annStorageResizer = "volume.kubernetes.io/storage-resizer";
/** On a claim: "true" once a controller-only expansion finished (no NodeExpandVolume needed). */
export const annNodeExpansionNotRequired = "volume.kubernetes.io/node-expansion-not-required";
/** On a PV: the secret for ControllerModifyVolume, copied from the class's controller-modify-secret parameters. */
export const annControllerModifySecretName = "volume.kubernetes.io/controller-modify-secret-name";
export const annControllerModifySecretNamespace = "volume.kubernetes.io/controller-modify-secret-namespace";
