// The reads of the attacher: a VolumeAttachment and, as its decision asks
// for them one by one (../attachment-protocol.ts nextAttachmentRead), its PV,
// the controller-publish Secret and the CSINode of its node (PV and CSINode
// from watched copies where they may stand in); a PV and, when it may lose
// our finalizer, every VolumeAttachment. A missing object is
// `undefined` (the decision turns it into upstream's error text). A failed
// read for an attach or detach is that operation's error, recorded like any
// other; any other API failure is thrown.
import type { CsiClient } from "../../csi/client.ts";
import { grpcCodeOf } from "../../csi/errors.ts";
import type { ListVolumesEntry } from "../../csi/types.ts";
import { getOptional, lostToConcurrentWriter } from "../../kube/api-errors.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import { isMultiAttachAllowed } from "../../kube/multi-attach.ts";
import { csiNodes, persistentVolumes, volumeAttachments } from "../../kube/resources.ts";
import { readSecretData } from "../../kube/secrets.ts";
import type {
  CSINode,
  CSIPersistentVolumeSource,
  PersistentVolume,
  VolumeAttachment,
} from "../../kube/types.ts";
import type { WatchedStore } from "../../kube/watched-store.ts";
import { annAttachLock } from "../../kube/well-known.ts";
import type { AttachmentRead, AttachmentState, Failure, VolumeState } from "../attacher-steps.ts";
import { afterTakeBack, failedWith, nextAttachmentRead } from "../attachment-protocol.ts";
import type { Operation } from "../backoff.ts";
import type { AttachHandler } from "../handler.ts";
import { mayReleaseVolume } from "../volume-release.ts";

function loadVolume(kube: KubeJsonClient, name: string | undefined): Promise<PersistentVolume | undefined> {
  return name
    ? getOptional(() => kube.get<PersistentVolume>(persistentVolumes, name))
    : Promise.resolve(undefined);
}

/** A watched copy of the PVs (started on first use), read as upstream's attacher reads its PV lister. */
export type PvCopy = () => Pick<WatchedStore<PersistentVolume>, "store" | "synced">;

/**
 * The PV from the copy when the copy can stand in for a GET, else from the
 * API. What the attacher takes from a PV (spec.csi driver, volumeHandle,
 * readOnly, volumeAttributes, controllerPublishSecretRef, accessModes) is
 * immutable after creation, so any copy has it right. Two things it reads are
 * not: the deletionTimestamp and the attach/detach controller's lock
 * annotation, which fences a single-node volume to one node.
 * - A copy without our finalizer is checked by the write that adds it, a PATCH
 *   conditional on the copy's resourceVersion: a stale copy costs a conflict
 *   and a retry that reads live; else the next round decides on the PV the
 *   PATCH returned.
 * - A copy with our finalizer needs no write (as upstream), so nothing checks
 *   it: for a single-node volume it stands in only once it has reached the
 *   revision of the VA decided on (the lock is set before that VA is created).
 *   Its deletionTimestamp may lag as upstream's lister does; the finalizer
 *   keeps the PV until this VA is detached.
 * A copy that shows the PV deleting or locked to another node is read again
 * live, so a lagging copy never fails an attach. A detach reads only the
 * immutable fields (and the deletionTimestamp, which only starts the PV's own
 * sync, a live read). A PV the copy lacks is read live.
 */
async function loadVolumeFor(
  kube: KubeJsonClient,
  name: string | undefined,
  copies: { pvs: PvCopy | undefined; finalizer: string | undefined; va: VolumeAttachment },
): Promise<PersistentVolume | undefined> {
  const watched = name ? copies.pvs?.() : undefined;
  const copied = name && watched?.synced ? watched.store.get("", name) : undefined;
  if (copied) {
    const multi = isMultiAttachAllowed(copied);
    const lock = copied.metadata.annotations?.[annAttachLock];
    const refusing =
      Boolean(copied.metadata.deletionTimestamp) || (!multi && lock && lock !== copies.va.spec.nodeName);
    const held =
      copies.finalizer !== undefined && (copied.metadata.finalizers ?? []).includes(copies.finalizer);
    const reached = watched?.store.covers(copies.va.metadata.resourceVersion) === true;
    if (!refusing && (!held || multi || reached)) return copied;
  }
  return loadVolume(kube, name);
}

/** A watched copy of the CSINodes (started on first use), read as upstream's attacher reads its CSINode lister. */
export type CsiNodeCopy = () => Pick<WatchedStore<CSINode>, "store" | "synced">;

/** From the copy when it is synced and has the node, else from the API: a node registered a moment ago is never missed. */
async function loadCsiNode(
  kube: KubeJsonClient,
  nodeName: string,
  copy: CsiNodeCopy | undefined,
): Promise<CSINode | undefined> {
  const watched = copy?.();
  const copied = watched?.synced ? watched.store.get("", nodeName) : undefined;
  return copied ?? (await getOptional(() => kube.get<CSINode>(csiNodes, nodeName)));
}

