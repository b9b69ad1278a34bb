// The attacher's writes that need more than one call's worth of care: the
// PV's JSON Patch (a failed `test` is a lost race, not an error) and the
// VA's /status write (re-read on conflict).
import { isDeepStrictEqual } from "node:util";
import { isConflict, isNotFound, statusCodeOf } from "../../kube/api-errors.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import { updateObject } from "../../kube/optimistic-update.ts";
import { persistentVolumes, volumeAttachments } from "../../kube/resources.ts";
import type { PersistentVolume, VolumeAttachment } from "../../kube/types.ts";
import type { JsonPatchOp } from "../patches.ts";
import { messageOf } from "./load-attachment.ts";

/** A JSON Patch `test` failed: what was read is stale. Counts as a conflict (re-read, re-decide). */
class StaleReadError extends Error {
  override name = "StaleReadError";
  readonly code = 409;
  readonly body: { reason: string; code: number; message: string };
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.body = { reason: "Conflict", code: 409, message };
  }
}

/** A JSON Patch with `test` ops on the PV; kube-apiserver answers a failed `test` with 422. */
export async function patchVolume(
  kube: KubeJsonClient,
  name: string,
  patch: JsonPatchOp[],
): Promise<PersistentVolume> {
  try {
    return await kube.patch<PersistentVolume>(persistentVolumes, name, undefined, patch, "json");
  } catch (err) {
    if (statusCodeOf(err) === 422)
      throw new StaleReadError(`PersistentVolume ${name} changed: ${messageOf(err)}`, { cause: err });
    throw err;
  }
}

function sameJson(a: unknown, b: unknown): boolean {
  return isDeepStrictEqual(JSON.parse(JSON.stringify(a ?? null)), JSON.parse(JSON.stringify(b ?? null)));
}

export function ignoreNotFound(err: unknown): undefined {
  if (isNotFound(err)) return undefined;
  throw err;
}

/**
 * A /status write of the VA, re-read on conflict (the new status is a fact, not a decision).
 * `decidedOn`: the VA this sync already holds (what its finalizer PATCH returned, or what it
 * decided on), written first, conditional on its resourceVersion, instead of a GET; when it
 * is stale (409) or would need no write, the VA is read live as without it.
 */
export async function writeStatus(
  kube: KubeJsonClient,
  name: string,
  next: (current: VolumeAttachment) => VolumeAttachment["status"] | undefined,
  decidedOn?: VolumeAttachment,
): Promise<{ object: VolumeAttachment; written: boolean }> {
  const status = decidedOn?.metadata.resourceVersion ? next(structuredClone(decidedOn)) : undefined;
  // "Nothing to write" (or "released") is only believed of a live read.
  if (decidedOn && status !== undefined && !sameJson(status, decidedOn.status)) {
    try {
      const object = await kube.replace<VolumeAttachment>(
        volumeAttachments,
        { ...decidedOn, status },
        { subresource: "status" },
      );
      return { object, written: true };
    } catch (err) {
      if (!isConflict(err)) throw err;
    }
  }
  return updateObject<VolumeAttachment>(
    kube,
    volumeAttachments,
    { name },
    (current) => {
      const status = next(current);
      return status === undefined ? undefined : { ...current, status };
    },
    { subresource: "status" },
  );
}
