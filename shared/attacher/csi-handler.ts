// The CSI handler (upstream csi_handler.go): VolumeAttachments of this driver
// are published with ControllerPublishVolume and, once deleted, unpublished;
// finalizers on the VA and its PV keep both around until the volume is off
// the node.
import type { PersistentVolume, VolumeAttachment } from "../kube/types.ts";
import { backoffUntil } from "./backoff.ts";
import { attacherFinalizer } from "./finalizer-name.ts";
import type { AttachHandler, AttachmentContext, AttachmentDecision, VolumeDecision } from "./handler.ts";
import { isAttachmentForDriver } from "./handler.ts";
import type { PublishOptions } from "./publish-request.ts";

export class CsiHandler implements AttachHandler {
  readonly kind = "csi";
  readonly driverName: string;
  readonly finalizer: string;
  readonly publish: PublishOptions;
  readonly reconciles: boolean;

  constructor(driverName: string, options: { publish: PublishOptions; reconciles: boolean }) {
    this.driverName = driverName;
    this.finalizer = attacherFinalizer(driverName);
    this.publish = options.publish;
    this.reconciles = options.reconciles;
  }

  decideAttachment(va: VolumeAttachment, ctx: AttachmentContext): AttachmentDecision {
    if (!isAttachmentForDriver(va, this.driverName))
      return { action: "ignore", reason: `attacher is ${va.spec.attacher}, not ${this.driverName}` };
    const forced = ctx.force === true;
    if (va.metadata.deletionTimestamp) return this.decideDetach(va, ctx.now, forced);
    // Observed: wanted on the node. Attached and the driver agrees (no force): done.
    if (va.status?.attached && !forced) return { action: "ignore", reason: "already attached" };
    const until = forced ? undefined : backoffUntil(va, "attach", ctx.now);
    if (until) return { action: "backoff", until };
    return { action: "attach", forced };
  }

  private decideDetach(va: VolumeAttachment, now: Date, forced: boolean): AttachmentDecision {
    const finalized = (va.metadata.finalizers ?? []).includes(this.finalizer);
    // Observed: deleted without our finalizer: never published, or unpublished already.
    if (!finalized && !forced) {
      return va.status?.attached
        ? { action: "mark-detached", reason: "unpublished; status not yet written" }
        : { action: "ignore", reason: "already detached" };
    }
    const until = forced ? undefined : backoffUntil(va, "detach", now);
    if (until) return { action: "backoff", until };
    return { action: "detach", forced };
  }

  decideVolume(pv: PersistentVolume, attachments: readonly VolumeAttachment[]): VolumeDecision {
    if (!(pv.metadata.finalizers ?? []).includes(this.finalizer))
      return { action: "ignore", reason: "no attacher finalizer" };
    // Observed: finalizer present. It protects the PV while a detach may still need it; only deletion ends that.
    if (!pv.metadata.deletionTimestamp) return { action: "ignore", reason: "not being deleted" };
    const user = attachments.find((va) => va.spec.source.persistentVolumeName === pv.metadata.name);
    if (user) return { action: "ignore", reason: `still needed by VolumeAttachment ${user.metadata.name}` };
    return { action: "remove-finalizer" };
  }
}
