// What one round of a claim sync decides on, and the small pieces every
// claim round shares: the PV that records a created volume, how its create
// ended, the Warning, and letting go of the intent. Pure.
import type { VolumeCapability } from "../csi/types.ts";
import type { RetryInterval } from "../kube/retry-interval.ts";
import type { PersistentVolume, PersistentVolumeClaim, StorageClass } from "../kube/types.ts";
import { provisioningFinalizer } from "../kube/well-known.ts";
import { type BuildVolumeResult, buildPersistentVolume } from "./build-persistent-volume.ts";
import { reason } from "./constants.ts";
import type { RequestOutcome } from "./create-volume-request.ts";
import { sourceOf } from "./data-source-ref.ts";
import {
  backoffAnnotations,
  type EventStep,
  type Progress,
  type ProvisionerStep,
  withoutAnnotations,
  withoutFinalizer,
} from "./steps.ts";
import type { VolumeNameResult } from "./volume-name.ts";

export interface ClaimState {
  claim: PersistentVolumeClaim;
  pvName: VolumeNameResult;
  storageClass: StorageClass | undefined;
  /** The PV named after the claim, as the first round read it. */
  existingVolume: PersistentVolume | undefined;
  now: Date;
  driverName: string;
  /** The provisioner identity a PV records. */
  identity: string;
  /** The backoff after a final failure; upstream's 1 s to 5 min when absent. */
  retryInterval?: RetryInterval;
  /** --controller-publish-readonly. */
  controllerPublishReadOnly?: boolean;
  progress: Progress;
  /** performance.now() when this sync started provisioning (for the duration metric). */
  startedAt?: number;
  /** The CreateVolume request, loaded once a round needs it. */
  request?: RequestOutcome;
  /** After a PV save failed: the claim read again (undefined: gone), or the error reading it. */
  /** Read again after a failed PV save: the claim, and the PV of that name (another sync may have saved it). */
  current?:
    | { claim: PersistentVolumeClaim | undefined; volume?: PersistentVolume | undefined }
    | { error: unknown };
  /** The claims of the namespace, listed for a round that would release the claim's data source. */
  sourceClaims?: readonly PersistentVolumeClaim[];
}

export function claimWarning(claim: PersistentVolumeClaim, text: string): EventStep {
  return { op: "event", object: claim, type: "Warning", reason: reason.provisioningFailed, message: text };
}

/** A clone's or restore's source is let go (kept by planClaimRound while another claim provisions from it). */
export function releaseSourceSteps(claim: PersistentVolumeClaim): ProvisionerStep[] {
  const source = sourceOf(claim);
  return source ? [{ op: "release-source", source }] : [];
}

/** The claim's intent and backoff dropped: nothing of it is left to clean up. */
export function releaseSteps(claim: PersistentVolumeClaim): ProvisionerStep[] {
  const released = withoutAnnotations(withoutFinalizer(claim, provisioningFinalizer), backoffAnnotations);
  return [...releaseSourceSteps(claim), { op: "write-claim", claim: released }];
}

/** The PV that records the created volume (refused when the volume is too small); undefined before CreateVolume answered. */
export function recordingVolume(
  s: ClaimState,
  storageClass: StorageClass,
  pvName: string,
): BuildVolumeResult | undefined {
  if (s.request?.kind !== "ready" || !s.progress.created) return undefined;
  return buildPersistentVolume({
    claim: s.claim,
    storageClass,
    pvName,
    driverName: s.driverName,
    identity: s.identity,
    fsType: s.request.plan.classParameters.fsType,
    volume: s.progress.created,
    secretRefs: s.request.plan.secretRefs,
    volumeAttributesClassName: s.request.volumeAttributesClassName,
    readOnly: s.controllerPublishReadOnly === true && onlyReadOnlyMany(s.request.request.volumeCapabilities),
  });
}

/** Upstream's rule for --controller-publish-readonly: the request asked for exactly one capability, MULTI_NODE_READER_ONLY. */
function onlyReadOnlyMany(capabilities: readonly VolumeCapability[]): boolean {
  return capabilities.length === 1 && capabilities[0]?.accessMode?.mode === "MULTI_NODE_READER_ONLY";
}

/** How the PV create ended: AlreadyExists counts as saved when that PV records this claim (a retry, another instance). */
export function saveOutcome(s: ClaimState, pvName: string): "saved" | { failed: unknown } | undefined {
  const p = s.progress;
  if (p.saved) return "saved";
  if (p.found) {
    if (p.found.spec.claimRef?.uid === s.claim.metadata.uid) return "saved";
    return { failed: new Error(`PersistentVolume ${pvName} exists and belongs to another claim`) };
  }
  return p.saveFailed !== undefined ? { failed: p.saveFailed } : undefined;
}
