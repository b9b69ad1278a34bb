// The provisioner's plan vocabulary: the steps its decisions ask for, the
// facts those steps hand to the next round, and the object edits the steps
// write. A CSI call or an object create ends its plan (`again`), so the next
// decision sees its answer. Pure.
import type { Plan } from "../controller/plan.ts";
import type { CsiErrorClass } from "../csi/errors.ts";
import type { CreateVolumeRequest, Volume } from "../csi/types.ts";
import type { KubeObject, PersistentVolume, PersistentVolumeClaim } from "../kube/types.ts";
import { annProvisioningFailures, annProvisioningRetryAfter } from "./constants.ts";
import type { SourceRef } from "./data-source-ref.ts";

/** How the CSI error reads to the provisioner (shared/csi/errors.ts classifyCsiError), decided on later. */
export interface CsiFailure {
  errorClass: CsiErrorClass;
  alreadyExists: boolean;
  text: string;
  error: unknown;
}

type MetricName = "provisionTotal" | "provisionFailed" | "deleteTotal" | "deleteFailed";

export type ProvisionerStep =
  /** An Event on the claim or PV; `announces`: the progress Event, remembered for the next round. */
  | {
      op: "event";
      object: PersistentVolumeClaim | PersistentVolume;
      type: "Normal" | "Warning";
      reason: string;
      message: string;
      announces?: boolean;
    }
  /** The claim with our intent finalizer, written before the driver hears of the volume; carried on. */
  | { op: "add-intent-finalizer"; claim: PersistentVolumeClaim }
  /** The claim written back whole (backoff, release, reschedule), conditional on the resourceVersion read. */
  | { op: "write-claim"; claim: PersistentVolumeClaim }
  | { op: "write-volume"; volume: PersistentVolume }
  /** The clone or restore source gets its protection finalizer before CreateVolume. */
  | { op: "protect-source"; source: SourceRef }
  /** The source loses it: no other claim is still provisioned from it. */
  | { op: "release-source"; source: SourceRef }
  | { op: "create-volume"; request: CreateVolumeRequest; nodeSelected: boolean }
  | { op: "create-pv"; volume: PersistentVolume }
  /** DeleteVolume (NOT_FOUND counts as done); the answer is carried. */
  | { op: "delete-volume"; volumeId: string; secrets: Record<string, string> | undefined }
  /** A created volume nothing will record any more: deleted now, a few tries, else retry later. */
  | {
      op: "take-back-volume";
      volumeId: string;
      secrets: Record<string, string> | undefined;
      claimKey: string;
      cause: unknown;
    }
  /** Deletes this incarnation of the PV (uid precondition); what finalizers still hold is carried. */
  | { op: "delete-pv"; volume: PersistentVolume }
  | { op: "count"; metric: MetricName; labels: Record<string, string>; since?: number }
  /** Answer 503: the driver may still be working on it. */
  | { op: "retry-later"; message: string; cause: unknown }
  /** A failure that ends the sync as an error (the save error of a PV, a failed DeleteVolume…). */
  | { op: "throw"; error: unknown };

/** What a round's steps left behind, as the next round's load merges it. */
export interface Progress {
  /** The progress Event was sent in this sync. */
  announced?: boolean;
  created?: Volume;
  createFailed?: CsiFailure;
  saved?: boolean;
  /** The PV name was taken already (AlreadyExists): the PV that holds it. */
  found?: PersistentVolume;
  saveFailed?: unknown;
  volumeDeleted?: boolean;
  deleteFailed?: CsiFailure;
  /** The PV object was deleted; what finalizers still hold of it (undefined: gone). */
  pvDeleted?: { remaining: PersistentVolume | undefined };
}

/** One carried fact: progress, or the claim as a write returned it. */
export type ProvisionerFact = Progress & { claim?: PersistentVolumeClaim };

export type ProvisionerPlan = Plan<ProvisionerStep, never>;

export type EventStep = Extract<ProvisionerStep, { op: "event" }>;

/** A round that fails with one Warning: its message is the error the round reports. */
export function warnedFailure(warning: EventStep, outcome: string): ProvisionerPlan {
  return { steps: [warning], outcome, error: warning.message };
}

/** A round that cannot be decided before the loader reads more. */
export interface Needs {
  needs: "request" | "current-claim" | "source-claims" | "secrets";
}

export const backoffAnnotations = [annProvisioningFailures, annProvisioningRetryAfter];

export function withoutFinalizer<T extends KubeObject>(o: T, finalizer: string): T {
  const finalizers = (o.metadata.finalizers ?? []).filter((f) => f !== finalizer);
  return { ...o, metadata: { ...o.metadata, finalizers } };
}

export function withFinalizer<T extends KubeObject>(o: T, finalizer: string): T {
  const finalizers = [...(o.metadata.finalizers ?? []), finalizer];
  return { ...o, metadata: { ...o.metadata, finalizers } };
}

export function withoutAnnotations<T extends PersistentVolume | PersistentVolumeClaim>(
  o: T,
  keys: string[],
): T {
  if (!keys.some((k) => o.metadata.annotations?.[k] !== undefined)) return o;
  const annotations = { ...o.metadata.annotations };
  for (const k of keys) delete annotations[k];
  return { ...o, metadata: { ...o.metadata, annotations } };
}

export function hasAnyAnnotation(o: PersistentVolume | PersistentVolumeClaim, keys: string[]): boolean {
  return keys.some((k) => o.metadata.annotations?.[k] !== undefined);
}
