// Names external-provisioner gives the CSIStorageCapacity objects it manages
// (pkg/capacity/capacity.go): the labels its informer filters on, and the
// generateName prefix.

export const driverNameLabel = "csi.storage.k8s.io/drivername";
export const managedByLabel = "csi.storage.k8s.io/managed-by";
/** managed-by in central mode (one provisioner for the whole cluster). */
export const managedByCentral = "external-provisioner";
export const capacityGenerateName = "csisc-";
