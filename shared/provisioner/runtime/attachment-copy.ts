// The provisioner's watched copy of the VolumeAttachments, indexed by the PV
// each one names, read by a deletion instead of listing every attachment of
// the cluster per volume (upstream checks its VolumeAttachment informer:
// "persistentvolume %s is still attached to node %s").
//
// Why the copy is safe to believe, and when it is not read:
// - It lags the API, as upstream's informer does. A VA the copy still holds
//   after the API deleted it (a detach just done) only delays the deletion
//   to the retry: the safe direction.
// - The dangerous case is the other one: a VA created just before the
//   deletion that the copy has not seen yet, so "no attachment" would delete
//   a volume still attached. A VA for a volume is created while a claim is
//   bound to it, so before the write that took the PV out of Bound, at or
//   before the revision of the PV the decision is made on: "no attachment" is
//   believed only when the copy covers that revision (every VA change up to
//   it is in the copy, ObjectStore.covers). A VA created after it races the
//   deletion with any read, a live list included.
// - A copy behind that revision: a busy watch passes it within moments, so it
//   is waited for briefly; otherwise (a quiet watch never moves, whatever the
//   API holds) the VAs are listed live, one list at a time shared by every
//   deletion waiting for it, and the copy takes that list as its state at the
//   list's revision, so the deletions of PVs written before it read the copy.
// - A copy not synced (first use, dropped to spare the heap) is not read.
import type { KubeConfig } from "@kubernetes/client-node";
import { booleanFromEnv, type Env } from "../../config.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import type { ObjectStore } from "../../kube/object-store.ts";
import { compareResourceVersions } from "../../kube/resource-version.ts";
import { volumeAttachments } from "../../kube/resources.ts";
import type { PersistentVolume, VolumeAttachment } from "../../kube/types.ts";
import { lazyWatchedStore, type WatchedStore } from "../../kube/watched-store.ts";
import type { Logger } from "../../log.ts";

/** A watch that changed this recently is likely to pass a recent revision soon. */
const BUSY_WATCH_MS = 250;
/** How long a deletion waits for a busy copy to reach its PV's revision before listing. */
const CATCH_UP_WAIT_MS = 50;

export interface ListedAttachments {
  items: readonly VolumeAttachment[];
  resourceVersion: string | undefined;
}

export interface AttachmentCopy {
  readonly store: ObjectStore<VolumeAttachment>;
  readonly synced: boolean;
  /**
   * A live list of every VolumeAttachment. One is in flight at a time: a
   * caller arriving meanwhile gets that one (which may have been read before
   * its own PV). A synced copy takes it as its state at the list's revision.
   */
  relist(): Promise<ListedAttachments>;
}

/** What a deletion reads of a VA: identity, revision, attacher, node and the PV it names. */
export function attachmentSourceOnly(va: VolumeAttachment): VolumeAttachment {
  const { name, uid, resourceVersion } = va.metadata;
  const persistentVolumeName = va.spec.source?.persistentVolumeName;
  return {
    apiVersion: va.apiVersion,
    kind: va.kind,
    metadata: {
      name,
      ...(uid !== undefined ? { uid } : {}),
      ...(resourceVersion !== undefined ? { resourceVersion } : {}),
    },
    spec: {
      attacher: va.spec.attacher,
      nodeName: va.spec.nodeName,
      source: persistentVolumeName !== undefined ? { persistentVolumeName } : {},
    },
  };
}

/** The index key: the PV a VA attaches ("" for an inline volume, which no PV deletion asks for). */
function volumeOf(va: VolumeAttachment): string {
  return va.spec.source?.persistentVolumeName ?? "";
}

