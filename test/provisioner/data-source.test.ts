// Data sources as the external-provisioner validates them: which kind the
// claim points at, then snapshot restores and clones, with upstream's texts.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type {
  KubeObject,
  PersistentVolume,
  PersistentVolumeClaim,
  StorageClass,
  VolumeSnapshot,
  VolumeSnapshotContent,
} from "../../shared/kube/types.ts";
import {
  annAllowVolumeModeChange,
  type CloneSourceInput,
  type ContentSourceResult,
  cloneContentSource,
  type DataSourcePlan,
  type DataSourceRef,
  planDataSource,
  pvcCloneFinalizer,
  type SnapshotSourceInput,
  snapshotContentSource,
  snapshotSourceProtectionFinalizer,
} from "../../shared/provisioner/data-source.ts";
import { protectedSource, releasedSource } from "../../shared/provisioner/data-source-ref.ts";

const driver = "hostpath.csi.k8s.io";

const storageClass: StorageClass = {
  apiVersion: "storage.k8s.io/v1",
  kind: "StorageClass",
  metadata: { name: "fast" },
  provisioner: driver,
};

function claim(spec: Partial<PersistentVolumeClaim["spec"]> = {}): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name: "restore", namespace: "ns", uid: "claim-uid" },
    spec: {
      accessModes: ["ReadWriteOnce"],
      storageClassName: "fast",
      resources: { requests: { storage: "10Gi" } },
      ...spec,
    },
  };
}

describe("planDataSource", () => {
  const snapshotCapability = {
    capability: "CREATE_DELETE_SNAPSHOT",
    missingError:
      "CSI driver does not support snapshot restore: controller CREATE_DELETE_SNAPSHOT capability is not reported",
  } as const;
  const cloneCapability = {
    capability: "CLONE_VOLUME",
    missingError:
      "CSI driver does not support clone operations: controller CLONE_VOLUME capability is not reported",
  } as const;
  const snapRef: DataSourceRef = {
    kind: "VolumeSnapshot",
    apiGroup: "snapshot.storage.k8s.io",
    name: "snap",
    namespace: "ns",
  };

  const cases: { name: string; claim: PersistentVolumeClaim; want: DataSourcePlan }[] = [
    { name: "no data source", claim: claim(), want: { ok: true, type: "none" } },
    {
      name: "snapshot in dataSource",
      claim: claim({
        dataSource: { kind: "VolumeSnapshot", apiGroup: "snapshot.storage.k8s.io", name: "snap" },
      }),
      want: { ok: true, type: "snapshot", ref: snapRef, requiredCapability: snapshotCapability },
    },
    {
      name: "snapshot in dataSourceRef without a namespace",
      claim: claim({
        dataSourceRef: { kind: "VolumeSnapshot", apiGroup: "snapshot.storage.k8s.io", name: "snap" },
      }),
      want: { ok: true, type: "snapshot", ref: snapRef, requiredCapability: snapshotCapability },
    },
    {
      name: "dataSource is read before dataSourceRef",
      claim: claim({
        dataSource: { kind: "VolumeSnapshot", apiGroup: "snapshot.storage.k8s.io", name: "snap" },
        dataSourceRef: { kind: "PersistentVolumeClaim", name: "other" },
      }),
      want: { ok: true, type: "snapshot", ref: snapRef, requiredCapability: snapshotCapability },
    },
    {
      name: "snapshot kind in another API group",
      claim: claim({ dataSource: { kind: "VolumeSnapshot", apiGroup: "example.com", name: "snap" } }),
      want: {
        ok: false,
        error:
          "the PVC source does not belong to the right APIGroup. Expected snapshot.storage.k8s.io, Got example.com",
      },
    },
    {
      name: "snapshot kind without an API group",
      claim: claim({ dataSource: { kind: "VolumeSnapshot", name: "snap" } }),
      want: {
        ok: false,
        error: "the PVC source does not belong to the right APIGroup. Expected snapshot.storage.k8s.io, Got ",
      },
    },
    {
      name: "clone",
      claim: claim({ dataSource: { kind: "PersistentVolumeClaim", name: "src" } }),
      want: {
        ok: true,
        type: "clone",
        ref: { kind: "PersistentVolumeClaim", apiGroup: "", name: "src", namespace: "ns" },
        requiredCapability: cloneCapability,
      },
    },
    {
      name: "any other kind is left to a populator",
      claim: claim({ dataSourceRef: { kind: "Backup", apiGroup: "backup.example.com", name: "nightly" } }),
      want: {
        ok: true,
        type: "populator",
        ref: { kind: "Backup", apiGroup: "backup.example.com", name: "nightly", namespace: "ns" },
        ignoredReason:
          "data source (Backup) is not handled by the provisioner, assuming an external populator will provision it",
        event: {
          type: "Normal",
          reason: "Provisioning",
          message: "Assuming an external populator will provision the volume",
        },
      },
    },
    {
      name: "cross-namespace dataSourceRef",
      claim: claim({
        dataSourceRef: {
          kind: "VolumeSnapshot",
          apiGroup: "snapshot.storage.k8s.io",
          name: "snap",
          namespace: "other",
        },
      }),
      want: {
        ok: false,
        error: "dataSourceRef namespace specified but the CrossNamespaceVolumeDataSource feature is disabled",
      },
    },
    {
      name: "a data source without a name",
      claim: claim({ dataSource: { kind: "PersistentVolumeClaim", name: "" } }),
      want: { ok: false, error: "the PVC source not found for PVC restore" },
    },
  ];

  for (const c of cases) {
    it(c.name, () => assert.deepEqual(planDataSource(c.claim), c.want));
  }
});

