// Names of kube-controller-manager's pvc-protection and pv-protection
// controllers that other parts of Kubernetes see: the finalizers (which the
// StorageObjectInUseProtection admission plugin adds at creation) and the
// controller names of --controllers.
export const pvcProtectionFinalizer = "kubernetes.io/pvc-protection";
export const pvProtectionFinalizer = "kubernetes.io/pv-protection";

export const pvcProtectionController = "persistentvolumeclaim-protection-controller";
export const pvProtectionController = "persistentvolume-protection-controller";
