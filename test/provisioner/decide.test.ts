// The provisioner's per-object decisions as tables: which claims get a
// volume, when the intent finalizer is added, released or cleaned up, and
// what happens to a PV it provisioned.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type {
  PersistentVolume,
  PersistentVolumeClaim,
  StorageClass,
  VolumeAttachment,
} from "../../shared/kube/types.ts";
import { provisioningFinalizer, pvDeletionProtectionFinalizer } from "../../shared/kube/well-known.ts";
import {
  type ClaimDecision,
  decideClaim,
  nextRetryDelaySeconds,
} from "../../shared/provisioner/decide-claim.ts";
import { decideVolume, type VolumeDecision } from "../../shared/provisioner/decide-volume.ts";

const driver = "hostpath.csi.k8s.io";
const now = new Date("2026-01-01T00:00:00Z");

function claim(
  opts: {
    annotations?: Record<string, string>;
    finalizers?: string[];
    volumeName?: string;
    deleting?: boolean;
    selector?: boolean;
    cls?: string;
  } = {},
): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: {
      name: "data",
      namespace: "ns",
      uid: "uid-1",
      annotations: { "volume.kubernetes.io/storage-provisioner": driver, ...opts.annotations },
      ...(opts.finalizers ? { finalizers: opts.finalizers } : {}),
      ...(opts.deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}),
    },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: "1Gi" } },
      storageClassName: opts.cls ?? "fast",
      ...(opts.volumeName ? { volumeName: opts.volumeName } : {}),
      ...(opts.selector ? { selector: { matchLabels: { a: "b" } } } : {}),
    },
    status: { phase: opts.volumeName ? "Bound" : "Pending" },
  };
}

function storageClass(provisioner = driver, mode = "Immediate"): StorageClass {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: { name: "fast" },
    provisioner,
    volumeBindingMode: mode,
    reclaimPolicy: "Delete",
  };
}

function pv(
  opts: {
    uid?: string;
    phase?: string;
    policy?: string;
    finalizers?: string[];
    deleting?: boolean;
    by?: string | null;
  } = {},
): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: {
      name: "pvc-uid-1",
      ...(opts.by === null ? {} : { annotations: { "pv.kubernetes.io/provisioned-by": opts.by ?? driver } }),
      ...(opts.finalizers ? { finalizers: opts.finalizers } : {}),
      ...(opts.deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}),
    },
    spec: {
      capacity: { storage: "1Gi" },
      accessModes: ["ReadWriteOnce"],
      persistentVolumeReclaimPolicy: opts.policy ?? "Delete",
      claimRef: { kind: "PersistentVolumeClaim", namespace: "ns", name: "data", uid: opts.uid ?? "uid-1" },
      csi: { driver, volumeHandle: "vol-1" },
    },
    status: { phase: opts.phase ?? "Bound" },
  };
}

const intent = [provisioningFinalizer];

