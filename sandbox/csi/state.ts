// The driver's own state (volumes, snapshots, where each volume is
// published) kept in one JSON file, rewritten whole after every change by
// writing a temporary file and renaming it over the old one, so a driver
// killed at any moment restarts with either the old or the new state, never
// a torn one.
import { readFile, rename, writeFile } from "node:fs/promises";
import type { CsiAccessMode } from "../../shared/csi/types.ts";

export type VolumeKind = "mount" | "block";

export type ContentSourceRecord = { snapshotId: string } | { volumeId: string };

export interface Publication {
  readonly: boolean;
  accessMode: CsiAccessMode;
  publishedAt: string;
}

/** A volume staged on a node (NodeStageVolume). */
export interface NodeStaging {
  path: string;
  accessMode: CsiAccessMode;
  stagedAt: string;
}

/** A volume published to one target path on a node (NodePublishVolume). */
export interface NodeMount {
  readonly: boolean;
  accessMode: CsiAccessMode;
  /** The staging path it was published from; "" without STAGE_UNSTAGE_VOLUME. */
  stagingPath: string;
  publishedAt: string;
}

export interface VolumeRecord {
  id: string;
  name: string;
  capacityBytes: number;
  kind: VolumeKind;
  /** Relative to the driver directory. */
  path: string;
  parameters: Record<string, string>;
  contentSource?: ContentSourceRecord;
  /** The topology segments the volume is accessible from (one entry each). */
  accessibleTopology: Record<string, string>[];
  /** node id → publication, for ControllerPublishVolume tracking. */
  publishedNodes: Record<string, Publication>;
  /** node id → staging (absent in state files written before the Node service). */
  nodeStaged?: Record<string, NodeStaging>;
  /** node id → target path → mount. */
  nodeMounts?: Record<string, Record<string, NodeMount>>;
  /**
   * The filesystem's size as the node last grew it (NodeExpandVolume); lags
   * capacityBytes after a controller expansion that needs the node. Absent
   * in older state files: the same as capacityBytes.
   */
  nodeCapacityBytes?: number;
  /** The mutable parameters CreateVolume and ControllerModifyVolume applied (absent: none). */
  mutableParameters?: Record<string, string>;
  createdAt: string;
}

export interface SnapshotRecord {
  id: string;
  name: string;
  sourceVolumeId: string;
  sizeBytes: number;
  kind: VolumeKind;
  /** Relative to the driver directory. */
  path: string;
  parameters: Record<string, string>;
  createdAt: string;
}

export interface DriverStateFile {
  version: 1;
  volumes: VolumeRecord[];
  snapshots: SnapshotRecord[];
}

function emptyState(): DriverStateFile {
  return { version: 1, volumes: [], snapshots: [] };
}

/** Reads the state file; a missing file is a fresh driver. */
export async function loadState(file: string): Promise<DriverStateFile> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return emptyState();
    throw err;
  }
  const parsed = JSON.parse(text) as Partial<DriverStateFile>;
  if (parsed.version !== 1 || !Array.isArray(parsed.volumes) || !Array.isArray(parsed.snapshots)) {
    throw new Error(`${file}: not a CSI sandbox driver state file (version 1)`);
  }
  return parsed as DriverStateFile;
}

let tempCounter = 0;

/**
 * Replaces the state file atomically. No fsync: the state must survive the
 * driver process being killed, not the machine losing power, and skipping it
 * keeps bursts of calls fast. Compact JSON, for the same reason (`jq .` reads it).
 */
export async function saveState(file: string, state: DriverStateFile): Promise<void> {
  const temp = `${file}.tmp-${process.pid}-${++tempCounter}`;
  await writeFile(temp, `${JSON.stringify(state)}\n`, { mode: 0o600 });
  await rename(temp, file);
}
