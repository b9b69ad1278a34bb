// CreateVolume: idempotent by name, capacity-limited, optionally filled from
// another volume (clone) or a snapshot (restore), placed in the requested
// topology. Runs serialized with every other mutating call.
import { randomUUID } from "node:crypto";
import type {
  CreateVolumeRequest,
  CreateVolumeResponse,
  StringMap,
  VolumeContentSource,
} from "../../shared/csi/types.ts";
import { requireRoom, volumeSegments } from "./capacity.ts";
import type { DriverContext } from "./config.ts";
import { volumeMessage } from "./convert.ts";
import { CsiError, invalidArgument, notFound } from "./errors.ts";
import { checkMutableParameters } from "./mutable-parameters.ts";
import type { ContentSourceRecord, VolumeKind, VolumeRecord } from "./state.ts";
import { copyBacking, createBacking, removeBacking } from "./storage.ts";
import { volumesDir } from "./store.ts";
import { chooseTopology, satisfiesRequisite } from "./topology.ts";
import { capabilitiesKind, capacityRange, fits, type Range, requireField } from "./validate.ts";

const method = "CreateVolume";

/** The existing data a new volume starts from. */
interface Source {
  record: ContentSourceRecord;
  kind: VolumeKind;
  sizeBytes: number;
  path: string;
}

export async function createVolume(
  ctx: DriverContext,
  req: CreateVolumeRequest,
): Promise<CreateVolumeResponse> {
  const { config, store } = ctx;
  const name = requireField(method, "name", req.name);
  const kind = capabilitiesKind(
    method,
    "volume_capabilities",
    req.volumeCapabilities,
    config.controllerCapabilities.has("SINGLE_NODE_MULTI_WRITER"),
  );
  const range = capacityRange(method, req.capacityRange);
  const sourceRecord = contentSource(ctx, req.volumeContentSource);
  const mutable = mutableParameters(ctx, req.mutableParameters);

  const existing = store.volumeByName(name);
  if (existing) {
    const why = incompatibility(existing, kind, range, sourceRecord, req);
    if (why) {
      throw new CsiError(
        "ALREADY_EXISTS",
        `${method}: volume ${JSON.stringify(name)} already exists (id ${existing.id}) but is incompatible: ${why}`,
      );
    }
    return { volume: volumeMessage(ctx, existing) };
  }

  const source = sourceRecord && resolveSource(ctx, sourceRecord, kind);
  const accessibleTopology = config.pluginCapabilities.has("VOLUME_ACCESSIBILITY_CONSTRAINTS")
    ? [chooseTopology(req.accessibilityRequirements, config.topologyKey, config.nodeId)]
    : [];
  const size = sizeFor(ctx, range, source);
  // The chosen segment must have room: the provisioner then tries another node, as with hostpath.
  requireRoom(ctx, method, `a volume of ${size} bytes`, volumeSegments(config, { accessibleTopology }), size);
  const id = randomUUID();
  const path = `${volumesDir}/${id}`;
  const volume: VolumeRecord = {
    id,
    name,
    capacityBytes: size,
    nodeCapacityBytes: size,
    kind,
    path,
    parameters: { ...req.parameters },
    ...(sourceRecord ? { contentSource: sourceRecord } : {}),
    ...(Object.keys(mutable).length > 0 ? { mutableParameters: mutable } : {}),
    accessibleTopology,
    publishedNodes: {},
    createdAt: new Date().toISOString(),
  };
  try {
    if (source) await copyBacking(store.abs(source.path), store.abs(path), kind, size);
    else await createBacking(store.abs(path), kind, size);
  } catch (err) {
    await removeBacking(store.abs(path));
    throw new CsiError("INTERNAL", `${method}: creating the backing ${kind} volume failed: ${String(err)}`);
  }
  store.volumes.set(id, volume);
  // Saved before the reply goes out (driver.ts), together with the burst's other changes.
  store.changed();
  return { volume: volumeMessage(ctx, volume) };
}

/**
 * The mutable parameters (a VolumeAttributesClass's) to record; the
 * external-provisioner sends them only to a driver with MODIFY_VOLUME.
 * Not part of the idempotency check: they may have been modified since.
 */
