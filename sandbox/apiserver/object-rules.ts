// Rules on an object's content that kube-apiserver checks where the sandbox's
// clients could break them: the total size of annotations, the size limits of
// a VolumeAttachment's status and a CSINode's driver names (on every create
// and update, as ValidateXUpdate runs ValidateX), and a StorageClass's fields
// (on create; its update rules forbid changing them instead). Each with
// upstream's field error type.
import { duplicate, type FieldError, notSupported, required, tooLong } from "./field-errors.ts";
import type { KubeObject } from "./store.ts";

type Obj = Record<string, unknown>;

function obj(v: unknown): Obj {
  return v && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : {};
}

/** TotalAnnotationSizeLimitB. */
const maxAnnotationBytes = 256 * 1024;
/** A VolumeAttachment's attachmentMetadata, keys and values together. */
const maxAttachedVolumeMetadataSize = 256 * 1024;
const maxVolumeErrorMessageSize = 1024;

function mapBytes(m: Obj): number {
  let n = 0;
  for (const [k, v] of Object.entries(m)) n += Buffer.byteLength(k) + Buffer.byteLength(String(v ?? ""));
  return n;
}

export function validateAnnotations(o: KubeObject): FieldError[] {
  const annotations = obj(o.metadata.annotations);
  return mapBytes(annotations) > maxAnnotationBytes
    ? [tooLong("metadata.annotations", maxAnnotationBytes)]
    : [];
}

export function validateStorageClass(o: KubeObject): FieldError[] {
  const errs: FieldError[] = [];
  if (typeof o.provisioner !== "string" || o.provisioner === "") errs.push(required("provisioner"));
  // An empty policy or mode is defaulted before upstream validates, as here after.
  if (
    o.reclaimPolicy !== undefined &&
    o.reclaimPolicy !== "" &&
    !["Delete", "Retain"].includes(String(o.reclaimPolicy))
  ) {
    errs.push(notSupported("reclaimPolicy", o.reclaimPolicy, ["Delete", "Retain"]));
  }
  const mode = o.volumeBindingMode;
  if (mode !== undefined && !["Immediate", "WaitForFirstConsumer"].includes(String(mode))) {
    errs.push(notSupported("volumeBindingMode", mode, ["Immediate", "WaitForFirstConsumer"]));
  }
  return errs;
}

function volumeAttachment(o: KubeObject): FieldError[] {
  const errs: FieldError[] = [];
  const status = obj(o.status);
  if (mapBytes(obj(status.attachmentMetadata)) > maxAttachedVolumeMetadataSize) {
    errs.push(tooLong("status.attachmentMetadata", maxAttachedVolumeMetadataSize));
  }
  for (const which of ["attachError", "detachError"]) {
    const message = obj(status[which]).message;
    // Upstream checks the 1024-byte limit but names the metadata limit in its message.
    if (typeof message === "string" && message.length > maxVolumeErrorMessageSize) {
      errs.push(tooLong(`status.${which}.message`, maxAttachedVolumeMetadataSize));
    }
  }
  return errs;
}

function csiNode(o: KubeObject): FieldError[] {
  const errs: FieldError[] = [];
  const drivers = obj(o.spec).drivers;
  if (!Array.isArray(drivers)) return errs;
  const seen = new Set<unknown>();
  drivers.forEach((d, i) => {
    const name = obj(d).name;
    if (seen.has(name)) errs.push(duplicate(`spec.drivers[${i}].name`, name));
    seen.add(name);
  });
  return errs;
}

const rules: Record<string, (o: KubeObject) => FieldError[]> = {
  volumeattachments: volumeAttachment,
  csinodes: csiNode,
};

/** The type's rules that hold for every version of the object. */
export function validateObject(plural: string, o: KubeObject): FieldError[] {
  return rules[plural]?.(o) ?? [];
}
