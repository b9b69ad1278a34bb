// Records to CSI messages.
import type { DriverContext } from "./config.ts";
import type { Snapshot, Volume, VolumeContentSource } from "./messages.ts";
import type { ContentSourceRecord, SnapshotRecord, VolumeRecord } from "./state.ts";

export function contentSourceMessage(source: ContentSourceRecord | undefined): VolumeContentSource | null {
  if (!source) return null;
  return "snapshotId" in source
    ? { snapshot: { snapshot_id: source.snapshotId } }
    : { volume: { volume_id: source.volumeId } };
}

export function volumeMessage(ctx: DriverContext, v: VolumeRecord): Volume {
  const withTopology = ctx.config.pluginCapabilities.has("VOLUME_ACCESSIBILITY_CONSTRAINTS");
  return {
    capacity_bytes: v.capacityBytes,
    volume_id: v.id,
    // As the upstream hostpath driver: the create parameters travel on to
    // the node calls through the PV's volumeAttributes.
    volume_context: { ...v.parameters },
    content_source: contentSourceMessage(v.contentSource),
    accessible_topology: withTopology ? v.accessibleTopology.map((segments) => ({ segments })) : [],
  };
}

export function snapshotMessage(s: SnapshotRecord): Snapshot {
  const ms = Date.parse(s.createdAt);
  return {
    size_bytes: s.sizeBytes,
    snapshot_id: s.id,
    source_volume_id: s.sourceVolumeId,
    creation_time: { seconds: Math.floor(ms / 1000), nanos: (ms % 1000) * 1_000_000 },
    ready_to_use: true,
  };
}