describe("snapshotContentSource", () => {
  const ref: DataSourceRef = {
    kind: "VolumeSnapshot",
    apiGroup: "snapshot.storage.k8s.io",
    name: "snap",
    namespace: "ns",
  };
  const snapshot = (
    over: Partial<VolumeSnapshot> = {},
    status: VolumeSnapshot["status"] = {},
  ): VolumeSnapshot => ({
    apiVersion: "snapshot.storage.k8s.io/v1",
    kind: "VolumeSnapshot",
    metadata: { name: "snap", namespace: "ns", uid: "snap-uid" },
    spec: { source: { persistentVolumeClaimName: "src" } },
    status: { boundVolumeSnapshotContentName: "content-1", readyToUse: true, restoreSize: "10Gi", ...status },
    ...over,
  });
  const content = (
    spec: Partial<VolumeSnapshotContent["spec"]> = {},
    over: Partial<VolumeSnapshotContent> = {},
  ): VolumeSnapshotContent => ({
    apiVersion: "snapshot.storage.k8s.io/v1",
    kind: "VolumeSnapshotContent",
    metadata: { name: "content-1" },
    spec: {
      volumeSnapshotRef: { kind: "VolumeSnapshot", name: "snap", namespace: "ns", uid: "snap-uid" },
      deletionPolicy: "Delete",
      driver,
      source: { volumeHandle: "vol-1" },
      sourceVolumeMode: "Filesystem",
      ...spec,
    },
    status: { snapshotHandle: "snap-handle", readyToUse: true },
    ...over,
  });
  const input = (over: Partial<SnapshotSourceInput> = {}): SnapshotSourceInput => ({
    claim: claim(),
    storageClass,
    ref,
    snapshot: snapshot(),
    content: content(),
    ...over,
  });
  const good: ContentSourceResult = { ok: true, value: { snapshot: { snapshotId: "snap-handle" } } };
  const fail = (error: string): ContentSourceResult => ({
    ok: false,
    error: `error getting handle for DataSource Type VolumeSnapshot by Name snap: ${error}`,
  });
  const denied =
    "requested volume ns/restore modifies the mode of the source volume but does not have permission to do so. ";
  const withAnn = (value: string) =>
    content({}, { metadata: { name: "content-1", annotations: { [annAllowVolumeModeChange]: value } } });

  const cases: { name: string; input: SnapshotSourceInput; want: ContentSourceResult }[] = [
    { name: "ready snapshot", input: input(), want: good },
    {
      name: "a bigger request than the restore size",
      input: input({ claim: claim({ resources: { requests: { storage: "20Gi" } } }) }),
      want: good,
    },
    {
      name: "snapshot missing",
      input: input({ snapshot: undefined }),
      want: fail(
        'error getting snapshot snap from api server: volumesnapshots.snapshot.storage.k8s.io "snap" not found',
      ),
    },
    {
      name: "snapshot being deleted",
      input: input({
        snapshot: snapshot({
          metadata: {
            name: "snap",
            namespace: "ns",
            uid: "snap-uid",
            deletionTimestamp: "2024-01-01T00:00:00Z",
          },
        }),
      }),
      want: fail("snapshot snap is being deleted"),
    },
    {
      name: "snapshot being deleted, but a restore had started (our finalizer)",
      input: input({
        snapshot: snapshot({
          metadata: {
            name: "snap",
            namespace: "ns",
            uid: "snap-uid",
            deletionTimestamp: "2024-01-01T00:00:00Z",
            finalizers: [snapshotSourceProtectionFinalizer],
          },
        }),
      }),
      want: good,
    },
    {
      name: "snapshot without status",
      input: input({ snapshot: snapshot({ status: undefined }) }),
      want: fail("snapshot snap not bound"),
    },
    { name: "content missing", input: input({ content: undefined }), want: fail("snapshot snap not bound") },
    {
      name: "content is bound to another snapshot",
      input: input({
        content: content({ volumeSnapshotRef: { name: "snap", namespace: "ns", uid: "older-uid" } }),
      }),
      want: fail("snapshot snap not bound"),
    },
    {
      name: "content of another driver",
      input: input({ content: content({ driver: "other.csi" }) }),
      want: fail("snapshot snap not bound"),
    },
    {
      name: "not ready",
      input: input({ snapshot: snapshot({}, { readyToUse: false }) }),
      want: fail("snapshot snap is not Ready"),
    },
    {
      name: "no snapshot handle",
      input: input({ content: content({}, { status: { readyToUse: true } }) }),
      want: fail("snapshot handle snap is not available"),
    },
    {
      name: "request smaller than the restore size",
      input: input({ claim: claim({ resources: { requests: { storage: "5Gi" } } }) }),
      want: fail(
        "requested volume size 5368709120 is less than the size 10737418240 for the source snapshot snap",
      ),
    },
    {
      name: "restore size set but the claim requests nothing",
      input: input({ claim: claim({ resources: {} }) }),
      want: fail("error getting capacity for PVC restore when creating snapshot snap"),
    },
    {
      name: "no restore size: no size check",
      input: input({
        claim: claim({ resources: { requests: { storage: "1Mi" } } }),
        snapshot: snapshot({}, { restoreSize: undefined }),
      }),
      want: good,
    },
    {
      name: "volume mode change without the annotation",
      input: input({ claim: claim({ volumeMode: "Block" }) }),
      want: fail(
        `${denied}${annAllowVolumeModeChange} annotation is not present on snapshotcontent content-1`,
      ),
    },
    {
      name: "volume mode change allowed",
      input: input({ claim: claim({ volumeMode: "Block" }), content: withAnn("true") }),
      want: good,
    },
    {
      name: "volume mode change refused",
      input: input({ claim: claim({ volumeMode: "Block" }), content: withAnn("False") }),
      want: fail(`${denied}${annAllowVolumeModeChange} is set to false on snapshotcontent content-1`),
    },
    {
      name: "volume mode change annotation not a boolean",
      input: input({ claim: claim({ volumeMode: "Block" }), content: withAnn("yes") }),
      want: fail(
        `${denied}failed to convert ${annAllowVolumeModeChange} annotation value to boolean with error: strconv.ParseBool: parsing "yes": invalid syntax`,
      ),
    },
    {
      name: "volume mode conversion check off",
      input: input({ claim: claim({ volumeMode: "Block" }), preventVolumeModeConversion: false }),
      want: good,
    },
    { name: "same volume mode", input: input({ claim: claim({ volumeMode: "Filesystem" }) }), want: good },
  ];

  for (const c of cases) {
    it(c.name, () => assert.deepEqual(snapshotContentSource(c.input), c.want));
  }
});

