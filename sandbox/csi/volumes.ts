// DeleteVolume, ControllerExpandVolume, ControllerModifyVolume,
// ValidateVolumeCapabilities, ListVolumes and GetCapacity.
import type {
  ControllerExpandVolumeRequest,
  ControllerExpandVolumeResponse,
  ControllerModifyVolumeRequest,
  ControllerModifyVolumeResponse,
  DeleteVolumeRequest,
  Empty,
  GetCapacityRequest,
  GetCapacityResponse,
  ListVolumesRequest,
  ListVolumesResponse,
  ValidateVolumeCapabilitiesRequest,
  ValidateVolumeCapabilitiesResponse,
} from "../../shared/csi/types.ts";
import {
  driverAvailableBytes,
  requestedSegment,
  requireRoom,
  segmentAvailableBytes,
  volumeSegments,
} from "./capacity.ts";
import type { DriverContext } from "./config.ts";
import { volumeMessage } from "./convert.ts";
import { CsiError, invalidArgument, notFound } from "./errors.ts";
import { checkMutableParameters, mutableParametersProblem } from "./mutable-parameters.ts";
import { paginate } from "./paging.ts";
import type { VolumeRecord } from "./state.ts";
import { resizeBacking } from "./storage.ts";
import { capabilitiesKind, capabilityProblem, capacityRange, requireField } from "./validate.ts";

/** Unknown ids succeed: the caller wanted the volume gone and it is. */
export async function deleteVolume(ctx: DriverContext, req: DeleteVolumeRequest): Promise<Empty> {
  const id = requireField("DeleteVolume", "volume_id", req.volumeId);
  const volume = ctx.store.volumes.get(id);
  if (!volume) return {};
  const nodes = Object.keys(volume.publishedNodes);
  if (nodes.length > 0) {
    throw new CsiError(
      "FAILED_PRECONDITION",
      `DeleteVolume: volume ${id} is still published to node(s) ${nodes.sort().join(", ")}`,
    );
  }
  ctx.store.drop(ctx.store.volumes, id);
  return {};
}

export async function expandVolume(
  ctx: DriverContext,
  req: ControllerExpandVolumeRequest,
): Promise<ControllerExpandVolumeResponse> {
  const method = "ControllerExpandVolume";
  const id = requireField(method, "volume_id", req.volumeId);
  if (!req.capacityRange) throw invalidArgument(`${method}: capacity_range missing in request`);
  const range = capacityRange(method, req.capacityRange);
  const target = range.required || range.limit;
  if (target === 0) throw invalidArgument(`${method}: capacity_range.required_bytes missing in request`);
  const volume = ctx.store.volumes.get(id);
  if (!volume) throw notFound(`${method}: volume ${id} does not exist`);
  // The resizer sends block or mount from the PV's volumeMode; the other kind is a caller's mistake.
  const asked = req.volumeCapability?.accessType;
  if (asked && asked !== volume.kind) {
    throw invalidArgument(`${method}: volume ${id} is a ${volume.kind} volume, not ${asked}`);
  }
  // A filesystem grows on the node; only a node plugin that can do it is asked to.
  const needsNode =
    ctx.config.nodeExpansionKinds.has(volume.kind) && ctx.config.nodeCapabilities.has("EXPAND_VOLUME");
  if (range.limit > 0 && volume.capacityBytes > range.limit) {
    throw new CsiError(
      "OUT_OF_RANGE",
      `${method}: volume ${id} already has ${volume.capacityBytes} bytes, more than limit_bytes ${range.limit}`,
    );
  }
  // Volumes never shrink; a request at or below the size is already done.
  if (target > volume.capacityBytes) {
    if (ctx.config.volumeExpansion === "OFFLINE") refuseInUse(method, volume);
    if (target > ctx.config.maxVolumeBytes) {
      throw new CsiError(
        "OUT_OF_RANGE",
        `${method}: ${target} bytes exceeds the maximum volume size of ${ctx.config.maxVolumeBytes} bytes`,
      );
    }
    requireRoom(
      ctx,
      method,
      `growing volume ${id} to ${target} bytes`,
      volumeSegments(ctx.config, volume),
      target - volume.capacityBytes,
    );
    await resizeBacking(ctx.store.abs(volume.path), volume.kind, target);
    // The filesystem keeps its size until NodeExpandVolume grows it, unless no node step is needed.
    volume.nodeCapacityBytes = needsNode ? (volume.nodeCapacityBytes ?? volume.capacityBytes) : target;
    volume.capacityBytes = target;
    ctx.store.changed();
  }
  return { capacityBytes: BigInt(volume.capacityBytes), nodeExpansionRequired: needsNode };
}

/** An offline-only driver grows a volume only while no node uses it. */
function refuseInUse(method: string, volume: VolumeRecord): void {
  const nodes = new Set([
    ...Object.keys(volume.publishedNodes),
    ...Object.keys(volume.nodeStaged ?? {}),
    ...Object.keys(volume.nodeMounts ?? {}),
  ]);
  if (nodes.size === 0) return;
  throw new CsiError(
    "FAILED_PRECONDITION",
    `${method}: volume ${volume.id} is in use on node(s) ${[...nodes].sort().join(", ")}; this driver only expands volumes offline`,
  );
}

