// What one attacher sync knows between its rounds, and the steps its
// decisions return. An attach or detach is a sequence of rounds (finalizers →
// ControllerPublish → status; ControllerUnpublish → finalizer and status);
// each step hands the next round the state it leaves behind, so no round
// reads again what an earlier one read or wrote.
import type { ControllerPublishVolumeRequest, ControllerUnpublishVolumeRequest } from "../csi/types.ts";
import type {
  CSINode,
  CSIPersistentVolumeSource,
  PersistentVolume,
  VolumeAttachment,
  VolumeError,
} from "../kube/types.ts";
import type { Operation } from "./backoff.ts";
import type { AttachHandler } from "./handler.ts";
import type { JsonPatchOp, MergePatch, StrategicPatch } from "./patches.ts";

/**
 * What is synced: a VolumeAttachment (forced: past "already attached", upstream forceSync;
 * `copy`: the event's well-formed copy, a first attempt's hint, see event-copy.ts) or a PV.
 */
export type AttacherKey =
  | { kind: "attachment"; name: string; force?: boolean; copy?: VolumeAttachment }
  | { kind: "volume"; name: string };

/** A ControllerPublishVolume that succeeded: what the status needs, and what taking it back needs. */
export interface Published {
  publishContext: Record<string, string>;
  nodeId: string;
  csi: CSIPersistentVolumeSource;
  secrets: Record<string, string> | undefined;
}

/** A failed attach or detach, recorded in VA status with upstream's text. */
export interface Failure {
  op: Operation;
  message: string;
  grpcCode?: number;
  /** When it failed: the backoff and the status error both count from here. */
  at: Date;
  cause?: unknown;
}

type SecretsRead = { ok: true; value: Record<string, string> | undefined } | { ok: false; error: string };

/** How far this sync got beyond what the objects show. */
export type Stage =
  | { at: "start" }
  | { at: "published"; published: Published; forced: boolean }
  /** The attached status write ran; `current` is the VA it judged (undefined: gone). */
  | { at: "status-written"; published: Published; forced: boolean; current: VolumeAttachment | undefined }
  /** A publish whose attachment was released meanwhile was unpublished again. */
  | { at: "taken-back"; published: Published; successorChecked?: boolean }
  | { at: "unpublished"; nodeId: string; forced: boolean }
  | { at: "volume-synced"; detached: string; volume: string; volumeOutcome: string }
  /** Recording a failure: backoff annotations, then the status error, then "retry later". */
  | {
      at: "failed";
      failure: Failure;
      backoffSaved?: boolean;
      delaySeconds?: number;
      errorSaved?: boolean;
      /** Saving the failure failed: reported with it, like upstream. */
      saveError?: string;
    };

export interface AttachmentState {
  kind: "attachment";
  handler: AttachHandler;
  /** The clock when this round was loaded. */
  now: Date;
  /** The ListVolumes reconciler (or a taken-back publish) asks to attach or detach again. */
  force: boolean;
  va: VolumeAttachment;
  /** Read on demand; null: the VA names no PV, or it does not exist. */
  pv?: PersistentVolume | null;
  secrets?: SecretsRead;
  /** Read on demand; null: no CSINode of that name. */
  csiNode?: CSINode | null;
  stage: Stage;
  /** Outcome of an earlier attachment of this name that this sync took back. */
  prefix: string;
}

export interface VolumeState {
  kind: "volume";
  handler: AttachHandler;
  pv: PersistentVolume;
  /** Every VolumeAttachment in the cluster; listed only when the PV may lose our finalizer. */
  attachments: readonly VolumeAttachment[];
}

/** A read the next decision needs; a failed read is an attach or detach error (`op`). */
export type AttachmentRead =
  | { read: "pv"; op: Operation; name: string | undefined }
  | { read: "secrets"; op: Operation; csi: CSIPersistentVolumeSource }
  | { read: "csiNode"; op: Operation; nodeName: string }
  /** After a take-back: is there a new VA of this name? */
  | { read: "successor"; name: string };

/** `resume`: the state the next round starts from when the step succeeds. */
export type AttacherStep =
  | { op: "add-volume-finalizer"; name: string; patch: JsonPatchOp[]; resume: AttachmentState }
  | { op: "prepare-attachment"; name: string; patch: StrategicPatch; resume: AttachmentState }
  | {
      op: "publish";
      request: ControllerPublishVolumeRequest;
      published: Omit<Published, "publishContext">;
      forced: boolean;
      resume: AttachmentState;
    }
  /** Status attached=true, unless the VA was released meanwhile (another uid, or ours without our finalizer). */
  | {
      op: "write-attached";
      name: string;
      uid: string | undefined;
      finalizer: string | undefined;
      publishContext: Record<string, string>;
      resume: AttachmentState;
    }
  | { op: "clear-backoff"; name: string }
  | { op: "take-back"; request: ControllerUnpublishVolumeRequest; failure: string; resume: AttachmentState }
  | { op: "mark-attached"; name: string }
  | { op: "unpublish"; request: ControllerUnpublishVolumeRequest; nodeId: string; resume: AttachmentState }
  | { op: "release-attachment"; name: string; patch: MergePatch }
  | { op: "write-detached"; name: string }
  | { op: "sync-volume"; name: string; detached: string; resume: AttachmentState }
  | { op: "save-backoff"; name: string; operation: Operation; now: Date; resume: AttachmentState }
  | { op: "save-error"; name: string; operation: Operation; error: VolumeError; resume: AttachmentState }
  | { op: "retry-later"; message: string; delaySeconds: number | undefined; cause: unknown }
  | { op: "remove-volume-finalizer"; name: string; patch: JsonPatchOp[] };
