// A claim's data source, checked as the external-provisioner checks it, and
// turned into CreateVolume's volumeContentSource. Two steps, because what
// must be read depends on the first: planDataSource says what the claim
// points at (snapshot, clone, an external populator's object, or nothing);
// snapshotContentSource / cloneContentSource validate what was read.
import { parseQuantityBytes } from "../kube/quantity.ts";
import type {
  PersistentVolume,
  PersistentVolumeClaim,
  StorageClass,
  VolumeSnapshot,
  VolumeSnapshotContent,
} from "../kube/types.ts";
import { goQuote } from "./go-format.ts";

export const snapshotApiGroup = "snapshot.storage.k8s.io";
export const snapshotKind = "VolumeSnapshot";
export const pvcKind = "PersistentVolumeClaim";
/** Put on a source claim while a clone of it is being provisioned. */
export const pvcCloneFinalizer = "provisioner.storage.kubernetes.io/cloning-protection";
/** Put on a source snapshot while a volume is being restored from it. */
export const snapshotSourceProtectionFinalizer =
  "provisioner.storage.kubernetes.io/volumesnapshot-as-source-protection";
export const annAllowVolumeModeChange = "snapshot.storage.kubernetes.io/allow-volume-mode-change";

export interface DataSourceRef {
  kind: string;
  /** "" for the core group. */
  apiGroup: string;
  name: string;
  namespace: string;
}

export type VolumeContentSource = { snapshot: { snapshotId: string } } | { volume: { volumeId: string } };

/** A controller capability the driver must report for this kind of source, and upstream's error when it does not. */
export interface RequiredCapability {
  capability: "CREATE_DELETE_SNAPSHOT" | "CLONE_VOLUME";
  missingError: string;
}

export type DataSourcePlan =
  | { ok: true; type: "none" }
  | { ok: true; type: "snapshot"; ref: DataSourceRef; requiredCapability: RequiredCapability }
  | { ok: true; type: "clone"; ref: DataSourceRef; requiredCapability: RequiredCapability }
  /**
   * Any other kind: upstream leaves the claim to an external volume populator,
   * records a Normal event and stops (an "ignored" outcome, not a failure).
   */
  | {
      ok: true;
      type: "populator";
      ref: DataSourceRef;
      ignoredReason: string;
      event: { type: "Normal"; reason: "Provisioning"; message: string };
    }
  | { ok: false; error: string };

export function planDataSource(claim: PersistentVolumeClaim): DataSourcePlan {
  const namespace = claim.metadata.namespace ?? "";
  let ref: DataSourceRef;
  // Upstream reads dataSource first. The API server keeps both fields equal
  // unless dataSourceRef names another namespace (then dataSource is empty),
  // so the order only decides which cross-namespace error applies.
  const { dataSource, dataSourceRef } = claim.spec;
  if (dataSource) {
    ref = { kind: dataSource.kind, apiGroup: dataSource.apiGroup ?? "", name: dataSource.name, namespace };
  } else if (dataSourceRef) {
    // CrossNamespaceVolumeDataSource is alpha and off by default upstream; we do not support it.
    if (dataSourceRef.namespace) {
      return {
        ok: false,
        error: "dataSourceRef namespace specified but the CrossNamespaceVolumeDataSource feature is disabled",
      };
    }
    ref = {
      kind: dataSourceRef.kind,
      apiGroup: dataSourceRef.apiGroup ?? "",
      name: dataSourceRef.name,
      namespace,
    };
  } else {
    return { ok: true, type: "none" };
  }

  if (!ref.name) return { ok: false, error: `the PVC source not found for PVC ${claim.metadata.name}` };

  switch (ref.kind) {
    case snapshotKind:
      if (ref.apiGroup !== snapshotApiGroup) {
        return {
          ok: false,
          error: `the PVC source does not belong to the right APIGroup. Expected ${snapshotApiGroup}, Got ${ref.apiGroup}`,
        };
      }
      return {
        ok: true,
        type: "snapshot",
        ref,
        requiredCapability: {
          capability: "CREATE_DELETE_SNAPSHOT",
          missingError:
            "CSI driver does not support snapshot restore: controller CREATE_DELETE_SNAPSHOT capability is not reported",
        },
      };
    // Upstream matches the kind alone here (no API group check).
    case pvcKind:
      return {
        ok: true,
        type: "clone",
        ref,
        requiredCapability: {
          capability: "CLONE_VOLUME",
          missingError:
            "CSI driver does not support clone operations: controller CLONE_VOLUME capability is not reported",
        },
      };
    default:
      return {
        ok: true,
        type: "populator",
        ref,
        ignoredReason: `data source (${ref.kind}) is not handled by the provisioner, assuming an external populator will provision it`,
        event: {
          type: "Normal",
          reason: "Provisioning",
          message: "Assuming an external populator will provision the volume",
        },
      };
  }
}

