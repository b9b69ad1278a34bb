// NodeExpandVolume: the node plugin grows the filesystem of a volume staged
// or published on its node to the size of the device, as resize2fs would.
// With the controller's EXPAND_VOLUME, the device must have been grown first
// (a larger request is OUT_OF_RANGE); a driver without it grows the volume
// here, as the resizer expects of node-only expansion.
import type { NodeExpandVolumeRequest, NodeExpandVolumeResponse } from "../../shared/csi/types.ts";
import { requireRoom, volumeSegments } from "./capacity.ts";
import type { DriverContext } from "./config.ts";
import { CsiError, invalidArgument, notFound } from "./errors.ts";
import { requirePath } from "./node-access.ts";
import { resizeBacking } from "./storage.ts";
import { capabilityProblem, capacityRange, requireField } from "./validate.ts";

const method = "NodeExpandVolume";

export async function expandNodeVolume(
  ctx: DriverContext,
  node: string,
  req: NodeExpandVolumeRequest,
): Promise<NodeExpandVolumeResponse> {
  const id = requireField(method, "volume_id", req.volumeId);
  const path = requirePath(method, "volume_path", req.volumePath);
  const range = capacityRange(method, req.capacityRange);
  const volume = ctx.store.volumes.get(id);
  if (!volume) throw notFound(`${method}: volume ${id} does not exist`);
  const publishedHere = path in (volume.nodeMounts?.[node] ?? {});
  const stagedHere = volume.nodeStaged?.[node]?.path === path;
  if (!publishedHere && !stagedHere) {
    throw notFound(`${method}: volume ${id} is neither published nor staged at ${path} on node ${node}`);
  }
  const cap = req.volumeCapability;
  if (cap) {
    const problem = capabilityProblem(cap, ctx.config.nodeCapabilities.has("SINGLE_NODE_MULTI_WRITER"));
    if (problem) throw invalidArgument(`${method}: volume_capability: ${problem}`);
    if (cap.accessType !== volume.kind) {
      throw invalidArgument(`${method}: volume ${id} is a ${volume.kind} volume, not ${cap.accessType}`);
    }
  }

  // Without a range the filesystem fills the device, as the spec allows.
  const target = Math.max(range.required, volume.capacityBytes);
  if (range.limit > 0 && volume.capacityBytes > range.limit) {
    throw new CsiError(
      "OUT_OF_RANGE",
      `${method}: volume ${id} already has ${volume.capacityBytes} bytes, more than limit_bytes ${range.limit}`,
    );
  }
  if (target > volume.capacityBytes) {
    if (ctx.config.controllerCapabilities.has("EXPAND_VOLUME")) {
      throw new CsiError(
        "OUT_OF_RANGE",
        `${method}: requested ${target} bytes exceed volume ${id}'s capacity of ${volume.capacityBytes} bytes (ControllerExpandVolume first)`,
      );
    }
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
    volume.capacityBytes = target;
    ctx.store.changed();
  }
  if (volume.nodeCapacityBytes !== volume.capacityBytes) {
    volume.nodeCapacityBytes = volume.capacityBytes;
    ctx.store.changed();
  }
  return { capacityBytes: BigInt(volume.capacityBytes) };
}
