// The sandbox CSI driver: every CSI call as a plain async method, with fault
// injection, capability checks and serialization of mutating calls around
// it, plus the in-process introspection tests use. Knows nothing of gRPC.
import { setTimeout as sleep } from "node:timers/promises";
import type * as m from "../../shared/csi/types.ts";
import { requiredCapability, requiredNodeCapability } from "./capabilities.ts";
import { type CapacityReport, capacityReport } from "./capacity.ts";
import {
  type CsiDriverOptions,
  type DriverConfig,
  type DriverContext,
  resolveConfig,
  resolvePools,
} from "./config.ts";
import { createVolume } from "./create-volume.ts";
import { CsiError } from "./errors.ts";
import { CsiFaultInjector, type CsiFaultSettings, parseCsiFaultSettings } from "./faults.ts";
import {
  controllerCapabilities,
  nodeCapabilities,
  nodeInfo,
  pluginCapabilities,
  pluginInfo,
  probe,
} from "./identity.ts";
import { expandNodeVolume } from "./node-expand.ts";
import { publishNodeVolume, unpublishNodeVolume } from "./node-publish.ts";
import { stageVolume, unstageVolume } from "./node-stage.ts";
import { publishVolume, unpublishVolume } from "./publish.ts";
import { SerialQueue } from "./serial.ts";
import { createSnapshot, deleteSnapshot, listSnapshots } from "./snapshots.ts";
import type { ContentSourceRecord, VolumeKind } from "./state.ts";
import { DriverStore } from "./store.ts";
import {
  deleteVolume,
  expandVolume,
  getCapacity,
  listVolumes,
  modifyVolume,
  validateVolumeCapabilities,
} from "./volumes.ts";

/** Each call's request and response, in the shapes of shared/csi/types.ts. */
interface CsiMessages {
  GetPluginInfo: [m.GetPluginInfoRequest, m.GetPluginInfoResponse];
  GetPluginCapabilities: [m.GetPluginCapabilitiesRequest, m.GetPluginCapabilitiesResponse];
  Probe: [m.ProbeRequest, m.ProbeResponse];
  CreateVolume: [m.CreateVolumeRequest, m.CreateVolumeResponse];
  DeleteVolume: [m.DeleteVolumeRequest, m.DeleteVolumeResponse];
  ControllerPublishVolume: [m.ControllerPublishVolumeRequest, m.ControllerPublishVolumeResponse];
  ControllerUnpublishVolume: [m.ControllerUnpublishVolumeRequest, m.ControllerUnpublishVolumeResponse];
  ValidateVolumeCapabilities: [m.ValidateVolumeCapabilitiesRequest, m.ValidateVolumeCapabilitiesResponse];
  ListVolumes: [m.ListVolumesRequest, m.ListVolumesResponse];
  GetCapacity: [m.GetCapacityRequest, m.GetCapacityResponse];
  ControllerGetCapabilities: [m.ControllerGetCapabilitiesRequest, m.ControllerGetCapabilitiesResponse];
  CreateSnapshot: [m.CreateSnapshotRequest, m.CreateSnapshotResponse];
  DeleteSnapshot: [m.DeleteSnapshotRequest, m.DeleteSnapshotResponse];
  ListSnapshots: [m.ListSnapshotsRequest, m.ListSnapshotsResponse];
  ControllerExpandVolume: [m.ControllerExpandVolumeRequest, m.ControllerExpandVolumeResponse];
  ControllerModifyVolume: [m.ControllerModifyVolumeRequest, m.ControllerModifyVolumeResponse];
  NodeStageVolume: [m.NodeStageVolumeRequest, m.NodeStageVolumeResponse];
  NodeUnstageVolume: [m.NodeUnstageVolumeRequest, m.NodeUnstageVolumeResponse];
  NodePublishVolume: [m.NodePublishVolumeRequest, m.NodePublishVolumeResponse];
  NodeUnpublishVolume: [m.NodeUnpublishVolumeRequest, m.NodeUnpublishVolumeResponse];
  NodeExpandVolume: [m.NodeExpandVolumeRequest, m.NodeExpandVolumeResponse];
  NodeGetCapabilities: [m.NodeGetCapabilitiesRequest, m.NodeGetCapabilitiesResponse];
  NodeGetInfo: [m.NodeGetInfoRequest, m.NodeGetInfoResponse];
}

export type CsiMethodName = keyof CsiMessages;
export type CsiRequest<M extends CsiMethodName> = CsiMessages[M][0];
export type CsiResponse<M extends CsiMethodName> = CsiMessages[M][1];

