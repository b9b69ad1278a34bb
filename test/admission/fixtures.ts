// Builders for admission tests: objects, reviews, and the one check every
// mutation test makes: decode the response's patch and apply it to the
// original object the way kube-apiserver does.
import assert from "node:assert/strict";
import jsonpatch from "fast-json-patch";
import type { ClusterLookups, Lookup } from "../../shared/admission/cluster-lookups.ts";
import type { AdmissionResponse } from "../../shared/admission/review.ts";
import type {
  CSIDriver,
  PersistentVolume,
  PersistentVolumeClaim,
  StorageClass,
  VolumeAttachment,
} from "../../shared/kube/types.ts";

export const ourDriver = "hostpath.csi.k8s.io";

export function claim(
  name: string,
  patch: {
    spec?: Partial<PersistentVolumeClaim["spec"]>;
    metadata?: Partial<PersistentVolumeClaim["metadata"]>;
    status?: PersistentVolumeClaim["status"];
  } = {},
): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace: "default", ...patch.metadata },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: "1Gi" } },
      volumeMode: "Filesystem",
      ...patch.spec,
    },
    ...(patch.status ? { status: patch.status } : {}),
  };
}

/** A claim as stored after binding: class set, volumeName set, phase Bound. */
export function boundClaim(name: string, storage = "1Gi", className = "fast"): PersistentVolumeClaim {
  return claim(name, {
    spec: { storageClassName: className, volumeName: `pv-${name}`, resources: { requests: { storage } } },
    status: { phase: "Bound", capacity: { storage } },
  });
}

export function storageClass(
  name: string,
  options: {
    provisioner?: string;
    isDefault?: boolean | "beta";
    created?: string;
    bindingMode?: string;
    allowVolumeExpansion?: boolean;
  } = {},
): StorageClass {
  const annotations: Record<string, string> = {};
  if (options.isDefault === true) annotations["storageclass.kubernetes.io/is-default-class"] = "true";
  if (options.isDefault === "beta") annotations["storageclass.beta.kubernetes.io/is-default-class"] = "true";
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: {
      name,
      creationTimestamp: options.created ?? "2024-01-01T00:00:00Z",
      ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
    },
    provisioner: options.provisioner ?? ourDriver,
    reclaimPolicy: "Delete",
    volumeBindingMode: options.bindingMode ?? "Immediate",
    ...(options.allowVolumeExpansion === undefined
      ? {}
      : { allowVolumeExpansion: options.allowVolumeExpansion }),
  };
}

export function volume(name: string, finalizers?: string[]): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name, ...(finalizers ? { finalizers } : {}) },
    spec: {
      capacity: { storage: "1Gi" },
      accessModes: ["ReadWriteOnce"],
      persistentVolumeReclaimPolicy: "Retain",
      csi: { driver: ourDriver, volumeHandle: name },
    },
  };
}

export function attachment(name: string, spec: Partial<VolumeAttachment["spec"]> = {}): VolumeAttachment {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name },
    spec: { attacher: ourDriver, nodeName: "node-1", source: { persistentVolumeName: "pv-1" }, ...spec },
  };
}

export function csiDriver(name: string): CSIDriver {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "CSIDriver",
    metadata: { name },
    spec: { attachRequired: true },
  };
}

const resources = {
  persistentvolumeclaims: { group: "", version: "v1", kind: "PersistentVolumeClaim" },
  persistentvolumes: { group: "", version: "v1", kind: "PersistentVolume" },
  volumeattachments: { group: "storage.k8s.io", version: "v1", kind: "VolumeAttachment" },
} as const;

export type ReviewResource = keyof typeof resources;

let uids = 0;

/** An AdmissionReview request as kube-apiserver sends it. */
export function review(
  resource: ReviewResource,
  operation: "CREATE" | "UPDATE" | "DELETE" | "CONNECT",
  object: object | null,
  oldObject: object | null = null,
  extra: Record<string, unknown> = {},
): { apiVersion: string; kind: string; request: Record<string, unknown> } {
  const r = resources[resource];
  const meta = ((object ?? oldObject) as { metadata?: { name?: string; namespace?: string } } | null)
    ?.metadata;
  uids += 1;
  return {
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid: `00000000-0000-4000-8000-${String(uids).padStart(12, "0")}`,
      kind: { group: r.group, version: r.version, kind: r.kind },
      resource: { group: r.group, version: r.version, resource },
      requestKind: { group: r.group, version: r.version, kind: r.kind },
      requestResource: { group: r.group, version: r.version, resource },
      name: meta?.name ?? "",
      ...(meta?.namespace ? { namespace: meta.namespace } : {}),
      operation,
      userInfo: { username: "kubernetes-admin", groups: ["system:masters", "system:authenticated"] },
      object,
      oldObject,
      dryRun: false,
      options: {
        apiVersion: "meta.k8s.io/v1",
        kind: `${operation === "UPDATE" ? "Update" : "Create"}Options`,
      },
      ...extra,
    },
  };
}

/** The JSON Patch of a response, decoded. */
export function patchOps(response: AdmissionResponse): jsonpatch.Operation[] {
  assert.equal(response.patchType, "JSONPatch", "a patch comes with patchType JSONPatch");
  assert.equal(typeof response.patch, "string");
  const ops: unknown = JSON.parse(Buffer.from(response.patch ?? "", "base64").toString("utf8"));
  assert.ok(Array.isArray(ops), "the patch is a JSON array of operations");
  return ops as jsonpatch.Operation[];
}

/** The object after kube-apiserver applied the response's patch (validated) to `original`. */
export function patched<T extends object>(original: T, response: AdmissionResponse): T {
  if (response.patch === undefined) {
    assert.equal(response.patchType, undefined, "patchType without a patch is rejected by kube-apiserver");
    return original;
  }
  return jsonpatch.applyPatch(structuredClone(original), patchOps(response), true, false).newDocument;
}

/** ClusterLookups with fixed answers; counts calls. */
export function fakeLookups(answers: {
  classes?: Lookup<StorageClass[]>;
  /** CSIDrivers by name, or a failure. */
  drivers?: Lookup<Record<string, CSIDriver>>;
}): ClusterLookups & { calls: { classes: number; drivers: string[] } } {
  const calls = { classes: 0, drivers: [] as string[] };
  return {
    calls,
    async storageClasses() {
      calls.classes += 1;
      return answers.classes ?? { ok: true, value: [] };
    },
    async csiDriver(name) {
      calls.drivers.push(name);
      const drivers = answers.drivers ?? { ok: true, value: {} };
      return drivers.ok ? { ok: true, value: drivers.value[name] } : drivers;
    },
  };
}
