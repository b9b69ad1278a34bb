// Hand-written TypeScript shapes of the CSI v1 messages we exchange, as they
// look at our API edges, client and sandbox driver alike (see wire.ts for the
// conversion from the decoded messages of proto.ts):
//
//   - field names in camelCase (volume_id -> volumeId);
//   - int64 fields are `bigint`, so byte counts above 2^53 stay exact;
//   - enums are their proto names ("SINGLE_NODE_WRITER");
//   - a oneof carries a discriminator named after the oneof on decoded
//     messages (VolumeCapability.accessType = "mount" | "block");
//   - decoded messages always carry scalars, lists and maps (proto3 defaults:
//     "", 0, false, [], {}), while an absent sub-message is `undefined`.
//
// Request shapes mark as optional what a caller may leave out; response
// shapes mark as required what a decoded message always has.

export type StringMap = Record<string, string>;

/** A message without fields. */
export type Empty = Record<string, never>;

// ---- enums -----------------------------------------------------------------

export type PluginServiceType =
  | "UNKNOWN"
  | "CONTROLLER_SERVICE"
  | "VOLUME_ACCESSIBILITY_CONSTRAINTS"
  | "GROUP_CONTROLLER_SERVICE"
  | "SNAPSHOT_METADATA_SERVICE";

export type VolumeExpansionType = "UNKNOWN" | "ONLINE" | "OFFLINE";

/** VolumeCapability.AccessMode.Mode */
export type CsiAccessMode =
  | "UNKNOWN"
  | "SINGLE_NODE_WRITER"
  | "SINGLE_NODE_READER_ONLY"
  | "MULTI_NODE_READER_ONLY"
  | "MULTI_NODE_SINGLE_WRITER"
  | "MULTI_NODE_MULTI_WRITER"
  | "SINGLE_NODE_SINGLE_WRITER"
  | "SINGLE_NODE_MULTI_WRITER";

/** ControllerServiceCapability.RPC.Type */
export type ControllerRpcType =
  | "UNKNOWN"
  | "CREATE_DELETE_VOLUME"
  | "PUBLISH_UNPUBLISH_VOLUME"
  | "LIST_VOLUMES"
  | "GET_CAPACITY"
  | "CREATE_DELETE_SNAPSHOT"
  | "LIST_SNAPSHOTS"
  | "CLONE_VOLUME"
  | "PUBLISH_READONLY"
  | "EXPAND_VOLUME"
  | "LIST_VOLUMES_PUBLISHED_NODES"
  | "VOLUME_CONDITION"
  | "GET_VOLUME"
  | "SINGLE_NODE_MULTI_WRITER"
  | "MODIFY_VOLUME"
  | "GET_SNAPSHOT";

/** NodeServiceCapability.RPC.Type */
export type NodeRpcType =
  | "UNKNOWN"
  | "STAGE_UNSTAGE_VOLUME"
  | "GET_VOLUME_STATS"
  | "EXPAND_VOLUME"
  | "VOLUME_CONDITION"
  | "SINGLE_NODE_MULTI_WRITER"
  | "VOLUME_MOUNT_GROUP";

// ---- shared messages -------------------------------------------------------

export interface Topology {
  segments: StringMap;
}

export interface TopologyRequirement {
  requisite?: Topology[];
  preferred?: Topology[];
}

export interface CapacityRange {
  requiredBytes?: bigint;
  limitBytes?: bigint;
}

export type BlockVolume = Empty;

export interface MountVolume {
  fsType?: string;
  mountFlags?: string[];
  volumeMountGroup?: string;
}

export interface AccessMode {
  mode: CsiAccessMode;
}

/** Exactly one of `block` / `mount` (oneof access_type). */
export interface VolumeCapability {
  block?: BlockVolume;
  mount?: MountVolume;
  /** Which oneof member is set; present on decoded messages. */
  accessType?: "block" | "mount";
  accessMode?: AccessMode;
}