/**
 * The controllerPublishSecretRef's data (upstream getCredentialsFromPV);
 * undefined secrets when the source names none, an error when it names a
 * Secret that does not exist.
 */
async function loadPublishSecrets(
  kube: KubeJsonClient,
  csi: CSIPersistentVolumeSource,
): Promise<{ ok: true; value: Record<string, string> | undefined } | { ok: false; error: string }> {
  const ref = csi.controllerPublishSecretRef;
  if (!ref) return { ok: true, value: undefined };
  const name = ref.name ?? "";
  const namespace = ref.namespace ?? "";
  const data = name && namespace ? await readSecretData(kube, { name, namespace }) : undefined;
  if (!data?.ok)
    return {
      ok: false,
      error: `failed to load secret "${namespace}/${name}": secrets "${name}" not found`,
    };
  return { ok: true, value: data.value };
}

/** Every ListVolumes page (upstream CSIVolumeLister): `maxEntries` 0 lets the driver choose. */
export async function listAllVolumes(csi: CsiClient, maxEntries = 0): Promise<ListVolumesEntry[]> {
  const entries: ListVolumesEntry[] = [];
  let startingToken = "";
  const seen = new Set<string>();
  do {
    const page = await csi.listVolumes({ maxEntries, startingToken });
    entries.push(...page.entries);
    startingToken = page.nextToken;
    // A driver that hands back a token twice would page forever.
    if (startingToken !== "" && seen.has(startingToken))
      throw new Error(`ListVolumes returned the token ${JSON.stringify(startingToken)} twice`);
    seen.add(startingToken);
  } while (startingToken !== "");
  return entries;
}

export function loadAttachment(kube: KubeJsonClient, name: string): Promise<VolumeAttachment | undefined> {
  return getOptional(() => kube.get<VolumeAttachment>(volumeAttachments, name));
}

export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** An attach or detach that failed with `err`; only an attach records a gRPC code (upstream status.FromError). */
export function failureOf(op: Operation, err: unknown, now: Date, prefix?: string): Failure {
  const message = prefix ? `${prefix}: ${messageOf(err)}` : messageOf(err);
  const grpcCode = op === "attach" && !prefix ? grpcCodeOf(err) : undefined;
  return { op, message, ...(grpcCode !== undefined ? { grpcCode } : {}), at: now, cause: err };
}

/** The watched copies a sync may read; `pvs` only on a first attempt (a lost race reads afresh). */
export interface AttachmentCopies {
  csiNodes?: CsiNodeCopy | undefined;
  pvs?: PvCopy | undefined;
}

async function readFor(
  kube: KubeJsonClient,
  s: AttachmentState,
  need: AttachmentRead,
  now: () => Date,
  copies: AttachmentCopies,
) {
  switch (need.read) {
    case "pv": {
      const pv = await loadVolumeFor(kube, need.name, {
        pvs: copies.pvs,
        finalizer: s.handler.finalizer,
        va: s.va,
      });
      return { ...s, pv: pv ?? null };
    }
    case "secrets":
      return { ...s, secrets: await loadPublishSecrets(kube, need.csi) };
    case "csiNode":
      return { ...s, csiNode: (await loadCsiNode(kube, need.nodeName, copies.csiNodes)) ?? null };
    case "successor":
      return afterTakeBack(s, await loadAttachment(kube, need.name), now());
  }
}

/** Makes the reads the decision asks for, one after the other, starting from `s`. */
export async function completeAttachmentState(
  kube: KubeJsonClient,
  start: AttachmentState,
  now: () => Date,
  copies: AttachmentCopies = {},
): Promise<AttachmentState> {
  let s = start;
  for (let need = nextAttachmentRead(s); need; need = nextAttachmentRead(s)) {
    try {
      s = await readFor(kube, s, need, now, copies);
    } catch (err) {
      if (need.read === "successor" || lostToConcurrentWriter(err)) throw err;
      s = failedWith(s, failureOf(need.op, err, now()));
    }
  }
  return s;
}

/** A PV and, when it may lose our finalizer, every VolumeAttachment; undefined when the PV is gone. */
export async function loadVolumeState(
  kube: KubeJsonClient,
  handler: AttachHandler,
  name: string,
): Promise<VolumeState | undefined> {
  const pv = await loadVolume(kube, name);
  if (!pv) return undefined;
  const attachments = mayReleaseVolume(pv, handler)
    ? (await kube.list<VolumeAttachment>(volumeAttachments)).items
    : [];
  return { kind: "volume", handler, pv, attachments };
}
