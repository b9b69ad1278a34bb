// Reads what one binder decision needs, fresh from the API, and no more: a
// bound claim needs one volume, only an unbound claim without volumeName
// needs to search the volumes. A watched copy of the volumes, when the
// process keeps one, picks the volume: a first attempt decides on the copy's
// pick (the write it leads to is conditional on that copy), a later one reads
// the pick again and judges the fresh copy, and "no volume matches" is believed
// only when the copy provably reflects every volume change up to the claim's
// own resourceVersion, or when the claim's class would provision a volume
// anyway; otherwise the search lists every volume, as before.
import { getOptional } from "../../kube/api-errors.ts";
import { claimClass, claimHasClass } from "../../kube/claim-class.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import type { ObjectStore } from "../../kube/object-store.ts";
import { persistentVolumeClaims, persistentVolumes, pods } from "../../kube/resources.ts";
import {
  listStorageClasses,
  readStorageClass,
  type StorageClassCopy,
} from "../../kube/storage-class-copy.ts";
import type { PersistentVolume, PersistentVolumeClaim, Pod, StorageClass } from "../../kube/types.ts";
import { annBindCompleted } from "../../kube/well-known.ts";
import { findBestMatchForClaim, winsWithoutSearch } from "../find-best-match.ts";
import { provisionsWhenNoMatch } from "../provision-claim.ts";
import type { ClaimSyncView } from "../sync-claim.ts";
import type { VolumeSyncView } from "../sync-volume.ts";
import { claimKey, hasAnnotation, isDelayBindingProvisioning } from "../volume-helpers.ts";
import type { VolumePicks } from "./volume-picks.ts";
import { type ClaimCache, caughtUp, copyAtLeast, refClaimFromCopy } from "./watched-reads.ts";

export function readClaim(
  kube: KubeJsonClient,
  namespace: string,
  name: string,
): Promise<PersistentVolumeClaim | undefined> {
  return getOptional(() => kube.get<PersistentVolumeClaim>(persistentVolumeClaims, name, namespace));
}

export function readVolume(kube: KubeJsonClient, name: string): Promise<PersistentVolume | undefined> {
  return getOptional(() => kube.get<PersistentVolume>(persistentVolumes, name));
}

/** A watch that delivered something this recently counts as busy. */
const BUSY_WATCH_MS = 250;
/**
 * How long a claim sync waits for a busy watch to reach the claim's revision
 * before listing every PV: a list of every PV costs the API server, etcd and
 * us far more than the wait, and a claim that matches nothing waits for a
 * provisioner anyway.
 */
const CATCH_UP_WAIT_MS = 250;

/** Stale picks one claim sync reads again before it lists every PV instead. */
const MAX_STALE_PICKS = 3;

/** How long after the copy started a claim sync still waits for its first list rather than listing itself. */
const FIRST_SYNC_WINDOW_MS = 2000;

/** A watched copy of every PersistentVolume (shared/kube/watched-store.ts). */
export interface VolumeCache {
  readonly synced: boolean;
  readonly store: ObjectStore<PersistentVolume>;
  /** True once the first list is in, waiting only within `windowMs` of the copy's start (WatchedStore.whenSynced). */
  whenSynced?(windowMs: number): Promise<boolean>;
}

/**
 * The cached volumes that could match the claim: unclaimed ones and those
 * whose claimRef names it, when the copy is indexed by volumeClaimIndexKey (the
 * others would be skipped as bound to another claim); else every one.
 */
function cacheCandidates(cache: VolumeCache, claim: PersistentVolumeClaim): readonly PersistentVolume[] {
  const unclaimed = cache.store.byIndex("");
  const named = cache.store.byIndex(claimKey(claim));
  if (unclaimed === undefined || named === undefined) return cache.store.items();
  return named.length === 0 ? unclaimed : [...unclaimed, ...named];
}

function withFresh(
  volumes: readonly PersistentVolume[],
  fresh: PersistentVolume | undefined,
): readonly PersistentVolume[] {
  if (!fresh) return volumes;
  return [...volumes.filter((v) => v.metadata.name !== fresh.metadata.name), fresh];
}

/**
 * The copy's best match for the claim, passing over volumes other in-flight
 * syncs of this process picked while another one fits (then the pick is held
 * for this claim); with no other fit, the best match whoever picked it: the
 * conditional write settles it, and a claim is never left Pending for a pick.
 */