/** Each method as the driver runs it: Node-service calls also get the node their plugin serves. */
type CsiHandlers = {
  [M in CsiMethodName]: (req: CsiRequest<M>, node: string) => Promise<CsiResponse<M>>;
};

/** The methods of each CSI service, as the gRPC binding registers them. */
export const serviceMethods = {
  Identity: ["GetPluginInfo", "GetPluginCapabilities", "Probe"],
  Controller: [
    "CreateVolume",
    "DeleteVolume",
    "ControllerPublishVolume",
    "ControllerUnpublishVolume",
    "ValidateVolumeCapabilities",
    "ListVolumes",
    "GetCapacity",
    "ControllerGetCapabilities",
    "CreateSnapshot",
    "DeleteSnapshot",
    "ListSnapshots",
    "ControllerExpandVolume",
    "ControllerModifyVolume",
  ],
  Node: [
    "NodeStageVolume",
    "NodeUnstageVolume",
    "NodePublishVolume",
    "NodeUnpublishVolume",
    "NodeExpandVolume",
    "NodeGetCapabilities",
    "NodeGetInfo",
  ],
} as const satisfies Record<string, readonly CsiMethodName[]>;

const methodNames: readonly CsiMethodName[] = Object.values(serviceMethods).flat();

const mutatingMethods: ReadonlySet<CsiMethodName> = new Set<CsiMethodName>([
  "CreateVolume",
  "DeleteVolume",
  "ControllerPublishVolume",
  "ControllerUnpublishVolume",
  "CreateSnapshot",
  "DeleteSnapshot",
  "ControllerExpandVolume",
  "ControllerModifyVolume",
  "NodeStageVolume",
  "NodeUnstageVolume",
  "NodePublishVolume",
  "NodeUnpublishVolume",
  "NodeExpandVolume",
]);

/** Calls that never read the records: their answers cannot report an unsaved change. */
const recordFreeMethods: ReadonlySet<CsiMethodName> = new Set<CsiMethodName>([
  "GetPluginInfo",
  "GetPluginCapabilities",
  "Probe",
  "ControllerGetCapabilities",
  "NodeGetCapabilities",
  "NodeGetInfo",
]);

/** What the driver shows of every volume and snapshot it holds. */
interface BackingRecord {
  name: string;
  kind: VolumeKind;
  /** Absolute path of the directory (mount) or sparse file (block). */
  path: string;
  createdAt: string;
}

/** A volume as the driver holds it, for leak checks. */
export interface BackingVolume extends BackingRecord {
  volumeId: string;
  capacityBytes: number;
  /** The filesystem's size as the node last grew it; below capacityBytes while node expansion is pending. */
  nodeCapacityBytes: number;
  /** What CreateVolume and ControllerModifyVolume applied. */
  mutableParameters: Record<string, string>;
  publishedNodes: string[];
  /** Where NodeStageVolume staged it, per node. */
  staged: { node: string; path: string }[];
  /** Where NodePublishVolume published it, per node and target path. */
  nodePublished: { node: string; targetPath: string; readonly: boolean; stagingPath: string }[];
  contentSource?: ContentSourceRecord;
  accessibleTopology: Record<string, string>[];
  parameters: Record<string, string>;
}

export interface BackingSnapshot extends BackingRecord {
  snapshotId: string;
  sourceVolumeId: string;
  sizeBytes: number;
}

export interface DriverStats {
  /** Calls received per method, including those that failed. */
  calls: Partial<Record<CsiMethodName, number>>;
  /** Injected errors per method: before doing anything / after the work was done. */
  injected: Partial<Record<CsiMethodName, { before: number; after: number }>>;
}

export class CsiDriver {
  readonly config: DriverConfig;
  private readonly ctx: DriverContext;
  private readonly queue = new SerialQueue();
  private readonly faultInjector = new CsiFaultInjector();
  private ready = true;
  private closed = false;
  private stats: DriverStats = { calls: {}, injected: {} };
  private readonly handlers: CsiHandlers;

