// The names of kube-controller-manager's pvc-protection and pv-protection
// controllers in --controllers; their finalizers are in shared/kube/well-known.ts.
export const pvcProtectionController = "persistentvolumeclaim-protection-controller";
export const pvProtectionController = "persistentvolume-protection-controller";
