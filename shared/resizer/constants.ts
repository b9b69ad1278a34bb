// Names, reasons and texts of the CSI external-resizer (v2.2.1, pkg/util and
// pkg/controller, pkg/modifycontroller), spelled as upstream spells them, plus
// the annotations of our own that keep its per-claim retry backoff across
// processes (upstream keeps it in a work queue that dies with the process).

import { grpcCodeName } from "../csi/grpc-codes.ts";

/** Event source component: "external-resizer <driver>". */
export function eventComponent(driverName: string): string {
  return `external-resizer ${driverName}`;
}

export const reason = {
  resizing: "Resizing",
  resizeFailed: "VolumeResizeFailed",
  resizeSuccess: "VolumeResizeSuccessful",
  fileSystemResizeRequired: "FileSystemResizeRequired",
  modify: "VolumeModify",
  modifyFailed: "VolumeModifyFailed",
  modifySuccess: "VolumeModifySuccessful",
  modifyCanceled: "VolumeModifyCanceled",
} as const;

/** Claim condition types (core/v1). */
export const condition = {
  resizing: "Resizing",
  fileSystemResizePending: "FileSystemResizePending",
  controllerResizeError: "ControllerResizeError",
  nodeResizeError: "NodeResizeError",
  modifyingVolume: "ModifyingVolume",
  modifyVolumeError: "ModifyVolumeError",
} as const;

/** The conditions an expansion owns: a merge that drops "old" ones drops only these. */
export const resizeConditions: ReadonlySet<string> = new Set([
  condition.resizing,
  condition.fileSystemResizePending,
  condition.controllerResizeError,
  condition.nodeResizeError,
]);

export const fileSystemResizePendingMessage =
  "Waiting for user to (re-)start a pod to finish file system resize of volume on node.";

/**
 * Per claim and per operation: consecutive failures, the earliest next try,
 * and the target that failed (a new target is tried at once, as upstream's
 * queue does on a spec change). `expand-in-use` is upstream's in-memory
 * "FailedPrecondition seen" mark of an offline-only driver.
 */
export const annExpandFailures = "resizer.kube-storage-functions.io/expand-failures";
export const annExpandRetryAfter = "resizer.kube-storage-functions.io/expand-retry-after";
export const annExpandTarget = "resizer.kube-storage-functions.io/expand-target";
export const annExpandInUse = "resizer.kube-storage-functions.io/expand-in-use";
export const annModifyFailures = "resizer.kube-storage-functions.io/modify-failures";
export const annModifyRetryAfter = "resizer.kube-storage-functions.io/modify-retry-after";
export const annModifyTarget = "resizer.kube-storage-functions.io/modify-target";

/** --timeout default of the external-resizer. */
export const defaultTimeoutSeconds = 10;

/** Mutable-parameter keys added with --extra-modify-metadata. */
export const extraModifyMetadataKeys = {
  pvcName: "csi.storage.k8s.io/pvc/name",
  pvcNamespace: "csi.storage.k8s.io/pvc/namespace",
  pvName: "csi.storage.k8s.io/pv/name",
} as const;

export const code = {
  canceled: 1,
  invalidArgument: 3,
  deadlineExceeded: 4,
  notFound: 5,
  resourceExhausted: 8,
  failedPrecondition: 9,
  aborted: 10,
  outOfRange: 11,
  unavailable: 14,
} as const;

/** Go's name of a gRPC code ("Unknown" for anything else). */
export const codeName = (n: number): string => grpcCodeName(n);