const claimCases: {
  name: string;
  claim: PersistentVolumeClaim;
  cls?: StorageClass | null;
  pv?: PersistentVolume;
  want: ClaimDecision;
}[] = [
  {
    name: "a fresh claim for this driver: record the intent first",
    claim: claim(),
    want: { action: "add-intent" },
  },
  { name: "intent recorded: provision", claim: claim({ finalizers: intent }), want: { action: "provision" } },
  {
    name: "another driver's claim is ignored",
    claim: claim({ annotations: { "volume.kubernetes.io/storage-provisioner": "other.csi" } }),
    want: { action: "ignore", reason: `claim is not handed to ${driver}` },
  },
  {
    name: "the beta annotation alone hands the claim over",
    claim: {
      ...claim(),
      metadata: {
        ...claim().metadata,
        annotations: { "volume.beta.kubernetes.io/storage-provisioner": driver },
      },
    },
    want: { action: "add-intent" },
  },
  {
    name: "WaitForFirstConsumer without a selected node waits",
    claim: claim(),
    cls: storageClass(driver, "WaitForFirstConsumer"),
    want: { action: "ignore", reason: "waiting for the scheduler to select a node (WaitForFirstConsumer)" },
  },
  {
    name: "WaitForFirstConsumer with a selected node provisions",
    claim: claim({ annotations: { "volume.kubernetes.io/selected-node": "node-1" }, finalizers: intent }),
    cls: storageClass(driver, "WaitForFirstConsumer"),
    want: { action: "provision" },
  },
  {
    name: "a missing class fails with upstream's message",
    claim: claim({ finalizers: intent }),
    cls: null,
    want: { action: "fail", message: 'storageclass.storage.k8s.io "fast" not found' },
  },
  {
    name: "a selector is not supported",
    claim: claim({ selector: true, finalizers: intent }),
    want: { action: "fail", message: "claim Selector is not supported" },
  },
  {
    name: "a class of another provisioner is not ours even if the claim says so",
    claim: claim(),
    cls: storageClass("other.csi"),
    want: { action: "ignore", reason: "class fast is provisioned by other.csi" },
  },
  {
    name: "backoff is honoured",
    claim: claim({
      finalizers: intent,
      annotations: { "storage.kube-storage-functions.io/provisioning-retry-after": "2026-01-01T00:05:00Z" },
    }),
    want: { action: "backoff", until: "2026-01-01T00:05:00Z" },
  },
  {
    name: "an expired backoff provisions",
    claim: claim({
      finalizers: intent,
      annotations: { "storage.kube-storage-functions.io/provisioning-retry-after": "2025-12-31T00:00:00Z" },
    }),
    want: { action: "provision" },
  },
  {
    name: "PV exists, claim not bound yet: wait for the binder (it drops the finalizer when binding)",
    claim: claim({ finalizers: intent }),
    pv: pv({ phase: "Pending" }),
    want: { action: "ignore", reason: "volume pvc-uid-1 is provisioned; waiting for the binder" },
  },
  {
    name: "PV exists and the claim is bound: release the intent",
    claim: claim({ finalizers: intent, volumeName: "pvc-uid-1" }),
    pv: pv(),
    want: { action: "release-intent", reason: "volume pvc-uid-1 records the volume" },
  },
  {
    name: "PV exists and the claim is being deleted: release the intent, the PV is reclaimed by policy",
    claim: claim({ finalizers: intent, deleting: true }),
    pv: pv(),
    want: { action: "release-intent", reason: "volume pvc-uid-1 records the volume" },
  },
  {
    name: "claim deleted mid-provisioning, no PV: clean up",
    claim: claim({ finalizers: intent, deleting: true }),
    want: { action: "cleanup", reason: "claim is being deleted" },
  },
  {
    name: "claim bound to a static PV while an intent was open: clean up our volume",
    claim: claim({ finalizers: intent, volumeName: "static-pv" }),
    want: { action: "cleanup", reason: "claim is bound (or pre-bound) to volume static-pv" },
  },
  {
    name: "a deleted claim without intent is not ours to touch",
    claim: claim({ deleting: true }),
    want: { action: "ignore", reason: "claim is being deleted" },
  },
  {
    name: "a PV with our name but another claim's uid is never claimed",
    claim: claim(),
    pv: pv({ uid: "someone-else" }),
    want: {
      action: "fail",
      message: "volume name pvc-uid-1 is taken by a PersistentVolume of another claim",
    },
  },
  {
    name: "a claim with intent whose volume name is taken: never provision or clean up with another claim's volume",
    claim: claim({ finalizers: intent, deleting: true }),
    pv: pv({ uid: "someone-else" }),
    want: {
      action: "release-intent",
      reason: "volume name pvc-uid-1 is taken by a PersistentVolume of another claim",
      warning: "volume name pvc-uid-1 is taken by a PersistentVolume of another claim",
    },
  },
];

describe("provisioner: decideClaim", () => {
  for (const c of claimCases) {
    it(c.name, () => {
      assert.deepEqual(
        decideClaim(c.claim, {
          driverName: driver,
          storageClass: c.cls === null ? undefined : (c.cls ?? storageClass()),
          existingVolume: c.pv,
          now,
        }),
        c.want,
      );
    });
  }
});

