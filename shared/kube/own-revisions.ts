// The newest revision of each object this process has itself written (or
// read live in the course of a write). An event whose copy of the object is
// older (same uid, lower resourceVersion) describes a state this process has
// moved past: the newer revision brings an event of its own, so the older one
// needs no sync and no read. Only what this process saw is known; another
// instance simply does not skip.
import { compareResourceVersions } from "./resource-version.ts";
import type { KubeObject } from "./types.ts";

const DEFAULT_MAX_OBJECTS = 4096;

/** What a controller answers for an event `isBehind` lets it skip. */
export const behindOwnRevision = "the event's copy is older than this process's own write of it";

const keyOf = (o: KubeObject): string => `${o.metadata.namespace ?? ""}/${o.metadata.name}`;

export class OwnRevisions {
  private readonly max: number;
  /** By namespace/name, least recently written first (a Map keeps insertion order). */
  private readonly written = new Map<string, { uid: string; resourceVersion: string }>();

  constructor(maxObjects = DEFAULT_MAX_OBJECTS) {
    this.max = maxObjects;
  }

  /** Records what a write returned (or a live read found); anything without a uid and resourceVersion is ignored. */
  note(object: KubeObject | undefined): void {
    const uid = object?.metadata.uid;
    const resourceVersion = object?.metadata.resourceVersion;
    if (!object || !uid || !resourceVersion) return;
    const key = keyOf(object);
    const last = this.written.get(key);
    // Concurrent writes may return out of order: keep the newest.
    if (last?.uid === uid && compareResourceVersions(resourceVersion, last.resourceVersion) !== 1) return;
    this.written.delete(key);
    this.written.set(key, { uid, resourceVersion });
    if (this.written.size > this.max) this.written.delete(this.written.keys().next().value as string);
  }

  /** True only when this process wrote the same object (same uid) at a revision provably newer than the copy's. */
  isBehind(copy: KubeObject): boolean {
    const last = this.written.get(keyOf(copy));
    if (!last || last.uid !== copy.metadata.uid) return false;
    return compareResourceVersions(copy.metadata.resourceVersion, last.resourceVersion) === -1;
  }
}
