// Where each kind lives on the REST API. KubeJsonClient builds URLs from these
// instead of from generated per-kind methods, so adding a kind is one line.

export interface ResourceDescriptor {
  /** API group; "" is the core group (served under /api, not /apis). */
  group: string;
  version: string;
  /** The lower-case plural used in URLs. */
  plural: string;
  kind: string;
  namespaced: boolean;
}

function resource(
  group: string,
  version: string,
  plural: string,
  kind: string,
  namespaced: boolean,
): ResourceDescriptor {
  return Object.freeze({ group, version, plural, kind, namespaced });
}

/** "v1" for the core group, "group/version" otherwise: what objects carry in `apiVersion`. */
/** The all-namespaces collection path a watch or list uses, e.g. /api/v1/pods. */
export function collectionPathOf(r: ResourceDescriptor): string {
  return r.group === "" ? `/api/${r.version}/${r.plural}` : `/apis/${r.group}/${r.version}/${r.plural}`;
}

export function apiVersionOf(r: ResourceDescriptor): string {
  return r.group === "" ? r.version : `${r.group}/${r.version}`;
}

export const persistentVolumes = resource("", "v1", "persistentvolumes", "PersistentVolume", false);
export const persistentVolumeClaims = resource(
  "",
  "v1",
  "persistentvolumeclaims",
  "PersistentVolumeClaim",
  true,
);
export const pods = resource("", "v1", "pods", "Pod", true);
export const nodes = resource("", "v1", "nodes", "Node", false);
/** core/v1 Events (involvedObject, count), the API kubectl describe reads. */
export const events = resource("", "v1", "events", "Event", true);
export const secrets = resource("", "v1", "secrets", "Secret", true);
export const namespaces = resource("", "v1", "namespaces", "Namespace", false);
export const storageClasses = resource("storage.k8s.io", "v1", "storageclasses", "StorageClass", false);
export const volumeAttachments = resource(
  "storage.k8s.io",
  "v1",
  "volumeattachments",
  "VolumeAttachment",
  false,
);
export const csiNodes = resource("storage.k8s.io", "v1", "csinodes", "CSINode", false);
export const csiDrivers = resource("storage.k8s.io", "v1", "csidrivers", "CSIDriver", false);
export const volumeAttributesClasses = resource(
  "storage.k8s.io",
  "v1",
  "volumeattributesclasses",
  "VolumeAttributesClass",
  false,
);
export const csiStorageCapacities = resource(
  "storage.k8s.io",
  "v1",
  "csistoragecapacities",
  "CSIStorageCapacity",
  true,
);
// Snapshot kinds are CRDs: strategic merge patch does not apply to them.
export const volumeSnapshots = resource(
  "snapshot.storage.k8s.io",
  "v1",
  "volumesnapshots",
  "VolumeSnapshot",
  true,
);
export const volumeSnapshotContents = resource(
  "snapshot.storage.k8s.io",
  "v1",
  "volumesnapshotcontents",
  "VolumeSnapshotContent",
  false,
);
// Admission webhook registrations: `npm run certs` patches their caBundle.
export const mutatingWebhookConfigurations = resource(
  "admissionregistration.k8s.io",
  "v1",
  "mutatingwebhookconfigurations",
  "MutatingWebhookConfiguration",
  false,
);
export const validatingWebhookConfigurations = resource(
  "admissionregistration.k8s.io",
  "v1",
  "validatingwebhookconfigurations",
  "ValidatingWebhookConfiguration",
  false,
);
/** Create-only: the answer says who a bearer token belongs to (AUTH_MODE=tokenreview). */
export const tokenReviews = resource("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", false);