  private constructor(config: DriverConfig, store: DriverStore, pools: DriverContext["pools"]) {
    this.config = config;
    this.ctx = { config, store, pools };
    const ctx = this.ctx;
    this.handlers = {
      GetPluginInfo: async () => pluginInfo(config),
      GetPluginCapabilities: async () => pluginCapabilities(config),
      Probe: async () => probe(this.ready),
      CreateVolume: (req) => createVolume(ctx, req),
      DeleteVolume: (req) => deleteVolume(ctx, req),
      ControllerPublishVolume: (req) => publishVolume(ctx, req),
      ControllerUnpublishVolume: (req) => unpublishVolume(ctx, req),
      ValidateVolumeCapabilities: (req) => validateVolumeCapabilities(ctx, req),
      ListVolumes: (req) => listVolumes(ctx, req),
      GetCapacity: (req) => getCapacity(ctx, req),
      ControllerGetCapabilities: async () => controllerCapabilities(config),
      CreateSnapshot: (req) => createSnapshot(ctx, req),
      DeleteSnapshot: (req) => deleteSnapshot(ctx, req),
      ListSnapshots: (req) => listSnapshots(ctx, req),
      ControllerExpandVolume: (req) => expandVolume(ctx, req),
      ControllerModifyVolume: (req) => modifyVolume(ctx, req),
      NodeStageVolume: (req, node) => stageVolume(ctx, node, req),
      NodeUnstageVolume: (req, node) => unstageVolume(ctx, node, req),
      NodePublishVolume: (req, node) => publishNodeVolume(ctx, node, req),
      NodeUnpublishVolume: (req, node) => unpublishNodeVolume(ctx, node, req),
      NodeExpandVolume: (req, node) => expandNodeVolume(ctx, node, req),
      NodeGetCapabilities: async () => nodeCapabilities(config),
      NodeGetInfo: async (_req, node) => nodeInfo(config, node),
    };
  }

  /** Opens (or creates) the driver state in options.dir. */
  static async open(options: CsiDriverOptions): Promise<CsiDriver> {
    const config = resolveConfig(options);
    const pools = resolvePools(options);
    return new CsiDriver(config, await DriverStore.open(options.dir), pools);
  }

  get dir(): string {
    return this.ctx.store.dir;
  }

  /**
   * One CSI call: injected latency and errors first, then the capability
   * check, then the work (mutating calls one at a time). `node` is the node
   * whose plugin received a Node-service call (default: the driver's own).
   */
  async invoke<M extends CsiMethodName>(
    method: M,
    request: CsiRequest<M>,
    node: string = this.config.nodeId,
  ): Promise<CsiResponse<M>> {
    this.stats.calls[method] = (this.stats.calls[method] ?? 0) + 1;
    const mutating = mutatingMethods.has(method);
    const fault = this.faultInjector.decide(method, mutating);
    if (fault.latencyMs > 0) await sleep(fault.latencyMs);
    this.assertOpen(method);
    if (fault.error && !fault.error.after) {
      this.countInjected(method, "before");
      throw new CsiError(fault.error.code, `${method}: injected fault ${fault.error.code}`);
    }
    const needed = requiredCapability[method];
    if (needed && !this.config.controllerCapabilities.has(needed)) {
      throw new CsiError(
        "UNIMPLEMENTED",
        `${method}: not supported, the driver does not advertise ${needed}`,
      );
    }
    const neededOnNode = requiredNodeCapability[method];
    if (neededOnNode && !this.config.nodeCapabilities.has(neededOnNode)) {
      throw new CsiError(
        "UNIMPLEMENTED",
        `${method}: not supported, the node plugin does not advertise ${neededOnNode}`,
      );
    }
    const handler = this.handlers[method] as (req: CsiRequest<M>, node: string) => Promise<CsiResponse<M>>;
    const result = mutating
      ? await this.queue.run(() => {
          this.assertOpen(method);
          return handler(request, node);
        })
      : await handler(request, node);
    // Outside the serialized section, so a burst of calls shares saves. Every
    // reply waits for the file to hold what it reports, its own change or
    // one it only saw (a repeated CreateVolume finding the volume made a
    // moment ago): a driver killed before the save answered nobody.
    if (!recordFreeMethods.has(method)) await this.ctx.store.persist();
    if (fault.error?.after) {
      // The work is done and saved; the caller just never hears of it.
      this.countInjected(method, "after");
      throw new CsiError(fault.error.code, `${method}: injected fault ${fault.error.code}`);
    }
    return result;
  }

  /**
   * A call still sleeping in injected latency when the driver closes must not
   * write the state file afterwards: a restarted driver may own it by then.
   */
  private assertOpen(method: CsiMethodName): void {
    if (this.closed) throw new CsiError("UNAVAILABLE", `${method}: the driver is shutting down`);
  }

  /** Refuses further calls and waits for the mutating ones already running. */
  async close(): Promise<void> {
    this.closed = true;
    await this.queue.idle();
    await this.ctx.store.persist();
  }