/**
 * Applies the given mutable parameters over the recorded ones (keys not
 * named keep their values). An unsupported key or value is INVALID_ARGUMENT:
 * the external-resizer marks the claim's modification Infeasible.
 */
export async function modifyVolume(
  ctx: DriverContext,
  req: ControllerModifyVolumeRequest,
): Promise<ControllerModifyVolumeResponse> {
  const method = "ControllerModifyVolume";
  const id = requireField(method, "volume_id", req.volumeId);
  const given = req.mutableParameters ?? {};
  if (Object.keys(given).length === 0)
    throw invalidArgument(`${method}: mutable_parameters missing in request`);
  const volume = ctx.store.volumes.get(id);
  if (!volume) throw notFound(`${method}: volume ${id} does not exist`);
  const params = checkMutableParameters(method, given);
  const merged = { ...volume.mutableParameters, ...params };
  if (JSON.stringify(merged) !== JSON.stringify(volume.mutableParameters ?? {})) {
    volume.mutableParameters = merged;
    ctx.store.changed();
  }
  return {};
}

export async function validateVolumeCapabilities(
  ctx: DriverContext,
  req: ValidateVolumeCapabilitiesRequest,
): Promise<ValidateVolumeCapabilitiesResponse> {
  const method = "ValidateVolumeCapabilities";
  const id = requireField(method, "volume_id", req.volumeId);
  const caps = req.volumeCapabilities ?? [];
  if (caps.length === 0) {
    throw invalidArgument(`${method}: volume_capabilities missing in request`);
  }
  const volume = ctx.store.volumes.get(id);
  if (!volume) throw notFound(`${method}: volume ${id} does not exist`);
  const snmw = ctx.config.controllerCapabilities.has("SINGLE_NODE_MULTI_WRITER");
  for (const [i, cap] of caps.entries()) {
    const problem = capabilityProblem(cap, snmw);
    if (problem) return { message: `volume_capabilities[${i}]: ${problem}` };
    if (cap.accessType !== volume.kind) {
      return {
        message: `volume_capabilities[${i}] asks for ${cap.accessType} access to a ${volume.kind} volume`,
      };
    }
  }
  const mutable = req.mutableParameters ?? {};
  if (Object.keys(mutable).length > 0) {
    if (!ctx.config.controllerCapabilities.has("MODIFY_VOLUME")) {
      return { message: "mutable_parameters are not supported: the driver does not advertise MODIFY_VOLUME" };
    }
    const problem = mutableParametersProblem(mutable);
    if (problem) return { message: problem };
  }
  return {
    confirmed: {
      volumeContext: req.volumeContext ?? {},
      volumeCapabilities: caps,
      parameters: req.parameters ?? {},
      mutableParameters: { ...mutable },
    },
    message: "",
  };
}

export async function listVolumes(ctx: DriverContext, req: ListVolumesRequest): Promise<ListVolumesResponse> {
  const page = paginate("ListVolumes", [...ctx.store.volumes.values()], (v) => v.id, req);
  const withNodes = ctx.config.controllerCapabilities.has("LIST_VOLUMES_PUBLISHED_NODES");
  return {
    entries: page.items.map((v) => ({
      volume: volumeMessage(ctx, v),
      status: withNodes ? { publishedNodeIds: Object.keys(v.publishedNodes).sort() } : undefined,
    })),
    nextToken: page.nextToken,
  };
}

export async function getCapacity(ctx: DriverContext, req: GetCapacityRequest): Promise<GetCapacityResponse> {
  // Capabilities the driver cannot serve have no capacity, as the spec asks.
  if (req.volumeCapabilities && req.volumeCapabilities.length > 0) {
    try {
      capabilitiesKind(
        "GetCapacity",
        "volume_capabilities",
        req.volumeCapabilities,
        ctx.config.controllerCapabilities.has("SINGLE_NODE_MULTI_WRITER"),
      );
    } catch {
      return { availableCapacity: 0n, maximumVolumeSize: { value: 0n } };
    }
  }
  // Without a segment: the driver-wide pool, regardless of topology (as the spec allows).
  const segment = ctx.config.pluginCapabilities.has("VOLUME_ACCESSIBILITY_CONSTRAINTS")
    ? requestedSegment(ctx.config, req.accessibleTopology)
    : undefined;
  if (segment === null) return { availableCapacity: 0n, maximumVolumeSize: { value: 0n } };
  const driverWide = driverAvailableBytes(ctx);
  const available =
    segment === undefined ? driverWide : Math.min(driverWide, segmentAvailableBytes(ctx, segment));
  return {
    availableCapacity: BigInt(available),
    maximumVolumeSize: { value: BigInt(Math.min(available, ctx.config.maxVolumeBytes)) },
  };
}
