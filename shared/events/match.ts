// Functions subscribe to a few kinds and answer "nothing to do" for the rest.

import type { ParsedEvent, ResourceEvent } from "./types.ts";

/**
 * True when `e` is a change to an object of exactly this apiVersion and kind
 * ("v1", "PersistentVolumeClaim"; "storage.k8s.io/v1", "VolumeAttachment").
 * The comparison is exact, so subscribe with the version your source sends.
 */
export function eventMatchesKind(e: ParsedEvent, apiVersion: string, kind: string): e is ResourceEvent {
  return e.kind === "resource" && e.ref.apiVersion === apiVersion && e.ref.kind === kind;
}