  private countInjected(method: CsiMethodName, when: "before" | "after"): void {
    const counts = this.stats.injected[method] ?? { before: 0, after: 0 };
    counts[when] += 1;
    this.stats.injected[method] = counts;
  }

  /** Replaces the fault settings; throws on settings that make no sense. */
  setFaults(settings: CsiFaultSettings): void {
    this.faultInjector.set(parseCsiFaultSettings(settings, methodNames));
  }

  clearFaults(): void {
    this.faultInjector.clear();
  }

  get faults(): CsiFaultSettings {
    return this.faultInjector.current;
  }

  /** What Probe answers. */
  setReady(ready: boolean): void {
    this.ready = ready;
  }

  get isReady(): boolean {
    return this.ready;
  }

  getStats(): DriverStats & { stateSaves: number } {
    return { ...structuredClone(this.stats), stateSaves: this.ctx.store.saves };
  }

  resetStats(): void {
    this.stats = { calls: {}, injected: {} };
  }

  /** Every volume the driver holds, oldest first: what a leak check compares against the PVs. */
  listBackingVolumes(): BackingVolume[] {
    return [...this.ctx.store.volumes.values()].sort(oldestFirst).map((v) => ({
      volumeId: v.id,
      ...this.backingRecord(v),
      capacityBytes: v.capacityBytes,
      nodeCapacityBytes: v.nodeCapacityBytes ?? v.capacityBytes,
      mutableParameters: { ...v.mutableParameters },
      publishedNodes: Object.keys(v.publishedNodes).sort(),
      staged: Object.entries(v.nodeStaged ?? {})
        .map(([node, s]) => ({ node, path: s.path }))
        .sort((a, b) => a.node.localeCompare(b.node)),
      nodePublished: Object.entries(v.nodeMounts ?? {})
        .flatMap(([node, mounts]) =>
          Object.entries(mounts).map(([targetPath, p]) => ({
            node,
            targetPath,
            readonly: p.readonly,
            stagingPath: p.stagingPath,
          })),
        )
        .sort((a, b) => a.node.localeCompare(b.node) || a.targetPath.localeCompare(b.targetPath)),
      ...(v.contentSource ? { contentSource: { ...v.contentSource } } : {}),
      accessibleTopology: v.accessibleTopology.map((t) => ({ ...t })),
      parameters: { ...v.parameters },
    }));
  }

  listBackingSnapshots(): BackingSnapshot[] {
    return [...this.ctx.store.snapshots.values()].sort(oldestFirst).map((s) => ({
      snapshotId: s.id,
      ...this.backingRecord(s),
      sourceVolumeId: s.sourceVolumeId,
      sizeBytes: s.sizeBytes,
    }));
  }

  private backingRecord(r: {
    name: string;
    kind: VolumeKind;
    path: string;
    createdAt: string;
  }): BackingRecord {
    return { name: r.name, kind: r.kind, path: this.ctx.store.abs(r.path), createdAt: r.createdAt };
  }

  /** The driver-wide pool and each segment's: size, use, what is left. */
  capacity(): CapacityReport {
    return capacityReport(this.ctx);
  }

  /**
   * Sets a segment's pool (by the topology key's value), or the default pool
   * of every segment without one of its own when `segment` is undefined;
   * `bytes` null puts the segment back on the default. Not saved: a restarted
   * driver has its configured pools again.
   */
  setSegmentCapacity(segment: string | undefined, bytes: number | null): void {
    if (bytes !== null && (!Number.isSafeInteger(bytes) || bytes < 0)) {
      throw new Error(`totalBytes must be a non-negative integer, got ${bytes}`);
    }
    if (segment === undefined) {
      if (bytes === null) throw new Error("the default pool needs a size");
      this.ctx.pools.setDefault(bytes);
    } else if (bytes === null) this.ctx.pools.unset(segment);
    else this.ctx.pools.set(segment, bytes);
  }

  /** Nodes the volume is published to, sorted; empty for an unknown volume. */
  publishedNodes(volumeId: string): string[] {
    return Object.keys(this.ctx.store.volumes.get(volumeId)?.publishedNodes ?? {}).sort();
  }

  /** Resolves once the mutating calls queued so far are done and saved. */
  async idle(): Promise<void> {
    await this.queue.idle();
    await this.ctx.store.persist();
  }
}

/** Creation order, ties broken by id so the order is stable. */
function oldestFirst(a: { createdAt: string; id: string }, b: { createdAt: string; id: string }): number {
  return a.createdAt.localeCompare(b.createdAt) || a.id.localeCompare(b.id);
}
