// VolumeAttachment CREATE and UPDATE (main resource), after kube-apiserver's
// ValidateVolumeAttachment / ValidateVolumeAttachmentUpdate, plus one check
// of our own at creation: spec.attacher must name a CSIDriver that exists,
// so a typo does not leave an attachment no attacher will ever pick up.
// Status writes (subresource "status") are not checked here.

import { isDeepStrictEqual } from "node:util";
import type { VolumeAttachment } from "../kube/types.ts";
import { message } from "./constants.ts";
import { type FieldError, forbidden, invalid, notFound, required } from "./field-errors.ts";

/** The spec on its own: attacher, exactly one source, nodeName. */
export function validateAttachment(attachment: VolumeAttachment): FieldError[] {
  const errors: FieldError[] = [];
  const spec = attachment.spec;
  if (!spec.attacher) errors.push(required("spec.attacher"));

  const source = spec.source ?? {};
  const hasName = source.persistentVolumeName !== undefined && source.persistentVolumeName !== null;
  const hasInline = source.inlineVolumeSpec !== undefined && source.inlineVolumeSpec !== null;
  if (!hasName && !hasInline) errors.push(required("spec.source", message.exactlyOneSource));
  else if (hasName && hasInline) errors.push(forbidden("spec.source", message.exactlyOneSource));
  else if (hasName && source.persistentVolumeName === "")
    errors.push(required("spec.source.persistentVolumeName", message.nonEmptyVolumeName));

  if (!spec.nodeName) errors.push(required("spec.nodeName"));
  return errors;
}

/** The new spec must be valid and equal to the old one: spec is read-only after creation. */
export function validateAttachmentUpdate(next: VolumeAttachment, old: VolumeAttachment): FieldError[] {
  const errors = validateAttachment(next);
  if (!isDeepStrictEqual(next.spec, old.spec))
    errors.push(invalid("spec", next.spec, message.fieldImmutable));
  return errors;
}

/** Our creation check, once the CSIDriver named by spec.attacher has been looked up. */
export function attacherDriverErrors(attacher: string, driverExists: boolean): FieldError[] {
  if (driverExists) return [];
  return [
    notFound(
      "spec.attacher",
      attacher,
      `no CSIDriver named "${attacher}" exists; install the CSI driver (its CSIDriver object) or correct spec.attacher`,
    ),
  ];
}