/** Exactly one of `snapshot` / `volume` (oneof type). */
export interface VolumeContentSource {
  snapshot?: { snapshotId: string };
  volume?: { volumeId: string };
  /** Which oneof member is set; present on decoded messages. */
  type?: "snapshot" | "volume";
}

export interface Volume {
  capacityBytes: bigint;
  volumeId: string;
  volumeContext: StringMap;
  contentSource?: VolumeContentSource;
  accessibleTopology: Topology[];
}

export interface VolumeCondition {
  abnormal: boolean;
  message: string;
}

export interface Timestamp {
  seconds: bigint;
  nanos: number;
}

export interface Snapshot {
  sizeBytes: bigint;
  snapshotId: string;
  sourceVolumeId: string;
  creationTime?: Timestamp;
  readyToUse: boolean;
  groupSnapshotId: string;
}

// ---- Identity --------------------------------------------------------------

export type GetPluginInfoRequest = Empty;

export interface GetPluginInfoResponse {
  name: string;
  vendorVersion: string;
  manifest: StringMap;
}

export type GetPluginCapabilitiesRequest = Empty;

/** Exactly one of `service` / `volumeExpansion` (oneof type). */
export interface PluginCapability {
  service?: { type: PluginServiceType };
  volumeExpansion?: { type: VolumeExpansionType };
  type?: "service" | "volumeExpansion";
}

export interface GetPluginCapabilitiesResponse {
  capabilities: PluginCapability[];
}

export type ProbeRequest = Empty;

export interface ProbeResponse {
  /** google.protobuf.BoolValue; absent means ready. */
  ready?: { value: boolean };
}

// ---- Controller ------------------------------------------------------------

export interface CreateVolumeRequest {
  name: string;
  capacityRange?: CapacityRange;
  volumeCapabilities: VolumeCapability[];
  parameters?: StringMap;
  /** Never log: see redactSecrets. */
  secrets?: StringMap;
  volumeContentSource?: VolumeContentSource;
  accessibilityRequirements?: TopologyRequirement;
  mutableParameters?: StringMap;
}

export interface CreateVolumeResponse {
  volume?: Volume;
}

export interface DeleteVolumeRequest {
  volumeId: string;
  secrets?: StringMap;
}

export type DeleteVolumeResponse = Empty;

export interface ControllerPublishVolumeRequest {
  volumeId: string;
  nodeId: string;
  volumeCapability?: VolumeCapability;
  readonly?: boolean;
  secrets?: StringMap;
  volumeContext?: StringMap;
}

export interface ControllerPublishVolumeResponse {
  publishContext: StringMap;
}

export interface ControllerUnpublishVolumeRequest {
  volumeId: string;
  /** Empty: unpublish from every node. */
  nodeId?: string;
  secrets?: StringMap;
}

export type ControllerUnpublishVolumeResponse = Empty;

export interface ValidateVolumeCapabilitiesRequest {
  volumeId: string;
  volumeContext?: StringMap;
  volumeCapabilities: VolumeCapability[];
  parameters?: StringMap;
  secrets?: StringMap;
  mutableParameters?: StringMap;
}

export interface ValidateVolumeCapabilitiesResponse {
  /** Absent: the capabilities are not supported; `message` may say why. */
  confirmed?: {
    volumeContext: StringMap;
    volumeCapabilities: VolumeCapability[];
    parameters: StringMap;
    mutableParameters: StringMap;
  };
  message: string;
}

export interface ListVolumesRequest {
  maxEntries?: number;
  startingToken?: string;
}

export interface ListVolumesEntry {
  volume?: Volume;
  status?: { publishedNodeIds: string[]; volumeCondition?: VolumeCondition };
}

export interface ListVolumesResponse {
  entries: ListVolumesEntry[];
  /** Empty on the last page. */
  nextToken: string;
}

export interface GetCapacityRequest {
  volumeCapabilities?: VolumeCapability[];
  parameters?: StringMap;
  accessibleTopology?: Topology;
}

