// Events arrive late, twice, out of order or not at all, so the object inside
// an event is only a hint about *which* object to look at. The decision is
// always taken on a fresh GET. A GET without a resourceVersion parameter is a
// consistent (quorum) read on kube-apiserver, never served from its watch
// cache, which is what the client-node read* methods send. Do not pass a read
// function that sets resourceVersion="0" or reads from an informer cache.

import type { KubernetesObject } from "@kubernetes/client-node";
import { isNotFound } from "./api-errors.ts";
import { compareResourceVersions } from "./resource-version.ts";

/**
 * Reads one object by key. Cluster-scoped objects get namespace "" (and ignore
 * it), e.g. `(ns, name) => core.readNamespacedPersistentVolumeClaim({ name, namespace: ns })`
 * or `(_ns, name) => core.readPersistentVolume({ name })`.
 */
export type ReadObject<T> = (namespace: string, name: string) => Promise<T>;

/**
 * How the API's copy relates to the event's copy:
 * - same: identical resourceVersion; the event is current.
 * - api-newer: the object changed after the event was produced; the event is stale.
 * - event-newer: the API returned something older than the event (a lagging
 *   server, or a read that was not consistent); the caller should retry later.
 * - unknown: resourceVersions missing or not comparable.
 * - gone: the object no longer exists (404).
 */
export type Relation = "same" | "api-newer" | "event-newer" | "unknown" | "gone";

export interface Rehydrated<T> {
  current: T | null;
  relation: Relation;
  /** Both copies have a uid and they differ: the object was deleted and created again under the same name. */
  recreated: boolean;
}

/** The event's object lacks the name we need to look it up: bad input, not a server problem. */
export class InvalidEventObjectError extends Error {
  override name = "InvalidEventObjectError";
}

export async function rehydrate<T extends KubernetesObject>(
  eventObject: KubernetesObject,
  read: ReadObject<T>,
): Promise<Rehydrated<T>> {
  const name = eventObject.metadata?.name;
  if (typeof name !== "string" || name === "") {
    throw new InvalidEventObjectError(`event object ${eventObject.kind ?? "(no kind)"} has no metadata.name`);
  }
  const namespace = eventObject.metadata?.namespace ?? "";
  let current: T;
  try {
    current = await read(namespace, name);
  } catch (err) {
    if (isNotFound(err)) return { current: null, relation: "gone", recreated: false };
    throw err;
  }
  return {
    current,
    relation: relationOf(eventObject, current),
    recreated: wasRecreated(eventObject, current),
  };
}

/** Compares the event's copy with the API's copy by resourceVersion. */
export function relationOf(
  eventObject: KubernetesObject,
  current: KubernetesObject,
): Exclude<Relation, "gone"> {
  const fromEvent = eventObject.metadata?.resourceVersion;
  const fromApi = current.metadata?.resourceVersion;
  if (!fromEvent || !fromApi) return "unknown";
  // Equality is meaningful for any resourceVersion, opaque or not.
  if (fromEvent === fromApi) return "same";
  switch (compareResourceVersions(fromApi, fromEvent)) {
    case 1:
      return "api-newer";
    case -1:
      return "event-newer";
    default:
      return "unknown";
  }
}

function wasRecreated(eventObject: KubernetesObject, current: KubernetesObject): boolean {
  const a = eventObject.metadata?.uid;
  const b = current.metadata?.uid;
  return Boolean(a && b && a !== b);
}
