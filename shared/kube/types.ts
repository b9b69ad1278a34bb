// The Kubernetes objects the storage controllers read and write, as plain
// JSON: exactly what goes over the wire (timestamps are RFC 3339 strings), with
// index signatures so fields this code does not know survive a read-modify-
// write against a newer API server instead of being dropped.

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generateName?: string;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: Record<string, unknown>[];
  [key: string]: unknown;
}

export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  [key: string]: unknown;
}

export interface ObjectReference {
  apiVersion?: string;
  kind?: string;
  namespace?: string;
  name?: string;
  uid?: string;
  resourceVersion?: string;
  fieldPath?: string;
}

export type AccessMode = "ReadWriteOnce" | "ReadOnlyMany" | "ReadWriteMany" | "ReadWriteOncePod";
export type VolumeMode = "Filesystem" | "Block";
export type ReclaimPolicy = "Retain" | "Delete" | "Recycle";

export interface LabelSelectorRequirement {
  key: string;
  operator: string;
  values?: string[];
}

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: LabelSelectorRequirement[];
}

export interface NodeSelectorRequirement {
  key: string;
  operator: string;
  values?: string[];
}

export interface NodeSelectorTerm {
  matchExpressions?: NodeSelectorRequirement[];
  matchFields?: NodeSelectorRequirement[];
}

export interface CSIPersistentVolumeSource {
  driver: string;
  volumeHandle: string;
  readOnly?: boolean;
  fsType?: string;
  volumeAttributes?: Record<string, string>;
  controllerPublishSecretRef?: SecretReference;
  nodeStageSecretRef?: SecretReference;
  nodePublishSecretRef?: SecretReference;
  controllerExpandSecretRef?: SecretReference;
  nodeExpandSecretRef?: SecretReference;
  [key: string]: unknown;
}

export interface SecretReference {
  name?: string;
  namespace?: string;
}

export interface PersistentVolumeSpec {
  capacity?: Record<string, string>;
  accessModes?: string[];
  claimRef?: ObjectReference | null;
  persistentVolumeReclaimPolicy?: string;
  storageClassName?: string;
  mountOptions?: string[];
  volumeMode?: string;
  nodeAffinity?: { required?: { nodeSelectorTerms: NodeSelectorTerm[] } };
  csi?: CSIPersistentVolumeSource;
  /** Set only with spec.csi; never goes back to unset once set. */
  volumeAttributesClassName?: string;
  [key: string]: unknown;
}

export interface PersistentVolumeStatus {
  phase?: string;
  message?: string;
  reason?: string;
  lastPhaseTransitionTime?: string;
  [key: string]: unknown;
}

export interface PersistentVolume extends KubeObject {
  spec: PersistentVolumeSpec;
  status?: PersistentVolumeStatus;
}

export interface PersistentVolumeClaimSpec {
  accessModes?: string[];
  selector?: LabelSelector | null;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  volumeName?: string;
  storageClassName?: string | null;
  volumeMode?: string;
  dataSource?: TypedLocalObjectReference | null;
  dataSourceRef?: (TypedLocalObjectReference & { namespace?: string }) | null;
  /** null and "" both mean none; a set class cannot go back to none. */
  volumeAttributesClassName?: string | null;
  [key: string]: unknown;
}

export interface TypedLocalObjectReference {
  apiGroup?: string;
  kind: string;
  name: string;
}

/** pkg/apis/core ClaimResourceStatus values (k8s >= 1.31 names). */
export type ClaimResourceStatus =
  | "ControllerResizeInProgress"
  | "ControllerResizeInfeasible"
  | "NodeResizePending"
  | "NodeResizeInProgress"
  | "NodeResizeInfeasible";

export interface PersistentVolumeClaimCondition {
  type: string;
  status: string;
  lastProbeTime?: string | null;
  lastTransitionTime?: string | null;
  reason?: string;
  message?: string;
}

export interface ModifyVolumeStatus {
  targetVolumeAttributesClassName?: string;
  status: "Pending" | "InProgress" | "Infeasible";
}

export interface PersistentVolumeClaimStatus {
  phase?: string;
  accessModes?: string[];
  capacity?: Record<string, string>;
  conditions?: Record<string, unknown>[];
  allocatedResources?: Record<string, string>;
  allocatedResourceStatuses?: Record<string, ClaimResourceStatus>;
  currentVolumeAttributesClassName?: string | null;
  modifyVolumeStatus?: ModifyVolumeStatus | null;
  [key: string]: unknown;
}