export type ContentSourceResult = { ok: true; value: VolumeContentSource } | { ok: false; error: string };

export interface SnapshotSourceInput {
  claim: PersistentVolumeClaim;
  storageClass: StorageClass;
  ref: DataSourceRef;
  /** The VolumeSnapshot named by ref, undefined when it does not exist. */
  snapshot: VolumeSnapshot | undefined;
  /** The VolumeSnapshotContent named by the snapshot's status, undefined when unknown or absent. */
  content: VolumeSnapshotContent | undefined;
  /** --prevent-volume-mode-conversion (default true since external-provisioner 4.0). */
  preventVolumeModeConversion?: boolean;
}

export function snapshotContentSource(input: SnapshotSourceInput): ContentSourceResult {
  const inner = checkSnapshotSource(input);
  return inner.ok ? inner : { ok: false, error: wrapHandleError(input.ref, inner.error) };
}

function checkSnapshotSource(input: SnapshotSourceInput): ContentSourceResult {
  const { claim, storageClass, ref, snapshot, content } = input;
  const notBound = { ok: false, error: `snapshot ${ref.name} not bound` } as const;
  if (!snapshot) {
    return {
      ok: false,
      error: `error getting snapshot ${ref.name} from api server: volumesnapshots.${snapshotApiGroup} ${goQuote(ref.name)} not found`,
    };
  }
  // A snapshot being deleted may still serve a restore that had already started (our finalizer says so).
  if (
    snapshot.metadata.deletionTimestamp &&
    !(snapshot.metadata.finalizers ?? []).includes(snapshotSourceProtectionFinalizer)
  ) {
    return { ok: false, error: `snapshot ${ref.name} is being deleted` };
  }
  const contentName = snapshot.status?.boundVolumeSnapshotContentName;
  if (!contentName || !content || content.metadata.name !== contentName) return notBound;
  const back = content.spec.volumeSnapshotRef ?? {};
  if (
    back.uid !== snapshot.metadata.uid ||
    back.namespace !== snapshot.metadata.namespace ||
    back.name !== snapshot.metadata.name
  ) {
    return notBound;
  }
  if (content.spec.driver !== storageClass.provisioner) return notBound;
  if (snapshot.status?.readyToUse !== true) return { ok: false, error: `snapshot ${ref.name} is not Ready` };
  const snapshotHandle = content.status?.snapshotHandle;
  if (snapshotHandle === undefined || snapshotHandle === null) {
    return { ok: false, error: `snapshot handle ${ref.name} is not available` };
  }

  const restoreSize = snapshot.status?.restoreSize;
  if (restoreSize !== undefined && restoreSize !== null) {
    const requested = claim.spec.resources?.requests?.storage;
    if (requested === undefined) {
      return {
        ok: false,
        error: `error getting capacity for PVC ${claim.metadata.name} when creating snapshot ${snapshot.metadata.name}`,
      };
    }
    const sizes = bytesOf(requested, restoreSize);
    if (!sizes.ok) return sizes;
    const [requestedBytes, restoreBytes] = sizes.value;
    if (requestedBytes < restoreBytes) {
      return {
        ok: false,
        error: `requested volume size ${requestedBytes} is less than the size ${restoreBytes} for the source snapshot ${snapshot.metadata.name}`,
      };
    }
  }

  if (input.preventVolumeModeConversion ?? true) {
    const sourceMode = content.spec.sourceVolumeMode;
    const wantedMode = claim.spec.volumeMode;
    // Upstream compares only when both are set (an unset claim mode is not treated as Filesystem here).
    if (sourceMode && wantedMode && sourceMode !== wantedMode) {
      const denied = `requested volume ${claim.metadata.namespace ?? ""}/${claim.metadata.name} modifies the mode of the source volume but does not have permission to do so. `;
      const allow = content.metadata.annotations?.[annAllowVolumeModeChange];
      if (allow === undefined) {
        return {
          ok: false,
          error: `${denied}${annAllowVolumeModeChange} annotation is not present on snapshotcontent ${content.metadata.name}`,
        };
      }
      const allowed = goParseBool(allow);
      if (allowed === undefined) {
        return {
          ok: false,
          error: `${denied}failed to convert ${annAllowVolumeModeChange} annotation value to boolean with error: strconv.ParseBool: parsing ${goQuote(allow)}: invalid syntax`,
        };
      }
      if (!allowed) {
        return {
          ok: false,
          error: `${denied}${annAllowVolumeModeChange} is set to false on snapshotcontent ${content.metadata.name}`,
        };
      }
    }
  }

  return { ok: true, value: { snapshot: { snapshotId: snapshotHandle } } };
}

