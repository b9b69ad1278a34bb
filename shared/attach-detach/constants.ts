// Names, Event reasons and messages of kube-controller-manager's
// attach/detach controller, plus the annotations that carry the state a
// stateless reconcile needs between events.
export const eventSource = "attachdetach-controller";

export const reason = {
  successfulAttachVolume: "SuccessfulAttachVolume",
  failedAttachVolume: "FailedAttachVolume",
} as const;

export const message = {
  notControllerManaged:
    "the node's kubelet manages attach and detach (no volumes.kubernetes.io/controller-managed-attach-detach)",
  attached: (pv: string) => `AttachVolume.Attach succeeded for volume "${pv}"`,
  attachFailed: (pv: string, err: string) => `AttachVolume.Attach failed for volume "${pv}" : ${err}`,
  multiAttach: (pv: string, detail: string) => `Multi-Attach error for volume "${pv}" ${detail}`,
  exclusivelyAttached: "Volume is already exclusively attached to one node and can't be attached to another",
} as const;

/** Upstream's maxWaitForUnmountDuration: after it, an unhealthy node's volumes detach even if reported in use. */
export const maxWaitForUnmountMs = 6 * 60 * 1000;
/** Non-graceful node shutdown: a node with this taint (any value or effect) has its volumes detached at once. */
export const outOfServiceTaint = "node.kubernetes.io/out-of-service";
/** Unique volume names of CSI volumes (node status volumesInUse / volumesAttached) start with this. */
export const csiPluginPrefix = "kubernetes.io/csi/";

/** The `reason` label of upstream's forced-detach counter. */
export const forceDetachReason = {
  timeout: "timeout",
  outOfService: "out-of-service",
} as const;
export type ForceDetachReason = (typeof forceDetachReason)[keyof typeof forceDetachReason];

/** What kube-controller-manager logs when a detach starts (no Event is sent for a detach). */
export const detachLog = {
  started: "attacherDetacher.DetachVolume started",
  forcedTimeout:
    "attacherDetacher.DetachVolume started: this volume is not safe to detach, but maxWaitForUnmountDuration expired, force detaching",
  forcedOutOfService: "attacherDetacher.DetachVolume started: node has out-of-service taint, force detaching",
  timeoutIgnored: "Drain timeout expired for volume but disableForceDetachOnTimeout was set",
} as const;

/** On a VolumeAttachment: the success Event was sent (upstream sends it once, from memory). */
export const annAttachReported = "attachdetach.kube-storage-functions.io/attach-reported";
/** On a VolumeAttachment: the attachError.time already announced with FailedAttachVolume. */
export const annAttachErrorReported = "attachdetach.kube-storage-functions.io/attach-error-reported";
/** On a VolumeAttachment: when detaching was first wanted but the node still used the volume. */
export const annDetachRequestedAt = "attachdetach.kube-storage-functions.io/detach-requested-at";
/**
 * On a VolumeAttachment: the node resourceVersion it was last listed in status.volumesAttached
 * from. Writing it before the node fences a concurrent detach, whose delete is conditional on
 * the attachment's resourceVersion.
 */
export const annListedAt = "attachdetach.kube-storage-functions.io/listed-at";
/**
 * On a Node (written through nodes/status): the last detach that found nothing to unlist. The
 * write fences a concurrent reconcile that would list the volume from an older read of the node.
 */
export const annDetachFence = "attachdetach.kube-storage-functions.io/detach-fence";