function cachePick(
  candidates: readonly PersistentVolume[],
  claim: PersistentVolumeClaim,
  picks: VolumePicks | undefined,
): PersistentVolume | undefined {
  if (!picks) return findBestMatchForClaim(candidates, claim, false).volume;
  const own = claimKey(claim);
  const free = candidates.filter((v) => !picks.heldByOther(v.metadata.name, own));
  const pick =
    findBestMatchForClaim(free, claim, false).volume ??
    (free.length < candidates.length ? findBestMatchForClaim(candidates, claim, false).volume : undefined);
  if (pick) picks.hold(pick.metadata.name, own);
  return pick;
}

/**
 * The volumes the claim's search needs to see: the candidate alone when it is
 * the certain winner; the cache's winner alone, as the copy has it on a first
 * attempt (`pickFromCopy`), else when its fresh copy still matches; none when
 * the cache reflects the claim's revision and has no match, or when its class
 * provisions a volume for a claim that matches none (provisionsWhenNoMatch);
 * otherwise every PV (the search upstream does).
 */
async function matchingVolumes(
  kube: KubeJsonClient,
  claim: PersistentVolumeClaim,
  { candidate, cache, picks, pickFromCopy = false }: ClaimViewSources,
  provisionable: boolean,
): Promise<PersistentVolume[]> {
  // A candidate that fits the claim but need not win (a volume that just became Available)
  // joins the cache's candidates fresh: the copy may not have seen it yet.
  let fits: PersistentVolume | undefined;
  if (candidate) {
    const copied = (await copyAtLeast(cache, "", candidate.name, candidate.atLeast))?.found;
    // A copy that does not fit may only lack the volume's own sync's write (Available) just made: read it.
    const v =
      copied && findBestMatchForClaim([copied], claim, false).volume
        ? copied
        : await readVolume(kube, candidate.name);
    // Delay binding never skips a pre-bound volume, so the answer does not depend on the class here.
    if (v && winsWithoutSearch(v, claim, false)) return [v];
    if (v && findBestMatchForClaim([v], claim, false).volume) fits = v;
  }
  // Observed: a copy still making its first list. A process just started gets a burst of
  // claims at once; waiting for that one list beats each claim listing every PV itself
  // (upstream's workers wait for their informers' first sync). Not synced in time: list.
  if (cache && !cache.synced) await cache.whenSynced?.(FIRST_SYNC_WINDOW_MS);
  // Picks the copy had wrong (bound meanwhile, changed): a GET each is cheaper than a list of every PV.
  const stale = new Set<string>();
  for (let waited = false; cache?.synced; ) {
    // Without delay binding the cache's pick is the pre-bound volume if any, else the smallest
    // candidate; syncClaim judges it again with the class's real binding mode.
    const candidates = withFresh(cacheCandidates(cache, claim), fits).filter(
      (v) => !stale.has(v.metadata.name),
    );
    const hint = cachePick(candidates, claim, picks);
    if (hint === fits && fits) return [fits];
    if (hint) {
      // As upstream binds from its informer: the claimRef write is conditional on the copy's
      // resourceVersion, so a stale pick loses its race and the next attempt reads it live.
      if (pickFromCopy) return [hint];
      const fresh = await readVolume(kube, hint.metadata.name);
      if (fresh && findBestMatchForClaim([fresh], claim, false).volume) return [fresh];
      stale.add(hint.metadata.name);
      if (stale.size >= MAX_STALE_PICKS) break; // The copy is far behind: search for real.
      continue;
    }
    const rv = claim.metadata.resourceVersion;
    if (cache.store.covers(rv)) return [];
    // Observed: no match in a copy behind the claim, and its class provisions one. A volume the copy
    // missed would only be passed over for a new one, as upstream's informer may: no list, no wait.
    if (provisionable) return [];
    // Observed: no match, and the copy is behind the claim (often the claim's own newest write).
    // A watch that is busy passes that revision within moments: wait for it once, then look again.
    // A quiet watch may never pass it, so the search lists at once instead.
    if (waited || !cache.store.changedWithin(BUSY_WATCH_MS)) break;
    if (!(await cache.store.whenCovers(rv, CATCH_UP_WAIT_MS))) break;
    waited = true;
  }
  const listed = await kube.list<PersistentVolume>(persistentVolumes);
  // Only a copy in use learns from the list (one not yet synced, or dropped, must not fill up).
  if (cache?.synced) cache.store.replaceWithList(listed.items, listed.resourceVersion);
  return listed.items;
}

/**
 * A volume known to point at the claim. `atLeast`: the revision of the volume
 * event that named it; a volume copy that has reached it stands in for a GET.
 */
export interface Candidate {
  name: string;
  atLeast?: string | undefined;
}

/**
 * The volume a claim names: from the watched copy when the copy shows it
 * Bound to this very claim (UID), as upstream takes it from its informer (a
 * decision on it writes only the claim, conditionally); else read live, since
 * a volume that seems gone or taken leads to Lost.
 */