function attachment(pvName: string, node: string): VolumeAttachment {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name: `csi-${node}` },
    spec: { attacher: driver, nodeName: node, source: { persistentVolumeName: pvName } },
  };
}

const volumeCases: {
  name: string;
  pv: PersistentVolume;
  attachments?: VolumeAttachment[];
  publishes?: boolean;
  want: VolumeDecision;
}[] = [
  {
    name: "Released + Delete: delete",
    pv: pv({ phase: "Released", finalizers: [pvDeletionProtectionFinalizer] }),
    want: { action: "delete" },
  },
  {
    name: "Released + Retain: never delete, drop our finalizer",
    pv: pv({ phase: "Released", policy: "Retain", finalizers: [pvDeletionProtectionFinalizer] }),
    want: { action: "remove-finalizer", reason: "reclaim policy is Retain" },
  },
  {
    name: "Released + Retain without finalizer: nothing",
    pv: pv({ phase: "Released", policy: "Retain" }),
    want: { action: "ignore", reason: "reclaim policy is Retain" },
  },
  { name: "Bound + Delete without finalizer: add it", pv: pv(), want: { action: "add-finalizer" } },
  {
    name: "Bound + Delete with finalizer: nothing",
    pv: pv({ finalizers: [pvDeletionProtectionFinalizer] }),
    want: { action: "ignore", reason: "phase Bound: nothing to reclaim" },
  },
  {
    name: "deleted while Bound: wait until Released",
    pv: pv({ finalizers: [pvDeletionProtectionFinalizer], deleting: true }),
    want: { action: "ignore", reason: "deleted while Bound: reclaimed once Released" },
  },
  {
    name: "deleted while Available with our finalizer: delete",
    pv: pv({ phase: "Available", finalizers: [pvDeletionProtectionFinalizer], deleting: true }),
    want: { action: "delete" },
  },
  {
    name: "Released, being deleted, our finalizer already gone (another holds it): already deleted, no second DeleteVolume",
    pv: pv({ phase: "Released", finalizers: ["kubernetes.io/pv-protection"], deleting: true }),
    want: { action: "ignore", reason: "being deleted without our finalizer" },
  },
  {
    name: "Released and being deleted with our finalizer: delete",
    pv: pv({
      phase: "Released",
      finalizers: ["kubernetes.io/pv-protection", pvDeletionProtectionFinalizer],
      deleting: true,
    }),
    want: { action: "delete" },
  },
  {
    name: "still attached: blocked with upstream's message",
    pv: pv({ phase: "Released", finalizers: [pvDeletionProtectionFinalizer] }),
    attachments: [attachment("pvc-uid-1", "node-a")],
    want: { action: "blocked", message: "persistentvolume pvc-uid-1 is still attached to node node-a" },
  },
  {
    name: "attachments do not block a driver without PUBLISH_UNPUBLISH",
    pv: pv({ phase: "Released" }),
    attachments: [attachment("pvc-uid-1", "node-a")],
    publishes: false,
    want: { action: "delete" },
  },
  {
    name: "another provisioner's PV is ignored",
    pv: pv({ phase: "Released", by: "other.csi" }),
    want: { action: "ignore", reason: `not provisioned by ${driver}` },
  },
  {
    name: "no annotation: spec.csi.driver decides",
    pv: pv({ phase: "Released", by: null }),
    want: { action: "delete" },
  },
];

describe("provisioner: decideVolume", () => {
  for (const c of volumeCases) {
    it(c.name, () => {
      assert.deepEqual(
        decideVolume(c.pv, {
          driverName: driver,
          attachments: c.attachments ?? [],
          driverPublishes: c.publishes ?? true,
        }),
        c.want,
      );
    });
  }
});

describe("provisioner: backoff", () => {
  it("doubles from 1 s to 5 min", () => {
    assert.deepEqual(
      [1, 2, 3, 9, 10, 30].map((n) => nextRetryDelaySeconds(n)),
      [1, 2, 4, 256, 300, 300],
    );
  });
});