function mutableParameters(ctx: DriverContext, given: StringMap | undefined): Record<string, string> {
  if (!given || Object.keys(given).length === 0) return {};
  if (!ctx.config.controllerCapabilities.has("MODIFY_VOLUME")) {
    throw invalidArgument(
      `${method}: mutable_parameters are not supported: the driver does not advertise MODIFY_VOLUME`,
    );
  }
  return checkMutableParameters(method, given);
}

function contentSource(
  ctx: DriverContext,
  src: VolumeContentSource | undefined,
): ContentSourceRecord | undefined {
  if (!src?.type) return undefined;
  const caps = ctx.config.controllerCapabilities;
  if (src.type === "snapshot") {
    if (!caps.has("CREATE_DELETE_SNAPSHOT")) {
      throw invalidArgument(`${method}: restoring from a snapshot is not supported by this driver`);
    }
    return {
      snapshotId: requireField(
        method,
        "volume_content_source.snapshot.snapshot_id",
        src.snapshot?.snapshotId,
      ),
    };
  }
  if (!caps.has("CLONE_VOLUME"))
    throw invalidArgument(`${method}: cloning volumes is not supported by this driver`);
  return {
    volumeId: requireField(method, "volume_content_source.volume.volume_id", src.volume?.volumeId),
  };
}

function resolveSource(ctx: DriverContext, source: ContentSourceRecord, kind: VolumeKind): Source {
  let found: Source;
  if ("snapshotId" in source) {
    const snap = ctx.store.snapshots.get(source.snapshotId);
    if (!snap) throw notFound(`${method}: source snapshot ${source.snapshotId} does not exist`);
    found = { record: source, kind: snap.kind, sizeBytes: snap.sizeBytes, path: snap.path };
  } else {
    const vol = ctx.store.volumes.get(source.volumeId);
    if (!vol) throw notFound(`${method}: source volume ${source.volumeId} does not exist`);
    found = { record: source, kind: vol.kind, sizeBytes: vol.capacityBytes, path: vol.path };
  }
  if (found.kind !== kind) {
    throw invalidArgument(
      `${method}: the source is a ${found.kind} volume, the request asks for ${kind} access`,
    );
  }
  return found;
}

/** The size to allocate, or why the request cannot be had. */
function sizeFor(ctx: DriverContext, range: Range, source: Source | undefined): number {
  const { config } = ctx;
  let size = range.required;
  if (size === 0) {
    size = source?.sizeBytes ?? config.defaultVolumeBytes;
    if (range.limit > 0) size = Math.min(size, range.limit);
  }
  if (source && size < source.sizeBytes) {
    throw new CsiError(
      "OUT_OF_RANGE",
      `${method}: requested capacity ${size} is smaller than the source's ${source.sizeBytes} bytes`,
    );
  }
  if (size > config.maxVolumeBytes) {
    throw new CsiError(
      "OUT_OF_RANGE",
      `${method}: requested capacity ${size} exceeds the maximum volume size of ${config.maxVolumeBytes} bytes`,
    );
  }
  return size;
}

/** Why an existing volume of the same name does not answer this request, or undefined. */
function incompatibility(
  v: VolumeRecord,
  kind: VolumeKind,
  range: Range,
  source: ContentSourceRecord | undefined,
  req: CreateVolumeRequest,
): string | undefined {
  if (v.kind !== kind) return `it is a ${v.kind} volume, the request asks for ${kind} access`;
  if (!fits(range, v.capacityBytes)) {
    return `its capacity of ${v.capacityBytes} bytes is outside the requested range (required ${range.required}, limit ${range.limit || "none"})`;
  }
  if (JSON.stringify(v.contentSource ?? null) !== JSON.stringify(source ?? null)) {
    return "it was created from a different content source";
  }
  if (!sameMap(v.parameters, req.parameters)) return "it was created with different parameters";
  if (!satisfiesRequisite(v.accessibleTopology, req.accessibilityRequirements)) {
    return "it is not accessible from any requisite topology";
  }
  return undefined;
}

function sameMap(a: StringMap, b: StringMap = {}): boolean {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => a[k] === b[k]);
}
