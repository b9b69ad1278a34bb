// The subset of kube-apiserver's validation that the storage control plane
// depends on: required fields, name format, and the update rules a lenient
// double would let controllers break (PVC spec immutability, PV source and
// VolumeAttachment spec immutability, finalizers during deletion).
import { isDeepStrictEqual } from "node:util";
import { isValidQuantity } from "../../shared/kube/quantity.ts";
import {
  claimSpecRules,
  validateClaimStatus,
  validateClaimUpdate,
  volumeAttributesClassUpdateRules,
  volumeSpecRules,
} from "./claim-rules.ts";
import { type FieldError, forbidden, invalid, required } from "./field-errors.ts";
import { dns1123SubdomainErrors } from "./name-rules.ts";
import { validateAnnotations, validateObject, validateStorageClass } from "./object-rules.ts";
import {
  quantityFormat,
  validateCsiDriverUpdate,
  validateCsiStorageCapacity,
  validateCsiStorageCapacityUpdate,
  validateVolumeAttributesClass,
  validateVolumeAttributesClassUpdate,
} from "./storage-rules.ts";
import type { KubeObject } from "./store.ts";

type Obj = Record<string, unknown>;

function obj(v: unknown): Obj {
  return v && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : {};
}

/** ValidateObjectMeta's name check: one Invalid per failed rule (length, then format), as upstream. */
export function validateName(name: string): FieldError[] {
  return dns1123SubdomainErrors(name).map((m) => invalid("metadata.name", name, m));
}

// A quantity that does not parse: upstream fails such a body while decoding it; the sandbox reports
// the same rule as a field error (quantityFormat).
function requestedStorage(spec: Obj): unknown {
  return obj(obj(spec.resources).requests).storage;
}

const pvSources = [
  "csi",
  "hostPath",
  "local",
  "nfs",
  "iscsi",
  "fc",
  "gcePersistentDisk",
  "awsElasticBlockStore",
  "azureDisk",
  "azureFile",
  "cephfs",
  "rbd",
  "cinder",
  "flexVolume",
  "vsphereVolume",
  "portworxVolume",
  "glusterfs",
  "flocker",
  "quobyte",
  "scaleIO",
  "storageos",
  "photonPersistentDisk",
];

const createValidators: Record<string, (o: KubeObject) => FieldError[]> = {
  events(o) {
    // kube-apiserver ties a core/v1 Event to its object's namespace; cluster-scoped objects' Events live in "default".
    const involvedNs = obj(o.involvedObject).namespace;
    const ns = o.metadata.namespace ?? "";
    if (typeof involvedNs === "string" && involvedNs !== "" && involvedNs !== ns) {
      return [invalid("involvedObject.namespace", involvedNs, "does not match event.namespace")];
    }
    if ((involvedNs === undefined || involvedNs === "") && ns !== "default" && ns !== "") {
      return [invalid("involvedObject.namespace", "", "does not match event.namespace")];
    }
    return [];
  },
  persistentvolumeclaims(o) {
    const spec = obj(o.spec);
    const errs: FieldError[] = [];
    if (!Array.isArray(spec.accessModes) || spec.accessModes.length === 0) {
      errs.push(required("spec.accessModes", "at least 1 access mode is required"));
    }
    const storage = requestedStorage(spec);
    if (storage === undefined) errs.push(required("spec.resources[storage]"));
    else if (typeof storage !== "string" || !isValidQuantity(storage)) {
      errs.push(invalid("spec.resources[storage]", storage, quantityFormat));
    }
    return errs.concat(claimSpecRules(o));
  },
  persistentvolumes(o) {
    const spec = obj(o.spec);
    const errs: FieldError[] = [];
    if (!Array.isArray(spec.accessModes) || spec.accessModes.length === 0) {
      errs.push(required("spec.accessModes"));
    }
    const storage = obj(spec.capacity).storage;
    if (storage === undefined) errs.push(required("spec.capacity"));
    else if (typeof storage !== "string" || !isValidQuantity(storage)) {
      errs.push(invalid("spec.capacity[storage]", storage, quantityFormat));
    }
    const sources = pvSources.filter((s) => spec[s] !== undefined);
    if (sources.length === 0) errs.push(required("spec", "must specify a volume type"));
    // Upstream names each source after the first.
    for (const extra of sources.slice(1)) {
      errs.push(forbidden(`spec.${extra}`, "may not specify more than 1 volume type"));
    }
    return errs.concat(volumeSpecRules(o));
  },
  storageclasses: validateStorageClass,
  volumeattributesclasses: validateVolumeAttributesClass,
  csistoragecapacities: validateCsiStorageCapacity,
  volumeattachments(o) {
    const spec = obj(o.spec);
    const errs: FieldError[] = [];
    if (!spec.attacher) errs.push(required("spec.attacher"));
    const source = obj(spec.source);
    const exactlyOne = "must specify exactly one of inlineVolumeSpec and persistentVolumeName";
    const hasPv = source.persistentVolumeName !== undefined && source.persistentVolumeName !== null;
    const hasInline = source.inlineVolumeSpec !== undefined && source.inlineVolumeSpec !== null;
    if (!hasPv && !hasInline) errs.push(required("spec.source", exactlyOne));
    else if (hasPv && hasInline) errs.push(forbidden("spec.source", exactlyOne));
    else if (hasPv && source.persistentVolumeName === "") {
      errs.push(required("spec.source.persistentVolumeName", "must specify non empty persistentVolumeName"));
    }
    if (!spec.nodeName) errs.push(required("spec.nodeName"));
    return errs;
  },
};

