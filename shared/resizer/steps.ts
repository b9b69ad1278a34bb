// What one resizer sync knows and the steps its decisions return. An
// expansion or a modification is a sequence of rounds (intent in the claim's
// status → CSI call → PV → claim status); each round is decided on the
// objects read afresh plus what the last step carried (a CSI answer that no
// object records yet), so a process killed between two steps leaves a claim
// whose status says what to do next.
import type { ControllerExpandVolumeRequest } from "../csi/types.ts";
import type { EventType } from "../kube/event-recorder.ts";
import type { RetryInterval } from "../kube/retry-interval.ts";
import type {
  PersistentVolume,
  PersistentVolumeClaim,
  SecretReference,
  VolumeAttributesClass,
} from "../kube/types.ts";

/** A claim, seen by the expansion or by the modification controller (upstream runs two). */
export interface ResizerKey {
  kind: "expand" | "modify";
  namespace: string;
  name: string;
}

/** What the driver can do, read once at start. */
export interface DriverAbilities {
  controllerExpand: boolean;
  nodeExpand: boolean;
  modify: boolean;
  singleNodeMultiWriter: boolean;
}

/** A failed CSI call: the gRPC code (undefined: not a gRPC status) and upstream's texts. */
export interface CsiFailure {
  code: number | undefined;
  /** "rpc error: code = X desc = Y", or the plain error text. */
  message: string;
  /** The status message alone (ModifyVolumeError's message). */
  details: string;
}

/** A CSI answer (or failure) handed to the next round. */
export type ResizerCarry =
  | { kind: "resized"; target: string; capacity: string; nodeExpansionRequired: boolean }
  | { kind: "expand-failed"; target: string; failure: CsiFailure }
  | { kind: "modify-started"; target: string }
  | { kind: "modified"; target: string }
  | { kind: "modify-failed"; target: string; failure: CsiFailure };

export interface ExpandState {
  kind: "expand";
  driverName: string;
  abilities: DriverAbilities;
  now: Date;
  /** RETRY_INTERVAL_START_SECONDS / RETRY_INTERVAL_MAX_SECONDS: the per-claim backoff. */
  retryInterval: RetryInterval;
  claim: PersistentVolumeClaim;
  pv: PersistentVolume | undefined;
  /** A pod (not Succeeded/Failed) using the claim; looked up only after the driver said FailedPrecondition. */
  inUseBy?: string;
  carried?: ResizerCarry;
}

export interface ModifyState {
  kind: "modify";
  driverName: string;
  now: Date;
  retryInterval: RetryInterval;
  claim: PersistentVolumeClaim;
  pv: PersistentVolume | undefined;
  /** The classes the claim names (spec and status target); a missing one is absent. */
  classes: ReadonlyMap<string, VolumeAttributesClass>;
  /** --extra-modify-metadata. */
  extraModifyMetadata: boolean;
  carried?: ResizerCarry;
}

export type ResizerState = ExpandState | ModifyState;

/** A merge patch of claim status: lists given whole, null deletes. */
export type StatusPatch = Record<string, unknown>;

export type ResizerStep =
  /** Merge patch of pvc/status, conditional on the resourceVersion read (see the resizer section of README). */
  | {
      op: "patch-claim-status";
      namespace: string;
      name: string;
      status: StatusPatch;
      resourceVersion: string | undefined;
      carry?: ResizerCarry;
    }
  /** Merge patch of the claim's annotations (null removes one), conditional on the resourceVersion read. */
  | {
      op: "patch-claim-annotations";
      namespace: string;
      name: string;
      annotations: Record<string, string | null>;
      resourceVersion: string | undefined;
    }
  /** Merge patch of the PV's spec (capacity or class); carries the CSI answer on. */
  | {
      op: "patch-volume";
      name: string;
      spec: { capacity?: { storage: string }; volumeAttributesClassName?: string };
      /** The PV's revision the step was decided on: a PV changed since (grown further by another sync) is never written over. */
      resourceVersion: string | undefined;
      carry: ResizerCarry;
    }
  | {
      op: "event";
      claim: PersistentVolumeClaim;
      type: EventType;
      reason: string;
      message: string;
    }
  /** ControllerExpandVolume; secrets read from `secretRef` by the executor. */
  | {
      op: "expand-volume";
      target: string;
      request: ControllerExpandVolumeRequest;
      secretRef: SecretReference | undefined;
    }
  | {
      op: "modify-volume";
      target: string;
      volumeId: string;
      mutableParameters: Record<string, string>;
      secretRef: SecretReference | undefined;
    }
  /** Answer "retry later" (503 + Retry-After): upstream requeues with backoff. */
  | { op: "retry-later"; message: string; delaySeconds: number };