export interface GetCapacityResponse {
  availableCapacity: bigint;
  /** google.protobuf.Int64Value */
  maximumVolumeSize?: { value: bigint };
  minimumVolumeSize?: { value: bigint };
}

export type ControllerGetCapabilitiesRequest = Empty;

/** A Controller or Node service capability: oneof type { rpc }. */
interface RpcCapability<T extends string> {
  rpc?: { type: T };
  type?: "rpc";
}

export type ControllerServiceCapability = RpcCapability<ControllerRpcType>;

export interface ControllerGetCapabilitiesResponse {
  capabilities: ControllerServiceCapability[];
}

export interface CreateSnapshotRequest {
  sourceVolumeId: string;
  name: string;
  secrets?: StringMap;
  parameters?: StringMap;
}

export interface CreateSnapshotResponse {
  snapshot?: Snapshot;
}

export interface DeleteSnapshotRequest {
  snapshotId: string;
  secrets?: StringMap;
}

export type DeleteSnapshotResponse = Empty;

export interface ListSnapshotsRequest {
  maxEntries?: number;
  startingToken?: string;
  sourceVolumeId?: string;
  snapshotId?: string;
  secrets?: StringMap;
}

export interface ListSnapshotsResponse {
  entries: { snapshot?: Snapshot }[];
  nextToken: string;
}

export interface ControllerExpandVolumeRequest {
  volumeId: string;
  capacityRange?: CapacityRange;
  secrets?: StringMap;
  volumeCapability?: VolumeCapability;
}

export interface ControllerExpandVolumeResponse {
  capacityBytes: bigint;
  nodeExpansionRequired: boolean;
}

export interface ControllerModifyVolumeRequest {
  volumeId: string;
  /** Never log: see redactSecrets. */
  secrets?: StringMap;
  mutableParameters?: StringMap;
}

export type ControllerModifyVolumeResponse = Empty;

export interface NodeExpandVolumeRequest {
  volumeId: string;
  volumePath: string;
  capacityRange?: CapacityRange;
  stagingTargetPath?: string;
  volumeCapability?: VolumeCapability;
  /** Never log: see redactSecrets. */
  secrets?: StringMap;
}

export interface NodeExpandVolumeResponse {
  capacityBytes: bigint;
}

// ---- Node ------------------------------------------------------------------

/** What NodeStageVolume and NodePublishVolume both say about the volume. */
interface NodeVolumeRequest {
  volumeId: string;
  publishContext?: StringMap;
  volumeCapability?: VolumeCapability;
  secrets?: StringMap;
  volumeContext?: StringMap;
}

export interface NodeStageVolumeRequest extends NodeVolumeRequest {
  stagingTargetPath: string;
}

export type NodeStageVolumeResponse = Empty;

export interface NodeUnstageVolumeRequest {
  volumeId: string;
  stagingTargetPath: string;
}

export type NodeUnstageVolumeResponse = Empty;

export interface NodePublishVolumeRequest extends NodeVolumeRequest {
  /** Set when the plugin has STAGE_UNSTAGE_VOLUME. */
  stagingTargetPath?: string;
  targetPath: string;
  readonly?: boolean;
}

export type NodePublishVolumeResponse = Empty;

export interface NodeUnpublishVolumeRequest {
  volumeId: string;
  targetPath: string;
}

export type NodeUnpublishVolumeResponse = Empty;

export type NodeGetCapabilitiesRequest = Empty;

export type NodeServiceCapability = RpcCapability<NodeRpcType>;

export interface NodeGetCapabilitiesResponse {
  capabilities: NodeServiceCapability[];
}

export type NodeGetInfoRequest = Empty;

export interface NodeGetInfoResponse {
  nodeId: string;
  /** 0: no limit reported. */
  maxVolumesPerNode: bigint;
  accessibleTopology?: Topology;
}
