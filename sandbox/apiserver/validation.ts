// The subset of kube-apiserver's validation that the storage control plane
// depends on: required fields, name format, and the update rules a lenient
// double would let controllers break (PVC spec immutability, PV source and
// VolumeAttachment spec immutability, finalizers during deletion).
import { isDeepStrictEqual } from "node:util";
import { compareQuantities, isValidQuantity } from "../../shared/kube/quantity.ts";
import type { KubeObject } from "./store.ts";

export interface FieldError {
  field: string;
  message: string;
}

type Obj = Record<string, unknown>;

const dns1123Subdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

function obj(v: unknown): Obj {
  return v && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : {};
}

export function validateName(name: string): FieldError[] {
  if (name.length > 253 || !dns1123Subdomain.test(name)) {
    return [
      {
        field: "metadata.name",
        message: `Invalid value: "${name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character`,
      },
    ];
  }
  return [];
}

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
      return [
        {
          field: "involvedObject.namespace",
          message: `Invalid value: "${involvedNs}": does not match event.namespace`,
        },
      ];
    }
    if ((involvedNs === undefined || involvedNs === "") && ns !== "default" && ns !== "") {
      return [
        { field: "involvedObject.namespace", message: `Invalid value: "": does not match event.namespace` },
      ];
    }
    return [];
  },
  persistentvolumeclaims(o) {
    const spec = obj(o.spec);
    const errs: FieldError[] = [];
    if (!Array.isArray(spec.accessModes) || spec.accessModes.length === 0) {
      errs.push({ field: "spec.accessModes", message: "Required value: at least 1 access mode is required" });
    }
    const storage = requestedStorage(spec);
    if (storage === undefined) errs.push({ field: "spec.resources[storage]", message: "Required value" });
    else if (typeof storage !== "string" || !isValidQuantity(storage)) {
      errs.push({ field: "spec.resources[storage]", message: `Invalid value: ${JSON.stringify(storage)}` });
    }
    return errs;
  },
  persistentvolumes(o) {
    const spec = obj(o.spec);
    const errs: FieldError[] = [];
    if (!Array.isArray(spec.accessModes) || spec.accessModes.length === 0) {
      errs.push({ field: "spec.accessModes", message: "Required value" });
    }
    const storage = obj(spec.capacity).storage;
    if (storage === undefined) errs.push({ field: "spec.capacity", message: "Required value" });
    else if (typeof storage !== "string" || !isValidQuantity(storage)) {
      errs.push({ field: "spec.capacity[storage]", message: `Invalid value: ${JSON.stringify(storage)}` });
    }
    const sources = pvSources.filter((s) => spec[s] !== undefined);
    if (sources.length === 0)
      errs.push({ field: "spec", message: "Required value: must specify a volume type" });
    if (sources.length > 1)
      errs.push({ field: "spec", message: "Forbidden: may not specify more than 1 volume type" });
    return errs;
  },
  volumeattachments(o) {
    const spec = obj(o.spec);
    const errs: FieldError[] = [];
    if (!spec.attacher) errs.push({ field: "spec.attacher", message: "Required value" });
    if (!spec.nodeName) errs.push({ field: "spec.nodeName", message: "Required value" });
    const source = obj(spec.source);
    const n = (source.persistentVolumeName ? 1 : 0) + (source.inlineVolumeSpec ? 1 : 0);
    if (n !== 1)
      errs.push({
        field: "spec.source",
        message: "Required value: must specify exactly one of persistentVolumeName or inlineVolumeSpec",
      });
    return errs;
  },
};

export function validateCreate(plural: string, o: KubeObject): FieldError[] {
  return createValidators[plural]?.(o) ?? [];
}

/** to[key] = from[key], without leaving an `undefined` key behind (deep equality counts those). */
function copyField(from: Obj, to: Obj, key: string): void {
  if (from[key] === undefined) delete to[key];
  else to[key] = from[key];
}

function validatePvcUpdate(next: KubeObject, old: KubeObject): FieldError[] {
  const errs: FieldError[] = [];
  const newSpec = structuredClone(obj(next.spec));
  const oldSpec = structuredClone(obj(old.spec));
  // volumeName may be set once, by the binder.
  if (!oldSpec.volumeName) copyField(newSpec, oldSpec, "volumeName");
  // A claim with no class at all may be given one (retroactive default class, 1.28+).
  if (oldSpec.storageClassName === undefined || oldSpec.storageClassName === null) {
    copyField(newSpec, oldSpec, "storageClassName");
  }
  const newStorage = requestedStorage(newSpec);
  const oldStorage = requestedStorage(oldSpec);
  if (obj(next.status).phase === "Bound" && newStorage !== undefined) {
    obj(obj(newSpec.resources).requests).storage = oldStorage;
  }
  if (!isDeepStrictEqual(newSpec, oldSpec)) {
    errs.push({
      field: "spec",
      message:
        "Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
    });
  }
  if (typeof newStorage === "string" && typeof oldStorage === "string" && isValidQuantity(newStorage)) {
    if (compareQuantities(newStorage, oldStorage) < 0) {
      errs.push({
        field: "spec.resources.requests.storage",
        message: "Forbidden: field can not be less than previous value",
      });
    }
  }
  return errs;
}

function validatePvUpdate(next: KubeObject, old: KubeObject): FieldError[] {
  const errs: FieldError[] = [];
  const newSpec = obj(next.spec);
  const oldSpec = obj(old.spec);
  for (const s of pvSources) {
    if (!isDeepStrictEqual(newSpec[s], oldSpec[s])) {
      errs.push({
        field: "spec.persistentvolumesource",
        message: "Forbidden: spec.persistentvolumesource is immutable after creation",
      });
      break;
    }
  }
  if (newSpec.volumeMode !== oldSpec.volumeMode) {
    errs.push({ field: "spec.volumeMode", message: "Invalid value: field is immutable" });
  }
  return errs;
}

const updateValidators: Record<string, (next: KubeObject, old: KubeObject) => FieldError[]> = {
  persistentvolumeclaims: validatePvcUpdate,
  persistentvolumes: validatePvUpdate,
  volumeattachments(next, old) {
    return isDeepStrictEqual(next.spec, old.spec)
      ? []
      : [{ field: "spec", message: "Invalid value: field is immutable" }];
  },
  storageclasses(next, old) {
    const errs: FieldError[] = [];
    for (const f of ["provisioner", "parameters", "reclaimPolicy", "volumeBindingMode"]) {
      if (!isDeepStrictEqual(next[f], old[f]))
        errs.push({ field: f, message: `Forbidden: updates to ${f} are forbidden.` });
    }
    return errs;
  },
};

export function validateUpdate(plural: string, next: KubeObject, old: KubeObject): FieldError[] {
  const errs: FieldError[] = [];
  if (old.metadata.deletionTimestamp) {
    const before = new Set(old.metadata.finalizers ?? []);
    const added = (next.metadata.finalizers ?? []).filter((f) => !before.has(f));
    if (added.length > 0) {
      errs.push({
        field: "metadata.finalizers",
        message: `Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{${added.map((f) => JSON.stringify(f)).join(", ")}}`,
      });
    }
  }
  return errs.concat(updateValidators[plural]?.(next, old) ?? []);
}