export interface PersistentVolumeClaim extends KubeObject {
  spec: PersistentVolumeClaimSpec;
  status?: PersistentVolumeClaimStatus;
}

export interface StorageClass extends KubeObject {
  provisioner: string;
  parameters?: Record<string, string>;
  reclaimPolicy?: string;
  mountOptions?: string[];
  allowVolumeExpansion?: boolean;
  volumeBindingMode?: string;
  allowedTopologies?: { matchLabelExpressions?: { key: string; values: string[] }[] }[];
}

/** storage.k8s.io/v1 VolumeAttributesClass (GA in 1.34): both fields immutable. */
export interface VolumeAttributesClass extends KubeObject {
  driverName: string;
  parameters?: Record<string, string>;
}

/** storage.k8s.io/v1 CSIStorageCapacity: what one class can still provision in one topology segment. */
export interface CSIStorageCapacity extends KubeObject {
  storageClassName: string;
  nodeTopology?: LabelSelector | null;
  capacity?: string;
  maximumVolumeSize?: string;
}

export interface PodVolume {
  name: string;
  persistentVolumeClaim?: { claimName: string; readOnly?: boolean };
  ephemeral?: { volumeClaimTemplate?: Record<string, unknown> };
  [key: string]: unknown;
}

export interface Pod extends KubeObject {
  spec: { nodeName?: string; volumes?: PodVolume[]; [key: string]: unknown };
  status?: { phase?: string; [key: string]: unknown };
}

export interface Node extends KubeObject {
  spec?: { taints?: { key: string; value?: string; effect: string }[]; [key: string]: unknown };
  status?: {
    conditions?: { type: string; status: string }[];
    volumesInUse?: string[];
    volumesAttached?: { name: string; devicePath: string }[];
    [key: string]: unknown;
  };
}

export interface VolumeAttachment extends KubeObject {
  spec: {
    attacher: string;
    nodeName: string;
    source: { persistentVolumeName?: string; inlineVolumeSpec?: Record<string, unknown> };
  };
  status?: {
    attached: boolean;
    attachmentMetadata?: Record<string, string>;
    attachError?: VolumeError;
    detachError?: VolumeError;
  };
}

export interface VolumeError {
  time?: string;
  message?: string;
  errorCode?: number;
}

export interface CSINode extends KubeObject {
  spec: {
    drivers: { name: string; nodeID: string; topologyKeys?: string[]; allocatable?: { count?: number } }[];
  };
}

export interface CSIDriver extends KubeObject {
  spec: { attachRequired?: boolean; podInfoOnMount?: boolean; [key: string]: unknown };
}

export interface KubeEvent extends KubeObject {
  involvedObject: ObjectReference;
  reason?: string;
  message?: string;
  type?: string;
  count?: number;
}

export interface Secret extends KubeObject {
  type?: string;
  /** Values are base64, as on the wire. */
  data?: Record<string, string>;
  stringData?: Record<string, string>;
  immutable?: boolean;
}

/** snapshot.storage.k8s.io/v1 VolumeSnapshot. */
export interface VolumeSnapshot extends KubeObject {
  spec: {
    source: { persistentVolumeClaimName?: string; volumeSnapshotContentName?: string };
    volumeSnapshotClassName?: string;
    [key: string]: unknown;
  };
  status?: {
    boundVolumeSnapshotContentName?: string;
    creationTime?: string;
    readyToUse?: boolean;
    /** A quantity, e.g. "1Gi". */
    restoreSize?: string;
    error?: VolumeError;
    [key: string]: unknown;
  };
}

/** snapshot.storage.k8s.io/v1 VolumeSnapshotContent (cluster-scoped). */
export interface VolumeSnapshotContent extends KubeObject {
  spec: {
    volumeSnapshotRef: ObjectReference;
    deletionPolicy: string;
    driver: string;
    source: { volumeHandle?: string; snapshotHandle?: string };
    volumeSnapshotClassName?: string;
    sourceVolumeMode?: string;
    [key: string]: unknown;
  };
  status?: {
    snapshotHandle?: string;
    /** Nanoseconds since the epoch. */
    creationTime?: number;
    readyToUse?: boolean;
    /** Bytes (an int64 here, unlike the VolumeSnapshot's quantity). */
    restoreSize?: number;
    error?: VolumeError;
    [key: string]: unknown;
  };
}