describe("cloneContentSource", () => {
  const ref: DataSourceRef = { kind: "PersistentVolumeClaim", apiGroup: "", name: "src", namespace: "ns" };
  const source = (
    spec: Partial<PersistentVolumeClaim["spec"]> = {},
    over: Partial<PersistentVolumeClaim> = {},
  ): PersistentVolumeClaim => ({
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name: "src", namespace: "ns", uid: "src-uid" },
    spec: {
      storageClassName: "fast",
      volumeName: "pv-src",
      resources: { requests: { storage: "10Gi" } },
      ...spec,
    },
    status: { phase: "Bound" },
    ...over,
  });
  const volume = (
    spec: Partial<PersistentVolume["spec"]> = {},
    over: Partial<PersistentVolume> = {},
  ): PersistentVolume => ({
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name: "pv-src" },
    spec: {
      csi: { driver, volumeHandle: "vol-src" },
      claimRef: { kind: "PersistentVolumeClaim", name: "src", namespace: "ns", uid: "src-uid" },
      ...spec,
    },
    status: { phase: "Bound" },
    ...over,
  });
  const input = (over: Partial<CloneSourceInput> = {}): CloneSourceInput => ({
    claim: claim(),
    storageClass,
    ref,
    sourceClaim: source(),
    sourceVolume: volume(),
    ...over,
  });
  const good: ContentSourceResult = { ok: true, value: { volume: { volumeId: "vol-src" } } };
  const fail = (error: string): ContentSourceResult => ({
    ok: false,
    error: `error getting handle for DataSource Type PersistentVolumeClaim by Name src: ${error}`,
  });
  const invalid = fail("claim in dataSource not bound or invalid");

  const cases: { name: string; input: CloneSourceInput; want: ContentSourceResult }[] = [
    { name: "bound source of the same driver", input: input(), want: good },
    {
      name: "source in another class of the same driver (upstream only checks the driver)",
      input: input({ sourceClaim: source({ storageClassName: "slow" }) }),
      want: good,
    },
    {
      name: "block to block",
      input: input({ claim: claim({ volumeMode: "Block" }), sourceVolume: volume({ volumeMode: "Block" }) }),
      want: good,
    },
    {
      name: "source claim missing",
      input: input({ sourceClaim: undefined }),
      want: fail(
        'error getting PVC src (namespace "ns") from api server: persistentvolumeclaims "src" not found',
      ),
    },
    {
      name: "source claim not bound",
      input: input({ sourceClaim: source({}, { status: { phase: "Pending" } }) }),
      want: fail("the PVC DataSource src must have a status of Bound.  Got {Pending}"),
    },
    {
      name: "source claim being deleted",
      input: input({
        sourceClaim: source(
          {},
          {
            metadata: {
              name: "src",
              namespace: "ns",
              uid: "src-uid",
              deletionTimestamp: "2024-01-01T00:00:00Z",
            },
          },
        ),
      }),
      want: fail("the PVC DataSource src is currently being deleted"),
    },
    {
      name: "source claim without a class",
      input: input({ sourceClaim: source({ storageClassName: null }) }),
      want: fail("the source PVC (src) storageclass cannot be empty"),
    },
    {
      name: "new claim without a class",
      input: input({ claim: claim({ storageClassName: undefined }) }),
      want: fail("the requested PVC (restore) storageclass cannot be empty"),
    },
    {
      name: "new claim smaller than the source",
      input: input({ claim: claim({ resources: { requests: { storage: "1Gi" } } }) }),
      want: fail(
        "error, new PVC request must be greater than or equal in size to the specified PVC data source, requested 1073741824 but source is 10737418240",
      ),
    },
    {
      name: "source claim names no volume",
      input: input({ sourceClaim: source({ volumeName: "" }) }),
      want: fail("volume name is empty in source PVC src"),
    },
    { name: "source PV missing", input: input({ sourceVolume: undefined }), want: invalid },
    {
      name: "source PV is not CSI",
      input: input({ sourceVolume: volume({ csi: undefined }) }),
      want: invalid,
    },
    {
      name: "source PV of another driver",
      input: input({ sourceVolume: volume({ csi: { driver: "other.csi", volumeHandle: "x" } }) }),
      want: invalid,
    },
    {
      name: "source PV without claimRef",
      input: input({ sourceVolume: volume({ claimRef: null }) }),
      want: invalid,
    },
    {
      name: "source PV bound to an older claim of the same name",
      input: input({ sourceVolume: volume({ claimRef: { name: "src", namespace: "ns", uid: "old" } }) }),
      want: invalid,
    },
    {
      name: "source PV released",
      input: input({ sourceVolume: volume({}, { status: { phase: "Released" } }) }),
      want: invalid,
    },
    {
      name: "block source, filesystem clone",
      input: input({ sourceVolume: volume({ volumeMode: "Block" }) }),
      want: fail(
        "the source PVC and destination PVCs must have the same volume mode for cloning.  Source is Block, but new PVC requested Filesystem",
      ),
    },
    {
      name: "filesystem source, block clone",
      input: input({ claim: claim({ volumeMode: "Block" }) }),
      want: fail(
        "the source PVC and destination PVCs must have the same volume mode for cloning.  Source is Filesystem, but new PVC requested Block",
      ),
    },
  ];

  for (const c of cases) {
    it(c.name, () => assert.deepEqual(cloneContentSource(c.input), c.want));
  }
});

describe("source protection finalizer edits", () => {
  const source = (finalizers?: string[], deleting = false): KubeObject => ({
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: {
      name: "src",
      namespace: "ns",
      ...(finalizers ? { finalizers } : {}),
      ...(deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}),
    },
  });
  const f = pvcCloneFinalizer;
  const cases: {
    name: string;
    edit: typeof protectedSource;
    input: KubeObject;
    want: string[] | undefined;
  }[] = [
    { name: "protect adds it", edit: protectedSource, input: source(["other"]), want: ["other", f] },
    { name: "protect: already there", edit: protectedSource, input: source([f]), want: undefined },
    { name: "protect: being deleted", edit: protectedSource, input: source([], true), want: undefined },
    { name: "release takes it off", edit: releasedSource, input: source([f, "other"]), want: ["other"] },
    { name: "release: not there", edit: releasedSource, input: source(["other"]), want: undefined },
  ];
  for (const c of cases) {
    it(`${c.name}, leaving the object read untouched`, () => {
      const before = structuredClone(c.input);
      const out = c.edit(c.input, f);
      assert.deepEqual(out?.metadata.finalizers, c.want);
      assert.deepEqual(c.input, before);
    });
  }
});