export interface CloneSourceInput {
  claim: PersistentVolumeClaim;
  storageClass: StorageClass;
  ref: DataSourceRef;
  /** The source claim named by ref (same namespace), undefined when it does not exist. */
  sourceClaim: PersistentVolumeClaim | undefined;
  /** The PV the source claim's spec.volumeName names, undefined when unknown or absent. */
  sourceVolume: PersistentVolume | undefined;
}

export function cloneContentSource(input: CloneSourceInput): ContentSourceResult {
  const inner = checkCloneSource(input);
  return inner.ok ? inner : { ok: false, error: wrapHandleError(input.ref, inner.error) };
}

function checkCloneSource(input: CloneSourceInput): ContentSourceResult {
  const { claim, storageClass, ref, sourceClaim: source, sourceVolume: pv } = input;
  // Upstream gives the same answer for every way the source volume can be unusable.
  const notBoundOrInvalid = { ok: false, error: "claim in dataSource not bound or invalid" } as const;
  if (!source) {
    return {
      ok: false,
      error: `error getting PVC ${ref.name} (namespace ${goQuote(claim.metadata.namespace ?? "")}) from api server: persistentvolumeclaims ${goQuote(ref.name)} not found`,
    };
  }
  if (source.status?.phase !== "Bound") {
    // Upstream prints the whole Go status struct here; the phase is the part that matters.
    return {
      ok: false,
      error: `the PVC DataSource ${ref.name} must have a status of Bound.  Got {${source.status?.phase ?? ""}}`,
    };
  }
  if (source.metadata.deletionTimestamp) {
    return { ok: false, error: `the PVC DataSource ${ref.name} is currently being deleted` };
  }
  // Upstream requires both to name a class (not the same one): the driver check below is what binds them.
  if (source.spec.storageClassName === undefined || source.spec.storageClassName === null) {
    return { ok: false, error: `the source PVC (${source.metadata.name}) storageclass cannot be empty` };
  }
  if (claim.spec.storageClassName === undefined || claim.spec.storageClassName === null) {
    return { ok: false, error: `the requested PVC (${claim.metadata.name}) storageclass cannot be empty` };
  }
  const sizes = bytesOf(
    claim.spec.resources?.requests?.storage ?? "0",
    source.spec.resources?.requests?.storage ?? "0",
  );
  if (!sizes.ok) return sizes;
  const [requestedBytes, sourceBytes] = sizes.value;
  if (requestedBytes < sourceBytes) {
    return {
      ok: false,
      error: `error, new PVC request must be greater than or equal in size to the specified PVC data source, requested ${requestedBytes} but source is ${sourceBytes}`,
    };
  }
  if (!source.spec.volumeName)
    return { ok: false, error: `volume name is empty in source PVC ${source.metadata.name}` };

  if (!pv || pv.metadata.name !== source.spec.volumeName) return notBoundOrInvalid;
  if (!pv.spec.csi) return notBoundOrInvalid;
  if (pv.spec.csi.driver !== storageClass.provisioner) return notBoundOrInvalid;
  const claimRef = pv.spec.claimRef;
  if (!claimRef) return notBoundOrInvalid;
  if (
    claimRef.uid !== source.metadata.uid ||
    claimRef.namespace !== source.metadata.namespace ||
    claimRef.name !== source.metadata.name
  ) {
    return notBoundOrInvalid;
  }
  if (pv.status?.phase !== "Bound") return notBoundOrInvalid;

  const wantBlock = claim.spec.volumeMode === "Block";
  const sourceMode = pv.spec.volumeMode;
  if (!wantBlock && sourceMode && sourceMode !== "Filesystem") {
    return {
      ok: false,
      error:
        "the source PVC and destination PVCs must have the same volume mode for cloning.  Source is Block, but new PVC requested Filesystem",
    };
  }
  if (wantBlock && sourceMode !== "Block") {
    return {
      ok: false,
      error:
        "the source PVC and destination PVCs must have the same volume mode for cloning.  Source is Filesystem, but new PVC requested Block",
    };
  }

  return { ok: true, value: { volume: { volumeId: pv.spec.csi.volumeHandle } } };
}

function wrapHandleError(ref: DataSourceRef, error: string): string {
  return `error getting handle for DataSource Type ${ref.kind} by Name ${ref.name}: ${error}`;
}

type Sizes = { ok: true; value: [bigint, bigint] } | { ok: false; error: string };

/** Both quantities as bytes, rounded up like Quantity.Value(). */
function bytesOf(a: string, b: string): Sizes {
  try {
    return { ok: true, value: [parseQuantityBytes(a), parseQuantityBytes(b)] };
  } catch (err) {
    return { ok: false, error: err instanceof Error ? err.message : String(err) };
  }
}

/** strconv.ParseBool: exactly these spellings. */
function goParseBool(s: string): boolean | undefined {
  if (["1", "t", "T", "TRUE", "true", "True"].includes(s)) return true;
  if (["0", "f", "F", "FALSE", "false", "False"].includes(s)) return false;
  return undefined;
}
