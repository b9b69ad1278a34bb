// The CSI v1 messages as this driver sees them on the wire, decoded by
// proto-loader with keepCase, enums as names, int64 as decimal strings and
// defaults filled in (so a missing string is "", a missing message is null).
// Only the fields the driver reads or writes are declared.

export type Int64 = string;
/** What we send for int64 fields: protobufjs accepts numbers and decimal strings. */
export type Int64Out = number | string;

export type AccessModeName =
  | "UNKNOWN"
  | "SINGLE_NODE_WRITER"
  | "SINGLE_NODE_READER_ONLY"
  | "MULTI_NODE_READER_ONLY"
  | "MULTI_NODE_SINGLE_WRITER"
  | "MULTI_NODE_MULTI_WRITER"
  | "SINGLE_NODE_SINGLE_WRITER"
  | "SINGLE_NODE_MULTI_WRITER";

export interface VolumeCapability {
  block?: Record<string, never> | null;
  mount?: { fs_type: string; mount_flags: string[]; volume_mount_group: string } | null;
  access_mode: { mode: AccessModeName } | null;
  access_type?: "block" | "mount";
}

export interface CapacityRange {
  required_bytes: Int64;
  limit_bytes: Int64;
}

export interface Topology {
  segments: Record<string, string>;
}

export interface TopologyRequirement {
  requisite: Topology[];
  preferred: Topology[];
}

export interface VolumeContentSource {
  snapshot?: { snapshot_id: string } | null;
  volume?: { volume_id: string } | null;
  type?: "snapshot" | "volume";
}

export interface Volume {
  capacity_bytes: Int64Out;
  volume_id: string;
  volume_context: Record<string, string>;
  content_source: VolumeContentSource | null;
  accessible_topology: Topology[];
}

export interface Snapshot {
  size_bytes: Int64Out;
  snapshot_id: string;
  source_volume_id: string;
  creation_time: { seconds: Int64Out; nanos: number };
  ready_to_use: boolean;
}

export type Empty = Record<string, never>;

export interface GetPluginInfoResponse {
  name: string;
  vendor_version: string;
  manifest: Record<string, string>;
}

export interface PluginCapabilityOut {
  service: { type: string };
}

export interface GetPluginCapabilitiesResponse {
  capabilities: PluginCapabilityOut[];
}

export interface ProbeResponse {
  ready: { value: boolean };
}

export interface CreateVolumeRequest {
  name: string;
  capacity_range: CapacityRange | null;
  volume_capabilities: VolumeCapability[];
  parameters: Record<string, string>;
  secrets: Record<string, string>;
  volume_content_source: VolumeContentSource | null;
  accessibility_requirements: TopologyRequirement | null;
}

export interface CreateVolumeResponse {
  volume: Volume;
}

export interface DeleteVolumeRequest {
  volume_id: string;
}

export interface ControllerPublishVolumeRequest {
  volume_id: string;
  node_id: string;
  volume_capability: VolumeCapability | null;
  readonly: boolean;
  volume_context: Record<string, string>;
}

export interface ControllerPublishVolumeResponse {
  publish_context: Record<string, string>;
}

export interface ControllerUnpublishVolumeRequest {
  volume_id: string;
  node_id: string;
}

export interface ValidateVolumeCapabilitiesRequest {
  volume_id: string;
  volume_context: Record<string, string>;
  volume_capabilities: VolumeCapability[];
  parameters: Record<string, string>;
}

export interface ValidateVolumeCapabilitiesResponse {
  confirmed: {
    volume_context: Record<string, string>;
    volume_capabilities: VolumeCapability[];
    parameters: Record<string, string>;
  } | null;
  message: string;
}

export interface ListRequest {
  max_entries: number;
  starting_token: string;
}

export interface ListVolumesResponse {
  entries: { volume: Volume; status: { published_node_ids: string[] } | null }[];
  next_token: string;
}

export interface GetCapacityRequest {
  volume_capabilities: VolumeCapability[];
  parameters: Record<string, string>;
  accessible_topology: Topology | null;
}

export interface GetCapacityResponse {
  available_capacity: Int64Out;
  maximum_volume_size: { value: Int64Out } | null;
}

export interface ControllerGetCapabilitiesResponse {
  capabilities: { rpc: { type: string } }[];
}

export interface CreateSnapshotRequest {
  source_volume_id: string;
  name: string;
  parameters: Record<string, string>;
}

export interface CreateSnapshotResponse {
  snapshot: Snapshot;
}

export interface DeleteSnapshotRequest {
  snapshot_id: string;
}

export interface ListSnapshotsRequest extends ListRequest {
  source_volume_id: string;
  snapshot_id: string;
}

export interface ListSnapshotsResponse {
  entries: { snapshot: Snapshot }[];
  next_token: string;
}

export interface ControllerExpandVolumeRequest {
  volume_id: string;
  capacity_range: CapacityRange | null;
  volume_capability: VolumeCapability | null;
}

export interface ControllerExpandVolumeResponse {
  capacity_bytes: Int64Out;
  node_expansion_required: boolean;
}

export interface NodeStageVolumeRequest {
  volume_id: string;
  publish_context: Record<string, string>;
  staging_target_path: string;
  volume_capability: VolumeCapability | null;
  volume_context: Record<string, string>;
}

export interface NodeUnstageVolumeRequest {
  volume_id: string;
  staging_target_path: string;
}

export interface NodePublishVolumeRequest {
  volume_id: string;
  publish_context: Record<string, string>;
  staging_target_path: string;
  target_path: string;
  volume_capability: VolumeCapability | null;
  readonly: boolean;
  volume_context: Record<string, string>;
}

export interface NodeUnpublishVolumeRequest {
  volume_id: string;
  target_path: string;
}

export interface NodeGetCapabilitiesResponse {
  capabilities: { rpc: { type: string } }[];
}

export interface NodeGetInfoResponse {
  node_id: string;
  max_volumes_per_node: Int64Out;
  accessible_topology: Topology | null;
}
