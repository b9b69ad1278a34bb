// The metadata writes of the attacher, as patches that are conditional on the
// resourceVersion that was read (DESIGN invariant 2): patches carrying
// metadata.resourceVersion for the VolumeAttachment, JSON Patches with a
// `test` op for the PV. Upstream sends unconditional merge patches of the
// whole finalizer list, which can drop a finalizer another controller added
// in between; these cannot. Our VA finalizer goes on by a strategic merge
// patch, which adds to the stored list: the VA it is decided on may be an
// event's copy, and a copy whose list is wrong must not replace the stored one.
import type { PersistentVolume, VolumeAttachment } from "../kube/types.ts";
import { backoffKeysOn } from "./backoff.ts";
import { annNodeId } from "./constants.ts";

export type JsonPatchOp =
  | { op: "test"; path: string; value: unknown }
  | { op: "add"; path: string; value: unknown }
  | { op: "remove"; path: string };

export interface MergePatch {
  metadata: {
    resourceVersion: string;
    finalizers?: string[] | null;
    annotations?: Record<string, string | null>;
  };
}

function resourceVersionOf(o: { metadata: { name: string; resourceVersion?: string } }): string {
  const rv = o.metadata.resourceVersion;
  if (!rv) throw new TypeError(`${o.metadata.name}: no resourceVersion to make the write conditional on`);
  return rv;
}

/** A strategic merge patch: its metadata.finalizers are added to the stored ones (a set), never replace them. */
export interface StrategicPatch {
  metadata: {
    resourceVersion: string;
    finalizers?: string[];
    annotations?: Record<string, string>;
  };
}

/**
 * Before ControllerPublish (upstream prepareVAFinalizer + prepareVANodeID):
 * our finalizer, so the VA cannot go before it is detached, and the node id,
 * so detach works without the CSINode. Undefined when both are in place.
 */
export function prepareAttachmentPatch(
  va: VolumeAttachment,
  finalizer: string,
  nodeId: string,
): StrategicPatch | undefined {
  const finalizers = va.metadata.finalizers ?? [];
  const needsFinalizer = !finalizers.includes(finalizer);
  const needsNodeId = va.metadata.annotations?.[annNodeId] !== nodeId;
  if (!needsFinalizer && !needsNodeId) return undefined;
  return {
    metadata: {
      resourceVersion: resourceVersionOf(va),
      ...(needsFinalizer ? { finalizers: [finalizer] } : {}),
      ...(needsNodeId ? { annotations: { [annNodeId]: nodeId } } : {}),
    },
  };
}

/**
 * After ControllerUnpublish: our finalizer goes (the rest of the list stays
 * as read), with the backoff annotations. Undefined when it is already gone.
 */
export function releaseAttachmentPatch(va: VolumeAttachment, finalizer: string): MergePatch | undefined {
  const finalizers = va.metadata.finalizers ?? [];
  if (!finalizers.includes(finalizer)) return undefined;
  const rest = finalizers.filter((f) => f !== finalizer);
  const stale = backoffKeysOn(va);
  return {
    metadata: {
      resourceVersion: resourceVersionOf(va),
      finalizers: rest.length > 0 ? rest : null,
      ...(stale.length > 0 ? { annotations: Object.fromEntries(stale.map((k) => [k, null])) } : {}),
    },
  };
}

/** Adds our PV finalizer; undefined when it is there. */
export function addVolumeFinalizerPatch(pv: PersistentVolume, finalizer: string): JsonPatchOp[] | undefined {
  const finalizers = pv.metadata.finalizers;
  if (finalizers?.includes(finalizer)) return undefined;
  const test: JsonPatchOp = { op: "test", path: "/metadata/resourceVersion", value: resourceVersionOf(pv) };
  return finalizers === undefined
    ? [test, { op: "add", path: "/metadata/finalizers", value: [finalizer] }]
    : [test, { op: "add", path: "/metadata/finalizers/-", value: finalizer }];
}

/** Removes our PV finalizer at the index it was read at; undefined when it is not there. */
export function removeVolumeFinalizerPatch(
  pv: PersistentVolume,
  finalizer: string,
): JsonPatchOp[] | undefined {
  const index = (pv.metadata.finalizers ?? []).indexOf(finalizer);
  if (index < 0) return undefined;
  const path = `/metadata/finalizers/${index}`;
  return [
    { op: "test", path: "/metadata/resourceVersion", value: resourceVersionOf(pv) },
    { op: "test", path, value: finalizer },
    { op: "remove", path },
  ];
}
