// What an attacher handler decides about one VolumeAttachment or PV. The two
// handlers (csi-handler.ts, trivial-handler.ts) implement it; which one runs
// is chosen once from the driver's capabilities (choose-handler.ts).
import type { PersistentVolume, VolumeAttachment } from "../kube/types.ts";
import type { PublishOptions } from "./publish-request.ts";

export type AttachmentDecision =
  /** Nothing to do for this attacher now. */
  | { action: "ignore"; reason: string }
  /** The last attempt failed; the next one waits until `until`. */
  | { action: "backoff"; until: string }
  /** Trivial handler: status attached=true, nothing else. */
  | { action: "mark-attached" }
  /** CSI handler: PV finalizer, VA finalizer + node id, ControllerPublish, status. */
  | { action: "attach"; forced: boolean }
  /** CSI handler: ControllerUnpublish, then drop the VA finalizer and clear status. */
  | { action: "detach"; forced: boolean }
  /** Our finalizer is gone (unpublished) but status still says attached: finish the status write. */
  | { action: "mark-detached"; reason: string };

export type VolumeDecision =
  | { action: "ignore"; reason: string }
  /** No VolumeAttachment needs the PV any more: our finalizer may go. */
  | { action: "remove-finalizer" };

export interface AttachmentContext {
  now: Date;
  /**
   * The ListVolumes reconciler saw the driver disagree with status.attached:
   * attach or detach again even if status says it is done (upstream forceSync).
   */
  force?: boolean;
}

export interface AttachHandler {
  readonly kind: "csi" | "trivial";
  readonly driverName: string;
  /** The finalizer this handler puts on VAs and PVs; undefined for the trivial handler. */
  readonly finalizer: string | undefined;
  /** What goes into ControllerPublishVolume besides the volume (CSI handler). */
  readonly publish: PublishOptions;
  /** LIST_VOLUMES + LIST_VOLUMES_PUBLISHED_NODES: resync compares status with the driver. */
  readonly reconciles: boolean;
  decideAttachment(va: VolumeAttachment, ctx: AttachmentContext): AttachmentDecision;
  /** `attachments`: every VolumeAttachment in the cluster, of any driver. */
  decideVolume(pv: PersistentVolume, attachments: readonly VolumeAttachment[]): VolumeDecision;
}

/** The VA is addressed to this driver (VolumeAttachment spec.attacher). */
export function isAttachmentForDriver(va: Pick<VolumeAttachment, "spec">, driverName: string): boolean {
  return va.spec?.attacher === driverName;
}
