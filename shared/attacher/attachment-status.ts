// VolumeAttachment status as upstream writes it (util.go markAsAttached /
// markAsDetached, csi_handler.go saveAttachError / saveDetachError). Pure:
// a status in, the next status out; the runtime writes it to /status.

import { rfc3339 } from "../kube/time.ts";
import type { VolumeAttachment, VolumeError } from "../kube/types.ts";

type AttachmentStatus = NonNullable<VolumeAttachment["status"]>;

/** errorCode only for gRPC failures (upstream: status.FromError ok). */
/** kube-apiserver refuses a VolumeError message over 1024 bytes (maxVolumeErrorMessageSize). */
const maxVolumeErrorMessageBytes = 1024;

/** A message cut to fit, on a character boundary, so a driver's long error cannot make the status write fail. */
function fitVolumeErrorMessage(message: string): string {
  if (Buffer.byteLength(message) <= maxVolumeErrorMessageBytes) return message;
  let cut = message.slice(0, maxVolumeErrorMessageBytes - 3);
  while (Buffer.byteLength(cut) > maxVolumeErrorMessageBytes - 3) cut = cut.slice(0, -1);
  return `${cut}...`;
}

export function volumeError(message: string, now: Date, grpcCode?: number): VolumeError {
  return {
    time: rfc3339(now),
    message: fitVolumeErrorMessage(message),
    ...(grpcCode !== undefined ? { errorCode: grpcCode } : {}),
  };
}

/** Published: attached with the driver's publish_context; the last attach error is history. */
export function attachedStatus(
  status: AttachmentStatus | undefined,
  metadata: Record<string, string> | undefined,
): AttachmentStatus {
  const { attachError: _cleared, attachmentMetadata: _old, ...rest } = status ?? { attached: false };
  // An empty publish_context is a nil map upstream, which the API omits.
  const hasMetadata = metadata !== undefined && Object.keys(metadata).length > 0;
  return { ...rest, attached: true, ...(hasMetadata ? { attachmentMetadata: { ...metadata } } : {}) };
}

export function withAttachError(status: AttachmentStatus | undefined, error: VolumeError): AttachmentStatus {
  return { ...(status ?? { attached: false }), attachError: error };
}

export function withDetachError(status: AttachmentStatus | undefined, error: VolumeError): AttachmentStatus {
  return { ...(status ?? { attached: false }), detachError: error };
}

/**
 * Unpublished: attached=false, no metadata, the detach error cleared. Like
 * upstream, an old attachError stays: it is what the last attach said.
 */
export function detachedStatus(status: AttachmentStatus | undefined): AttachmentStatus {
  const { detachError: _cleared, attachmentMetadata: _old, ...rest } = status ?? { attached: false };
  return { ...rest, attached: false };
}
