// Keys and defaults of the CSI external-attacher, spelled as upstream spells
// them (pkg/controller/util.go, cmd/csi-attacher/main.go), plus the two
// annotations of our own that carry its retry backoff across processes.

/** The node id the volume was published to, kept for detach when the CSINode is gone. */
export const annNodeId = "csi.alpha.kubernetes.io/node-id";

/** Prefix of the finalizer on VolumeAttachments and PVs; the sanitized driver name follows. */
export const finalizerPrefix = "external-attacher/";

/**
 * Upstream keeps its per-object backoff (1 s doubling to 5 min) in a work
 * queue that dies with the process. Here it lives on the VolumeAttachment,
 * per operation (a failing attach must not delay the detach that follows):
 * consecutive failures, and the earliest next try.
 */
export const annAttachFailures = "storage.kube-storage-functions.io/attach-failures";
export const annAttachRetryAfter = "storage.kube-storage-functions.io/attach-retry-after";
export const annDetachFailures = "storage.kube-storage-functions.io/detach-failures";
export const annDetachRetryAfter = "storage.kube-storage-functions.io/detach-retry-after";
export const backoffAnnotations = [
  annAttachFailures,
  annAttachRetryAfter,
  annDetachFailures,
  annDetachRetryAfter,
] as const;

/** --timeout: how long one ControllerPublish/Unpublish may take. */
export const defaultTimeoutSeconds = 15;
/** --retry-interval-start and --retry-interval-max. */
export const retryIntervalStartSeconds = 1;
export const retryIntervalMaxSeconds = 300;
