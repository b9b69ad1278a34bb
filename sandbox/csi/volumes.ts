// DeleteVolume, ControllerExpandVolume, ValidateVolumeCapabilities,
// ListVolumes and GetCapacity.
import type {
  ControllerExpandVolumeRequest,
  ControllerExpandVolumeResponse,
  DeleteVolumeRequest,
  Empty,
  GetCapacityRequest,
  GetCapacityResponse,
  ListVolumesRequest,
  ListVolumesResponse,
  ValidateVolumeCapabilitiesRequest,
  ValidateVolumeCapabilitiesResponse,
} from "../../shared/csi/types.ts";
import type { DriverContext } from "./config.ts";
import { volumeMessage } from "./convert.ts";
import { CsiError, invalidArgument, notFound } from "./errors.ts";
import { paginate } from "./paging.ts";
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
  if (range.limit > 0 && volume.capacityBytes > range.limit) {
    throw new CsiError(
      "OUT_OF_RANGE",
      `${method}: volume ${id} already has ${volume.capacityBytes} bytes, more than limit_bytes ${range.limit}`,
    );
  }
  // Volumes never shrink; a request at or below the size is already done.
  if (target > volume.capacityBytes) {
    if (target > ctx.config.maxVolumeBytes) {
      throw new CsiError(
        "OUT_OF_RANGE",
        `${method}: ${target} bytes exceeds the maximum volume size of ${ctx.config.maxVolumeBytes} bytes`,
      );
    }
    const free = ctx.config.totalCapacityBytes - ctx.store.usedBytes();
    if (target - volume.capacityBytes > free) {
      throw new CsiError(
        "RESOURCE_EXHAUSTED",
        `${method}: growing volume ${id} to ${target} bytes needs more than the ${Math.max(0, free)} bytes available`,
      );
    }
    await resizeBacking(ctx.store.abs(volume.path), volume.kind, target);
    volume.capacityBytes = target;
    ctx.store.changed();
  }
  // No node service expansion here: the sandbox never mounts a filesystem.
  return { capacityBytes: BigInt(volume.capacityBytes), nodeExpansionRequired: false };
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
  return {
    confirmed: {
      volumeContext: req.volumeContext ?? {},
      volumeCapabilities: caps,
      parameters: req.parameters ?? {},
      mutableParameters: {},
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
  const available = Math.max(0, ctx.config.totalCapacityBytes - ctx.store.usedBytes());
  return {
    availableCapacity: BigInt(available),
    maximumVolumeSize: { value: BigInt(Math.min(available, ctx.config.maxVolumeBytes)) },
  };
}