/** The copy's reads plus the shared live list (see AttachmentCopy.relist). */
export function attachmentCopyOf(
  watched: Pick<WatchedStore<VolumeAttachment>, "store" | "synced">,
  json: KubeJsonClient,
): AttachmentCopy {
  let inFlight: Promise<ListedAttachments> | undefined;
  const list = async (): Promise<ListedAttachments> => {
    try {
      const listed = await json.list<VolumeAttachment>(volumeAttachments);
      // A copy not synced (still listing, or dropped) must not fill up from here.
      if (watched.synced)
        watched.store.replaceWithList(listed.items.map(attachmentSourceOnly), listed.resourceVersion);
      return { items: listed.items, resourceVersion: listed.resourceVersion };
    } finally {
      // Cleared before any sharer resumes: a sharer that lists again starts a list of its own.
      inFlight = undefined;
    }
  };
  return {
    get store() {
      return watched.store;
    },
    get synced() {
      return watched.synced;
    },
    relist: () => {
      inFlight ??= list();
      return inFlight;
    },
  };
}

/** The attachments of one PV, as a list read at or after revision `rv`. */
async function listedSince(copy: AttachmentCopy, pvName: string, rv: string | undefined) {
  let listed = await copy.relist();
  // A shared list may have been read before the PV's write; one started after that list ended was not.
  const order = compareResourceVersions(listed.resourceVersion, rv);
  if (order === undefined || order < 0) listed = await copy.relist();
  return listed.items.filter((va) => volumeOf(va) === pvName);
}

function fromCopy(copy: AttachmentCopy, pvName: string): readonly VolumeAttachment[] {
  const { store } = copy;
  return store.byIndex(pvName) ?? store.items().filter((va) => volumeOf(va) === pvName);
}

/**
 * The VolumeAttachments naming `volume`, for its deletion: from the copy when
 * it covers the volume's revision, else from a live list (see the top of this file).
 */
export async function attachmentsOf(
  kube: KubeJsonClient,
  volume: PersistentVolume,
  copy: AttachmentCopy | undefined,
): Promise<readonly VolumeAttachment[]> {
  const pvName = volume.metadata.name;
  if (!copy) {
    const listed = await kube.list<VolumeAttachment>(volumeAttachments);
    return listed.items.filter((va) => volumeOf(va) === pvName);
  }
  const rv = volume.metadata.resourceVersion;
  if (copy.synced && copy.store.covers(rv)) return fromCopy(copy, pvName);
  if (copy.synced && copy.store.changedWithin(BUSY_WATCH_MS)) {
    const covered = await copy.store.whenCovers(rv, CATCH_UP_WAIT_MS);
    // Dropped while waiting: the store is a fresh, empty one.
    if (covered && copy.synced) return fromCopy(copy, pvName);
  }
  return listedSince(copy, pvName, rv);
}

export interface AttachmentCopyOptions {
  kubeConfig: KubeConfig;
  json: KubeJsonClient;
  log: Logger;
}

/** The copy, started by its first use (which finds it not synced and lists); `stop` ends it if started. */
export function lazyAttachmentCopy(options: AttachmentCopyOptions): {
  get: () => AttachmentCopy;
  stop: () => Promise<void>;
} {
  const lazy = lazyWatchedStore<VolumeAttachment>({
    kubeConfig: options.kubeConfig,
    json: options.json,
    resource: volumeAttachments,
    log: options.log.child({ cache: "volumeattachments" }),
    indexBy: volumeOf,
    keep: attachmentSourceOnly,
    // What is kept is a few names and a revision, well under the default estimate.
    bytesPerObject: 1024,
  });
  let copy: AttachmentCopy | undefined;
  return {
    get: () => {
      copy ??= attachmentCopyOf(lazy.get(), options.json);
      return copy;
    },
    stop: () => lazy.stop(),
  };
}

/** The copy as PROVISIONER_ATTACHMENT_CACHE says (default on); undefined when turned off. */
export function attachmentCopyFromEnv(
  env: Env,
  options: AttachmentCopyOptions,
): ReturnType<typeof lazyAttachmentCopy> | undefined {
  if (!booleanFromEnv(env, "PROVISIONER_ATTACHMENT_CACHE", true)) return undefined;
  return lazyAttachmentCopy(options);
}
