// Records to CSI messages.
import type { Snapshot, Volume, VolumeContentSource } from "../../shared/csi/types.ts";
import type { DriverContext } from "./config.ts";
import type { ContentSourceRecord, SnapshotRecord, VolumeRecord } from "./state.ts";

function contentSourceMessage(source: ContentSourceRecord | undefined): VolumeContentSource | undefined {
  if (!source) return undefined;
  return "snapshotId" in source
    ? { snapshot: { snapshotId: source.snapshotId } }
    : { volume: { volumeId: source.volumeId } };
}

export function volumeMessage(ctx: DriverContext, v: VolumeRecord): Volume {
  const withTopology = ctx.config.pluginCapabilities.has("VOLUME_ACCESSIBILITY_CONSTRAINTS");
  return {
    capacityBytes: BigInt(v.capacityBytes),
    volumeId: v.id,
    // As the upstream hostpath driver: the create parameters travel on to
    // the node calls through the PV's volumeAttributes.
    volumeContext: { ...v.parameters },
    contentSource: contentSourceMessage(v.contentSource),
    accessibleTopology: withTopology ? v.accessibleTopology.map((segments) => ({ segments })) : [],
  };
}

export function snapshotMessage(s: SnapshotRecord): Snapshot {
  const ms = Date.parse(s.createdAt);
  return {
    sizeBytes: BigInt(s.sizeBytes),
    snapshotId: s.id,
    sourceVolumeId: s.sourceVolumeId,
    creationTime: { seconds: BigInt(Math.floor(ms / 1000)), nanos: (ms % 1000) * 1_000_000 },
    readyToUse: true,
    groupSnapshotId: "",
  };
}
