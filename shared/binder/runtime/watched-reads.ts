// Reads a binder sync may answer from the process's watched copies instead of
// a GET, as upstream's binder reads its informers. Only on a sync's first
// attempt (a lost race reads afresh), and only where a copy cannot mislead a
// decision into a harmful write:
// - the object an event is about, when the copy has reached the event's
//   revision (it is then at least as new as the event);
// - a bound volume's claim, when the copy has it with the claimRef's UID.
//   A claim the copy lacks, or holds with another UID, is read live: "the
//   claim is gone" releases a volume, and must never come from a lagging copy
//   (upstream's binder re-reads the API server before it believes that too).
//   Except for a Released or Failed volume: its claim was gone already (that
//   is what released it) and never comes back, so the copy's word suffices,
//   as upstream's binder takes its informer's. And except for a claim whose
//   deletion the copy's watch reported (its UID is among the remembered
//   deletions): a deleted UID never returns, so that is proof, not a guess.
// Every write is still conditional on the resourceVersion it was decided on,
// so a copy that is behind costs a conflict and a fresh attempt, not a wrong
// write.
import type { ObjectStore } from "../../kube/object-store.ts";
import { compareResourceVersions } from "../../kube/resource-version.ts";
import type { KubeObject, ObjectReference, PersistentVolumeClaim } from "../../kube/types.ts";

/** A watched copy of every PersistentVolumeClaim (shared/kube/watched-store.ts). */
export interface ClaimCache {
  readonly synced: boolean;
  readonly store: ObjectStore<PersistentVolumeClaim>;
}

/** Deleted claims' UIDs the claim copy remembers (the newest; about 100 bytes each). */
export const DELETED_CLAIMS_REMEMBERED = 10_000;

/** A watch that delivered something this recently counts as busy: it passes any recent revision soon. */
const BUSY_WATCH_MS = 250;
/** How long a sync waits for a copy to reach a revision before it reads the API instead. */
const CATCH_UP_MS = 50;

/**
 * Whether the copy has reached revision `atLeast`, waiting briefly for it:
 * always when the revision is of the copy's own kind (its watch delivers that
 * very event within moments), else only while its watch is busy (a quiet
 * watch may not pass another kind's revision for a long time). A wait trades
 * a GET's round trip through the API server and etcd for a few milliseconds.
 */
export async function caughtUp(
  store: Pick<ObjectStore<KubeObject>, "covers" | "changedWithin" | "whenCovers">,
  atLeast: string | undefined,
  ownKind: boolean,
): Promise<boolean> {
  if (atLeast === undefined) return false;
  if (store.covers(atLeast)) return true;
  if (!ownKind && !store.changedWithin(BUSY_WATCH_MS)) return false;
  return store.whenCovers(atLeast, CATCH_UP_MS);
}

/**
 * What the copy says of an object, once the copy has reached revision
 * `atLeast` (see caughtUp): `{found}` (undefined found: it was gone by then,
 * and whatever comes back brings its own event); undefined when the copy
 * cannot answer (not synced, or behind).
 */
export async function copyAtLeast<T extends KubeObject>(
  cache: { readonly synced: boolean; readonly store: ObjectStore<T> } | undefined,
  namespace: string,
  name: string,
  atLeast: string | undefined,
  ownKind = true,
): Promise<{ found: T | undefined } | undefined> {
  if (!cache?.synced || !(await caughtUp(cache.store, atLeast, ownKind))) return undefined;
  return { found: cache.store.get(namespace, name) };
}

/** The claim a volume's claimRef names, from the copy, only when it is that very claim (same UID). */
export function refClaimFromCopy(
  cache: ClaimCache | undefined,
  ref: ObjectReference | null | undefined,
): PersistentVolumeClaim | undefined {
  if (!cache?.synced || !ref?.uid || !ref.name) return undefined;
  const claim = cache.store.get(ref.namespace ?? "", ref.name);
  return claim?.metadata.uid === ref.uid ? claim : undefined;
}

/**
 * Whether the copy already holds a newer state of the very object an event
 * carries (same UID, a later revision). That newer state's own event has been
 * or will be delivered (the forwarder folds changes only into newer ones), so
 * this one can be acknowledged: an echo of our own first write arriving while
 * the same sync makes its second is judged on its newer state, not re-read.
 */
export function supersededByCopy<T extends KubeObject>(
  cache: { readonly synced: boolean; readonly store: ObjectStore<T> } | undefined,
  eventObject: Record<string, unknown> | undefined,
): boolean {
  if (!cache?.synced) return false;
  const metadata = eventObject?.metadata as
    | { name?: unknown; namespace?: unknown; uid?: unknown; resourceVersion?: unknown }
    | undefined;
  if (typeof metadata?.name !== "string" || typeof metadata.resourceVersion !== "string") return false;
  if (typeof metadata.uid !== "string") return false;
  const namespace = typeof metadata.namespace === "string" ? metadata.namespace : "";
  const held = cache.store.get(namespace, metadata.name);
  if (held?.metadata.uid !== metadata.uid) return false;
  return compareResourceVersions(held.metadata.resourceVersion, metadata.resourceVersion) === 1;
}
