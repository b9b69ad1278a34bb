// The trivial handler (upstream trivial_handler.go): for drivers that do not
// publish volumes. A VolumeAttachment is marked attached and that is all: no
// finalizers, so deleting it is instant, and PVs are none of its business.
import type { PersistentVolume, VolumeAttachment } from "../kube/types.ts";
import type { AttachHandler, AttachmentContext, AttachmentDecision, VolumeDecision } from "./handler.ts";
import { isAttachmentForDriver } from "./handler.ts";
import type { PublishOptions } from "./publish-request.ts";

export class TrivialHandler implements AttachHandler {
  readonly kind = "trivial";
  readonly driverName: string;
  readonly finalizer = undefined;
  readonly publish: PublishOptions = {
    publishReadonly: false,
    singleNodeMultiWriter: false,
    defaultFsType: "",
  };
  readonly reconciles = false;

  constructor(driverName: string) {
    this.driverName = driverName;
  }

  decideAttachment(va: VolumeAttachment, _ctx: AttachmentContext): AttachmentDecision {
    if (!isAttachmentForDriver(va, this.driverName))
      return { action: "ignore", reason: `attacher is ${va.spec.attacher}, not ${this.driverName}` };
    // Observed: being deleted. Upstream would still mark it attached; telling the
    // attach/detach controller "attached" about an attachment on its way out is wrong.
    if (va.metadata.deletionTimestamp)
      return { action: "ignore", reason: "being deleted; nothing to detach" };
    if (va.status?.attached) return { action: "ignore", reason: "already attached" };
    return { action: "mark-attached" };
  }

  decideVolume(_pv: PersistentVolume, _attachments: readonly VolumeAttachment[]): VolumeDecision {
    return { action: "ignore", reason: "the trivial handler keeps no PV finalizer" };
  }
}