export function validateCreate(plural: string, o: KubeObject): FieldError[] {
  return [...validateAnnotations(o), ...validateObject(plural, o), ...(createValidators[plural]?.(o) ?? [])];
}

function validatePvUpdate(next: KubeObject, old: KubeObject): FieldError[] {
  const errs: FieldError[] = [];
  const newSpec = obj(next.spec);
  const oldSpec = obj(old.spec);
  for (const s of pvSources) {
    if (!isDeepStrictEqual(newSpec[s], oldSpec[s])) {
      errs.push(
        forbidden("spec.persistentvolumesource", "spec.persistentvolumesource is immutable after creation"),
      );
      break;
    }
  }
  // Upstream's path for this one lacks the "spec." prefix.
  if (newSpec.volumeMode !== oldSpec.volumeMode) {
    errs.push(invalid("volumeMode", newSpec.volumeMode, "field is immutable"));
  }
  return errs.concat(volumeSpecRules(next), volumeAttributesClassUpdateRules(next, old));
}

const updateValidators: Record<string, (next: KubeObject, old: KubeObject) => FieldError[]> = {
  persistentvolumeclaims: validateClaimUpdate,
  persistentvolumes: validatePvUpdate,
  volumeattributesclasses: validateVolumeAttributesClassUpdate,
  csistoragecapacities: validateCsiStorageCapacityUpdate,
  csidrivers: validateCsiDriverUpdate,
  volumeattachments(next, old) {
    return isDeepStrictEqual(next.spec, old.spec) ? [] : [invalid("spec", next.spec, "field is immutable")];
  },
  storageclasses(next, old) {
    const errs: FieldError[] = [];
    for (const f of ["parameters", "provisioner", "reclaimPolicy"]) {
      if (!isDeepStrictEqual(next[f], old[f])) errs.push(forbidden(f, `updates to ${f} are forbidden.`));
    }
    if (next.volumeBindingMode !== old.volumeBindingMode) {
      errs.push(invalid("volumeBindingMode", next.volumeBindingMode, "field is immutable"));
    }
    return errs;
  },
};

// A status write is validated on its own terms: upstream's status strategies of
// these kinds check status only, not the spec they copy from the stored object.
const statusValidators: Record<string, (next: KubeObject, old: KubeObject) => FieldError[]> = {
  persistentvolumeclaims: validateClaimStatus,
  persistentvolumes: () => [],
};

export function validateUpdate(
  plural: string,
  next: KubeObject,
  old: KubeObject,
  subresource?: "status",
): FieldError[] {
  const errs: FieldError[] = [];
  if (old.metadata.deletionTimestamp) {
    const before = new Set(old.metadata.finalizers ?? []);
    // Upstream prints the new ones as a sorted Go set: []string{"a", "b"}.
    const added = [...new Set((next.metadata.finalizers ?? []).filter((f) => !before.has(f)))].sort();
    if (added.length > 0) {
      errs.push(
        forbidden(
          "metadata.finalizers",
          `no new finalizers can be added if the object is being deleted, found new finalizers []string{${added.map((f) => JSON.stringify(f)).join(", ")}}`,
        ),
      );
    }
  }
  return errs.concat(
    validateAnnotations(next),
    validateObject(plural, next),
    ((subresource === "status" ? statusValidators[plural] : undefined) ?? updateValidators[plural])?.(
      next,
      old,
    ) ?? [],
  );
}