async function boundVolume(
  kube: KubeJsonClient,
  claim: PersistentVolumeClaim,
  volumeName: string,
  cache: VolumeCache | undefined,
): Promise<PersistentVolume[]> {
  const copied = cache?.synced ? cache.store.get("", volumeName) : undefined;
  const mutual =
    copied?.status?.phase === "Bound" &&
    claim.metadata.uid !== undefined &&
    copied.spec.claimRef?.uid === claim.metadata.uid;
  if (mutual) return [copied];
  const v = await readVolume(kube, volumeName);
  return v ? [v] : [];
}

/** Where a claim sync's view may come from besides live reads; without any, everything is read live. */
export interface ClaimViewSources {
  /** A volume that may fit the claim and that the copy may not have seen yet. */
  candidate?: Candidate;
  cache?: VolumeCache;
  classCopy?: StorageClassCopy;
  picks?: VolumePicks;
  /** A first attempt: the copy's pick is decided on without a GET (see matchingVolumes). */
  pickFromCopy?: boolean;
}

export async function loadClaimView(
  kube: KubeJsonClient,
  claim: PersistentVolumeClaim,
  now: string,
  sources: ClaimViewSources = {},
): Promise<ClaimSyncView> {
  const { cache, classCopy } = sources;
  const volumeName = claim.spec.volumeName ?? "";
  const matching = !hasAnnotation(claim, annBindCompleted) && volumeName === "";
  const className = claimClass(claim);

  // Claims with no class at all may get the default: that needs every class.
  const classesRead: Promise<StorageClass[]> =
    matching && !claimHasClass(claim)
      ? listStorageClasses(kube, classCopy)
      : className && matching
        ? readStorageClass(kube, className, classCopy).then((c) => (c ? [c] : []))
        : Promise.resolve([]);
  // The search follows the class (a watched copy answers it at once): it says what a missed volume costs.
  const volumesRead: Promise<PersistentVolume[]> = matching
    ? classesRead.then((classes) =>
        matchingVolumes(kube, claim, sources, provisionsWhenNoMatch(claim, classes)),
      )
    : volumeName
      ? boundVolume(kube, claim, volumeName, cache)
      : Promise.resolve([]);
  const [volumes, classes] = await Promise.all([volumesRead, classesRead]);

  // Pods matter only for the WaitForPodScheduled message of a delayed claim.
  let claimPods: Pod[] = [];
  const cls = classes.find((c) => c.metadata.name === className);
  if (matching && cls?.volumeBindingMode === "WaitForFirstConsumer" && !isDelayBindingProvisioning(claim)) {
    claimPods = (await kube.list<Pod>(pods, { namespace: claim.metadata.namespace ?? "" })).items;
  }
  return { volumes, classes, pods: claimPods, now };
}

/** Whether the copy holds a claim of the ref's name and namespace, whatever its UID. */
function claimInCopy(cache: ClaimCache, ref: { namespace?: string; name?: string }): boolean {
  return cache.store.get(ref.namespace ?? "", ref.name ?? "") !== undefined;
}

export async function loadVolumeView(
  kube: KubeJsonClient,
  volume: PersistentVolume,
  now: string,
  claims?: { cache: ClaimCache | undefined; atLeast: string },
): Promise<VolumeSyncView> {
  const ref = volume.spec.claimRef;
  if (!ref?.uid || !ref.name) return { claim: undefined, pods: [], now };
  const cache = claims?.cache;
  // A copy behind the event may still hold a claim that event deleted: only one that has reached it may answer.
  const copied =
    cache?.synced && (await caughtUp(cache.store, claims?.atLeast, false))
      ? refClaimFromCopy(cache, ref)
      : undefined;
  // The claim of a Released or Failed volume is gone for good (its absence released the volume): the copy's word will do.
  // So is a claim whose deletion the copy's watch reported: UIDs never come back.
  const phase = volume.status?.phase;
  const goneForGood =
    !copied &&
    cache?.synced === true &&
    (((phase === "Released" || phase === "Failed") && !claimInCopy(cache, ref)) ||
      cache.store.wasDeleted(ref.uid));
  const claim = copied ?? (goneForGood ? undefined : await readClaim(kube, ref.namespace ?? "", ref.name));
  const claimGone = !claim || claim.metadata.uid !== ref.uid;
  // Only the Recycle policy asks which pods still use the claim.
  const claimPods =
    claimGone && volume.spec.persistentVolumeReclaimPolicy === "Recycle"
      ? (await kube.list<Pod>(pods, { namespace: ref.namespace ?? "" })).items
      : [];
  return { claim, pods: claimPods, now };
}
