// Storage capacity per topology segment. The sandbox driver serves every
// node, and each node's segment ({topologyKey: node}) has a pool of its own,
// as each hostpath node has its own disk. A volume takes room in the segments
// it is accessible from; the driver-wide total still bounds the sum.
import type { Topology } from "../../shared/csi/types.ts";
import type { DriverConfig, DriverContext } from "./config.ts";
import { CsiError } from "./errors.ts";
import type { VolumeRecord } from "./state.ts";

/** The pool of every segment: one default size, and overrides by segment (the topology key's value). */
export class CapacityPools {
  private defaultBytes: number;
  private readonly overrides = new Map<string, number>();

  constructor(defaultBytes: number) {
    this.defaultBytes = defaultBytes;
  }

  get defaultSegmentBytes(): number {
    return this.defaultBytes;
  }

  setDefault(bytes: number): void {
    this.defaultBytes = bytes;
  }

  set(segment: string, bytes: number): void {
    this.overrides.set(segment, bytes);
  }

  /** Back to the default pool. */
  unset(segment: string): void {
    this.overrides.delete(segment);
  }

  totalOf(segment: string): number {
    return this.overrides.get(segment) ?? this.defaultBytes;
  }

  overridden(): string[] {
    return [...this.overrides.keys()];
  }
}

/**
 * The segments (values of the topology key) a volume takes room in. A volume
 * recorded without topology (a driver without VOLUME_ACCESSIBILITY_CONSTRAINTS)
 * lives on the driver's own node.
 */
export function volumeSegments(config: DriverConfig, v: Pick<VolumeRecord, "accessibleTopology">): string[] {
  const named = v.accessibleTopology
    .map((t) => t[config.topologyKey])
    .filter((s): s is string => s !== undefined);
  return named.length > 0 ? [...new Set(named)] : [config.nodeId];
}

export function segmentUsedBytes(ctx: DriverContext, segment: string): number {
  let used = 0;
  for (const v of ctx.store.volumes.values()) {
    if (volumeSegments(ctx.config, v).includes(segment)) used += v.capacityBytes;
  }
  return used;
}

export function segmentAvailableBytes(ctx: DriverContext, segment: string): number {
  return Math.max(0, ctx.pools.totalOf(segment) - segmentUsedBytes(ctx, segment));
}

export function driverAvailableBytes(ctx: DriverContext): number {
  return Math.max(0, ctx.config.totalCapacityBytes - ctx.store.usedBytes());
}

/**
 * Refuses with RESOURCE_EXHAUSTED when `bytes` more do not fit in the
 * driver-wide total or in one of the segments (hostpath answers the same
 * code when its node's capacity runs out).
 */
export function requireRoom(
  ctx: DriverContext,
  method: string,
  what: string,
  segments: readonly string[],
  bytes: number,
): void {
  if (bytes <= 0) return;
  const free = driverAvailableBytes(ctx);
  if (bytes > free) {
    throw new CsiError(
      "RESOURCE_EXHAUSTED",
      `${method}: ${what} needs ${bytes} bytes, more than the ${free} bytes still available`,
    );
  }
  for (const segment of segments) {
    const left = segmentAvailableBytes(ctx, segment);
    if (bytes > left) {
      throw new CsiError(
        "RESOURCE_EXHAUSTED",
        `${method}: ${what} needs ${bytes} bytes, more than the ${left} bytes still available in topology segment ${ctx.config.topologyKey}=${segment}`,
      );
    }
  }
}

/**
 * The segment a GetCapacity request's accessible_topology names: undefined
 * when it names none (capacity regardless of topology), null when it names
 * keys this driver has no segments of (nothing can be provisioned there).
 */
export function requestedSegment(
  config: DriverConfig,
  topology: Topology | undefined,
): string | undefined | null {
  const segments = topology?.segments ?? {};
  const keys = Object.keys(segments);
  if (keys.length === 0) return undefined;
  if (keys.length !== 1 || keys[0] !== config.topologyKey) return null;
  return segments[config.topologyKey] || null;
}

export interface SegmentCapacity {
  segment: Record<string, string>;
  totalBytes: number;
  usedBytes: number;
  availableBytes: number;
}

/** What the admin API shows: the driver-wide pool and each known segment's. */
export interface CapacityReport {
  maxVolumeBytes: number;
  totalBytes: number;
  usedBytes: number;
  availableBytes: number;
  /** The pool of a segment without an override. */
  defaultSegmentBytes: number;
  /** The driver's nodes, every segment a volume lives in and every overridden one, sorted. */
  segments: SegmentCapacity[];
}

export function capacityReport(ctx: DriverContext): CapacityReport {
  const names = new Set<string>([...ctx.config.nodes, ...ctx.pools.overridden()]);
  for (const v of ctx.store.volumes.values()) for (const s of volumeSegments(ctx.config, v)) names.add(s);
  const used = ctx.store.usedBytes();
  return {
    maxVolumeBytes: ctx.config.maxVolumeBytes,
    totalBytes: ctx.config.totalCapacityBytes,
    usedBytes: used,
    availableBytes: driverAvailableBytes(ctx),
    defaultSegmentBytes: ctx.pools.defaultSegmentBytes,
    segments: [...names].sort().map((name) => {
      const segmentUsed = segmentUsedBytes(ctx, name);
      const total = ctx.pools.totalOf(name);
      return {
        segment: { [ctx.config.topologyKey]: name },
        totalBytes: total,
        usedBytes: segmentUsed,
        availableBytes: Math.max(0, total - segmentUsed),
      };
    }),
  };
}
