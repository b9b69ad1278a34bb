// The resource types the sandbox API server serves: what discovery lists and
// what the REST paths resolve to. Only what the storage control plane and
// kubectl need; each entry mirrors kube-apiserver's discovery data.

export interface ResourceType {
  /** API group, "" for core. */
  group: string;
  version: string;
  kind: string;
  listKind: string;
  plural: string;
  singular: string;
  namespaced: boolean;
  shortNames: readonly string[];
  /** Has a `/status` subresource: the main endpoint ignores status changes. */
  hasStatus: boolean;
  /** Create resets status to this (kube's PrepareForCreate); undefined keeps what was sent. */
  statusOnCreate?: () => Record<string, unknown>;
  /** Served by a CustomResourceDefinition in a real cluster (no strategic merge patch there). */
  customResource?: boolean;
}

const allVerbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"] as const;
export const resourceVerbs: readonly string[] = allVerbs;

function type(t: Omit<ResourceType, "listKind" | "singular"> & { singular?: string }): ResourceType {
  return { ...t, listKind: `${t.kind}List`, singular: t.singular ?? t.kind.toLowerCase() };
}

export const resourceTypes: readonly ResourceType[] = [
  type({
    group: "",
    version: "v1",
    kind: "Namespace",
    plural: "namespaces",
    namespaced: false,
    shortNames: ["ns"],
    hasStatus: true,
    statusOnCreate: () => ({ phase: "Active" }),
  }),
  type({
    group: "",
    version: "v1",
    kind: "Node",
    plural: "nodes",
    namespaced: false,
    shortNames: ["no"],
    hasStatus: true,
  }),
  type({
    group: "",
    version: "v1",
    kind: "PersistentVolume",
    plural: "persistentvolumes",
    namespaced: false,
    shortNames: ["pv"],
    hasStatus: true,
    statusOnCreate: () => ({ phase: "Pending" }),
  }),
  type({
    group: "",
    version: "v1",
    kind: "PersistentVolumeClaim",
    plural: "persistentvolumeclaims",
    namespaced: true,
    shortNames: ["pvc"],
    hasStatus: true,
    statusOnCreate: () => ({ phase: "Pending" }),
  }),
  type({
    group: "",
    version: "v1",
    kind: "Pod",
    plural: "pods",
    namespaced: true,
    shortNames: ["po"],
    hasStatus: true,
    statusOnCreate: () => ({ phase: "Pending" }),
  }),
  type({
    group: "",
    version: "v1",
    kind: "Event",
    plural: "events",
    namespaced: true,
    shortNames: ["ev"],
    hasStatus: false,
  }),
  type({
    group: "",
    version: "v1",
    kind: "Secret",
    plural: "secrets",
    namespaced: true,
    shortNames: [],
    hasStatus: false,
  }),
  type({
    group: "storage.k8s.io",
    version: "v1",
    kind: "StorageClass",
    plural: "storageclasses",
    namespaced: false,
    shortNames: ["sc"],
    hasStatus: false,
  }),
  type({
    group: "storage.k8s.io",
    version: "v1",
    kind: "VolumeAttachment",
    plural: "volumeattachments",
    namespaced: false,
    shortNames: [],
    hasStatus: true,
    statusOnCreate: () => ({ attached: false }),
  }),
  type({
    group: "storage.k8s.io",
    version: "v1",
    kind: "CSINode",
    plural: "csinodes",
    namespaced: false,
    shortNames: [],
    hasStatus: false,
  }),
  type({
    group: "storage.k8s.io",
    version: "v1",
    kind: "CSIDriver",
    plural: "csidrivers",
    namespaced: false,
    shortNames: [],
    hasStatus: false,
  }),
  type({
    group: "storage.k8s.io",
    version: "v1",
    kind: "CSIStorageCapacity",
    plural: "csistoragecapacities",
    namespaced: true,
    shortNames: [],
    hasStatus: false,
  }),
  type({
    group: "storage.k8s.io",
    version: "v1",
    kind: "VolumeAttributesClass",
    plural: "volumeattributesclasses",
    namespaced: false,
    shortNames: ["vac"],
    hasStatus: false,
  }),
  type({
    group: "snapshot.storage.k8s.io",
    version: "v1",
    kind: "VolumeSnapshot",
    plural: "volumesnapshots",
    namespaced: true,
    shortNames: ["vs"],
    hasStatus: true,
    customResource: true,
  }),
  type({
    group: "snapshot.storage.k8s.io",
    version: "v1",
    kind: "VolumeSnapshotContent",
    plural: "volumesnapshotcontents",
    namespaced: false,
    shortNames: ["vsc"],
    hasStatus: true,
    customResource: true,
  }),
  type({
    group: "admissionregistration.k8s.io",
    version: "v1",
    kind: "MutatingWebhookConfiguration",
    plural: "mutatingwebhookconfigurations",
    namespaced: false,
    shortNames: [],
    hasStatus: false,
  }),
  type({
    group: "admissionregistration.k8s.io",
    version: "v1",
    kind: "ValidatingWebhookConfiguration",
    plural: "validatingwebhookconfigurations",
    namespaced: false,
    shortNames: [],
    hasStatus: false,
  }),
];

export function apiVersionOf(t: ResourceType): string {
  return t.group === "" ? t.version : `${t.group}/${t.version}`;
}

const byPath = new Map<string, ResourceType>(
  resourceTypes.map((t) => [`${t.group}/${t.version}/${t.plural}`, t]),
);
const byKind = new Map<string, ResourceType>(resourceTypes.map((t) => [`${apiVersionOf(t)}/${t.kind}`, t]));

export function findResourceType(group: string, version: string, plural: string): ResourceType | undefined {
  return byPath.get(`${group}/${version}/${plural}`);
}

export function findResourceTypeByKind(apiVersion: string, kind: string): ResourceType | undefined {
  return byKind.get(`${apiVersion}/${kind}`);
}

/** Groups in discovery order, each with its versions (one each here). */
export function apiGroups(): { name: string; version: string }[] {
  const seen = new Map<string, string>();
  for (const t of resourceTypes) if (t.group !== "" && !seen.has(t.group)) seen.set(t.group, t.version);
  return [...seen].map(([name, version]) => ({ name, version }));
}
