// A node's status.volumesAttached as the attach/detach controller reports
// it: the kubelet mounts a volume that needs an attach only once it is listed
// there. Ours are the CSI entries of drivers that attach; an entry of anyone
// else (in-tree plugins, drivers without attach) is kept as it is.
import type { CSIDriver, Node, PersistentVolume, VolumeAttachment } from "../kube/types.ts";
import { csiPluginPrefix } from "./constants.ts";
import { uniqueVolumeName } from "./volume-attachment-name.ts";

export interface AttachedVolume {
  name: string;
  devicePath: string;
}

/** The driver of a `kubernetes.io/csi/<driver>^<handle>` name, or undefined for any other name. */
export function csiDriverOfVolumeName(name: string): string | undefined {
  if (!name.startsWith(csiPluginPrefix)) return undefined;
  const rest = name.slice(csiPluginPrefix.length);
  const cut = rest.indexOf("^");
  return cut > 0 ? rest.slice(0, cut) : undefined;
}

/** No CSIDriver object means attach is required (upstream's default). */
export function driverAttaches(drivers: readonly CSIDriver[], driver: string): boolean {
  return drivers.find((d) => d.metadata.name === driver)?.spec.attachRequired !== false;
}

/** The volume handle a VolumeAttachment attaches: from its PV, or from its inline CSI spec. */
function handleOf(va: VolumeAttachment, volumes: ReadonlyMap<string, PersistentVolume>): string | undefined {
  const pvName = va.spec.source.persistentVolumeName;
  if (pvName) return volumes.get(pvName)?.spec.csi?.volumeHandle;
  const inline = va.spec.source.inlineVolumeSpec?.csi as { volumeHandle?: unknown } | undefined;
  return typeof inline?.volumeHandle === "string" && inline.volumeHandle !== ""
    ? inline.volumeHandle
    : undefined;
}

export interface VolumesAttachedInput {
  node: Node;
  /** VolumeAttachments (other nodes' are ignored). */
  attachments: readonly VolumeAttachment[];
  /** The PVs those VolumeAttachments name. */
  volumes: readonly PersistentVolume[];
  drivers: readonly CSIDriver[];
  /** Names of VolumeAttachments whose detach starts now: they leave the list first. */
  detaching?: ReadonlySet<string>;
}

/**
 * What the node should list: every attached VolumeAttachment of the node
 * that is not being detached, plus every entry that is not ours, sorted by
 * name, one entry per name. CSI's Attach returns no device path, hence "".
 */
export function expectedVolumesAttached(input: VolumesAttachedInput): AttachedVolume[] {
  const nodeName = input.node.metadata.name;
  const volumes = new Map(input.volumes.map((v) => [v.metadata.name, v]));
  const out = new Map<string, AttachedVolume>();
  // An attached VolumeAttachment whose PV we cannot see: its driver's entries are left alone.
  const unresolved = new Set<string>();
  for (const va of input.attachments) {
    if (va.spec.nodeName !== nodeName || va.status?.attached !== true) continue;
    if (va.metadata.deletionTimestamp || input.detaching?.has(va.metadata.name)) continue;
    if (!driverAttaches(input.drivers, va.spec.attacher)) continue;
    const handle = handleOf(va, volumes);
    if (handle === undefined) {
      unresolved.add(va.spec.attacher);
      continue;
    }
    const name = uniqueVolumeName(va.spec.attacher, handle);
    out.set(name, { name, devicePath: "" });
  }
  for (const entry of input.node.status?.volumesAttached ?? []) {
    if (typeof entry?.name !== "string" || out.has(entry.name)) continue;
    const driver = csiDriverOfVolumeName(entry.name);
    const ours = driver !== undefined && driverAttaches(input.drivers, driver) && !unresolved.has(driver);
    if (!ours) out.set(entry.name, { name: entry.name, devicePath: entry.devicePath ?? "" });
  }
  return [...out.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** Same entries regardless of order: another writer's order is no reason to write. */
export function sameVolumesAttached(
  current: readonly AttachedVolume[] | undefined,
  desired: readonly AttachedVolume[],
): boolean {
  const have = current ?? [];
  const want = new Map(desired.map((e) => [e.name, e.devicePath]));
  if (have.length !== want.size || new Set(have.map((e) => e?.name)).size !== have.length) return false;
  return have.every((e) => want.get(e?.name) === (e?.devicePath ?? ""));
}

/**
 * The node-status invariant, for checkers: entries the node should list but
 * does not, and entries it lists but should not (duplicates count as extra).
 */
export function volumesAttachedMismatch(input: VolumesAttachedInput): { missing: string[]; extra: string[] } {
  const want = new Set(expectedVolumesAttached(input).map((e) => e.name));
  const have = (input.node.status?.volumesAttached ?? []).map((e) => e?.name);
  const seen = new Set<string>();
  const extra: string[] = [];
  for (const name of have) {
    if (!want.has(name) || seen.has(name)) extra.push(String(name));
    seen.add(name);
  }
  return { missing: [...want].filter((n) => !seen.has(n)), extra };
}
