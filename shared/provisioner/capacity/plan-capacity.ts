// What external-provisioner's capacity controller writes for one
// StorageClass (pkg/capacity/capacity.go), as a pure decision: one
// CSIStorageCapacity per topology segment of the driver, with the driver's
// GetCapacity answer for it; an object is rewritten only when capacity,
// maximumVolumeSize or the owner changed; objects for segments that went
// away, duplicates, and every object of a class that is gone (or no longer
// this driver's, or Immediate without --capacity-for-immediate-binding) are
// deleted. A segment whose GetCapacity failed keeps its object as it is.
import type { Plan } from "../../controller/plan.ts";
import { formatBytes } from "../../kube/quantity.ts";
import type { CSIStorageCapacity, StorageClass } from "../../kube/types.ts";
import { capacityGenerateName, driverNameLabel, managedByCentral, managedByLabel } from "./constants.ts";
import { type Segment, segmentId, segmentOfSelector } from "./segments.ts";

export interface CapacityOptions {
  driverName: string;
  /** Where the objects live (upstream's NAMESPACE). */
  namespace: string;
  /** --capacity-for-immediate-binding (default false). */
  forImmediateBinding: boolean;
  /** Set on every object (upstream's --capacity-ownerref-level); absent = none. */
  owner?: OwnerReference;
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
}

export type CapacityAnswer = { available: bigint; maximum?: bigint } | { error: string };

export interface ClassCapacityState {
  className: string;
  /** Undefined: the class is gone. */
  storageClass?: StorageClass;
  /** The driver's segments; empty when the class is not served. */
  segments: readonly Segment[];
  /** GetCapacity per segmentId. */
  answers: ReadonlyMap<string, CapacityAnswer>;
  /** Managed objects (our labels) naming this class. */
  existing: readonly CSIStorageCapacity[];
}

export type CapacityStep =
  | { op: "create-capacity"; object: CSIStorageCapacity; segment: string }
  | { op: "update-capacity"; object: CSIStorageCapacity; segment: string }
  | { op: "delete-capacity"; name: string; uid?: string; reason: string };

/** Whether this driver tracks capacity for the class at all. */
export function classIsTracked(cls: StorageClass | undefined, o: CapacityOptions): cls is StorageClass {
  if (!cls || cls.metadata.deletionTimestamp) return false;
  if (cls.provisioner !== o.driverName) return false;
  return o.forImmediateBinding || cls.volumeBindingMode === "WaitForFirstConsumer";
}

export function managedLabels(o: CapacityOptions): Record<string, string> {
  return { [driverNameLabel]: o.driverName, [managedByLabel]: managedByCentral };
}

function ownerMatches(object: CSIStorageCapacity, owner: OwnerReference | undefined): boolean {
  if (!owner) return true;
  return (object.metadata.ownerReferences ?? []).some((r) => r.uid === owner.uid);
}

function withOwner(
  refs: Record<string, unknown>[] | undefined,
  owner: OwnerReference | undefined,
): Record<string, unknown>[] | undefined {
  if (!owner) return refs;
  // Added when missing, never removed, as upstream does.
  if ((refs ?? []).some((r) => r.uid === owner.uid)) return refs;
  return [...(refs ?? []), { ...owner, controller: owner.controller ?? true }];
}

export function planClassCapacity(s: ClassCapacityState, o: CapacityOptions): Plan<CapacityStep, never> {
  const steps: CapacityStep[] = [];
  if (!classIsTracked(s.storageClass, o)) {
    for (const obj of s.existing)
      steps.push({
        op: "delete-capacity",
        name: obj.metadata.name,
        ...uidOf(obj),
        reason: "class not tracked",
      });
    return { steps, outcome: steps.length ? "class not tracked: objects removed" : "class not tracked" };
  }
  const bySegment = new Map<string, CSIStorageCapacity[]>();
  for (const obj of s.existing) {
    const segment = segmentOfSelector(obj.nodeTopology);
    const id = segment ? segmentId(segment) : "";
    const list = bySegment.get(id) ?? [];
    list.push(obj);
    bySegment.set(id, list);
  }
  const wanted = new Set(s.segments.map(segmentId));
  const errors: string[] = [];
  for (const segment of s.segments) {
    const id = segmentId(segment);
    const [current, ...duplicates] = bySegment.get(id) ?? [];
    for (const dup of duplicates)
      steps.push({ op: "delete-capacity", name: dup.metadata.name, ...uidOf(dup), reason: "duplicate" });
    const answer = s.answers.get(id);
    if (!answer || "error" in answer) {
      errors.push(
        `GetCapacity for segment ${id}: ${answer && "error" in answer ? answer.error : "no answer"}`,
      );
      continue;
    }
    const capacity = formatBytes(answer.available);
    const maximumVolumeSize = answer.maximum !== undefined ? formatBytes(answer.maximum) : undefined;
    if (!current) {
      const ownerReferences = withOwner(undefined, o.owner);
      steps.push({
        op: "create-capacity",
        segment: id,
        object: {
          apiVersion: "storage.k8s.io/v1",
          kind: "CSIStorageCapacity",
          metadata: {
            name: "",
            generateName: capacityGenerateName,
            namespace: o.namespace,
            labels: managedLabels(o),
            ...(ownerReferences ? { ownerReferences } : {}),
          },
          storageClassName: s.className,
          nodeTopology: { matchLabels: { ...segment } },
          capacity,
          ...(maximumVolumeSize !== undefined ? { maximumVolumeSize } : {}),
        },
      });
      continue;
    }
    if (
      current.capacity === capacity &&
      current.maximumVolumeSize === maximumVolumeSize &&
      ownerMatches(current, o.owner)
    )
      continue;
    const { maximumVolumeSize: _old, ...rest } = current;
    const ownerReferences = withOwner(current.metadata.ownerReferences, o.owner);
    steps.push({
      op: "update-capacity",
      segment: id,
      object: {
        ...rest,
        metadata: { ...current.metadata, ...(ownerReferences ? { ownerReferences } : {}) },
        capacity,
        ...(maximumVolumeSize !== undefined ? { maximumVolumeSize } : {}),
      },
    });
  }
  for (const [id, objects] of bySegment) {
    if (wanted.has(id)) continue;
    for (const obj of objects)
      steps.push({ op: "delete-capacity", name: obj.metadata.name, ...uidOf(obj), reason: "segment gone" });
  }
  const outcome = steps.length === 0 ? "capacity current" : `capacity: ${steps.length} change(s)`;
  return { steps, outcome, ...(errors.length ? { error: errors.join("; ") } : {}) };
}

function uidOf(obj: CSIStorageCapacity): { uid?: string } {
  return obj.metadata.uid ? { uid: obj.metadata.uid } : {};
}

/** Managed objects whose class is no longer tracked by this driver (the resync's sweep). */
export function planSweep(
  objects: readonly CSIStorageCapacity[],
  classes: readonly StorageClass[],
  o: CapacityOptions,
): Plan<CapacityStep, never> {
  const tracked = new Set(classes.filter((c) => classIsTracked(c, o)).map((c) => c.metadata.name));
  const steps: CapacityStep[] = objects
    .filter((obj) => !tracked.has(obj.storageClassName))
    .map((obj) => ({
      op: "delete-capacity",
      name: obj.metadata.name,
      ...uidOf(obj),
      reason: "class not tracked",
    }));
  return { steps, outcome: steps.length ? `sweep: ${steps.length} stale object(s)` : "sweep: nothing stale" };
}
