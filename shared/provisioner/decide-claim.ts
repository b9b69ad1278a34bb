// What the provisioner does about one claim, decided from the claim, its
// class and the PV named after it. The leak-proof protocol in five moves:
// add the intent finalizer, provision (CreateVolume then create the PV),
// release the finalizer once a PV records the volume, clean up an intent
// whose claim went away, or leave the claim alone.

import { claimClass } from "../kube/claim-class.ts";
import type { PersistentVolume, PersistentVolumeClaim, StorageClass } from "../kube/types.ts";
import {
  annBetaStorageProvisioner,
  annSelectedNode,
  annStorageProvisioner,
  provisioningFinalizer,
} from "../kube/well-known.ts";
import { annProvisioningRetryAfter, message } from "./constants.ts";

export type ClaimDecision =
  /** Nothing to do for this provisioner. */
  | { action: "ignore"; reason: string }
  /** Record the intent on the claim (our finalizer) before any CreateVolume. */
  | { action: "add-intent" }
  /** CreateVolume, then create the PV that records it. */
  | { action: "provision" }
  /** A PV records the volume and the claim is settled: drop our finalizer (saying `warning`, if any, on the claim). */
  | { action: "release-intent"; reason: string; warning?: string }
  /** The claim no longer needs the volume it may have: make sure none is left behind, then drop the finalizer. */
  | { action: "cleanup"; reason: string }
  /** The last failure asked for a pause; try again after `until`. */
  | { action: "backoff"; until: string }
  /** Provisioning cannot start; say so on the claim and retry later. */
  | { action: "fail"; message: string };

export interface ClaimContext {
  driverName: string;
  /** The claim's StorageClass, undefined when it does not exist. */
  storageClass: StorageClass | undefined;
  /** The PV named after the claim (volumeNameForClaim), undefined when absent. */
  existingVolume: PersistentVolume | undefined;
  now: Date;
}

export function hasProvisioningIntent(claim: PersistentVolumeClaim): boolean {
  return (claim.metadata.finalizers ?? []).includes(provisioningFinalizer);
}

/** The claim was handed to this driver (GA annotation, else the beta one), as the binder hands it over. */
export function isClaimForDriver(claim: PersistentVolumeClaim, driverName: string): boolean {
  const a = claim.metadata.annotations ?? {};
  return (a[annStorageProvisioner] ?? a[annBetaStorageProvisioner]) === driverName;
}

/** Why this claim should not be provisioned now, or undefined when it should. */
export function whyNotProvision(claim: PersistentVolumeClaim, ctx: ClaimContext): string | undefined {
  if (claim.metadata.deletionTimestamp) return "claim is being deleted";
  if (claim.spec.volumeName) return `claim is bound (or pre-bound) to volume ${claim.spec.volumeName}`;
  if (!isClaimForDriver(claim, ctx.driverName)) return `claim is not handed to ${ctx.driverName}`;
  const cls = ctx.storageClass;
  if (cls && cls.provisioner !== ctx.driverName)
    return `class ${cls.metadata.name} is provisioned by ${cls.provisioner}`;
  if (cls?.volumeBindingMode === "WaitForFirstConsumer" && !claim.metadata.annotations?.[annSelectedNode]) {
    return "waiting for the scheduler to select a node (WaitForFirstConsumer)";
  }
  return undefined;
}

/**
 * Whether decideClaim answers "ignore" for this claim whatever its class and
 * its PV are: it carries no intent of ours (so nothing can have been left
 * behind) and is bound, being deleted, or not handed to this driver. Being
 * independent of every other object, it can be asked of an event's own copy
 * of the claim, to acknowledge the event without reading anything; a claim
 * that changes afterwards comes back with an event of its own.
 */
export function claimNeedsNothing(claim: PersistentVolumeClaim, driverName: string): boolean {
  if (hasProvisioningIntent(claim)) return false;
  return Boolean(
    claim.metadata.deletionTimestamp || claim.spec.volumeName || !isClaimForDriver(claim, driverName),
  );
}

export function decideClaim(claim: PersistentVolumeClaim, ctx: ClaimContext): ClaimDecision {
  const intent = hasProvisioningIntent(claim);
  const pv = ctx.existingVolume;
  const pvRecordsClaim = pv?.spec.claimRef?.uid === claim.metadata.uid && claim.metadata.uid !== undefined;

  if (pv && !pvRecordsClaim) {
    // Observed: the volume name is taken by another claim's PV (truncated uids, or a hand-made PV).
    // CreateVolume by that name would return *that* claim's volume: never provision or clean up with it.
    // Whatever the driver holds under the name is recorded by that PV, so no volume of ours can leak.
    const taken = `volume name ${pv.metadata.name} is taken by a PersistentVolume of another claim`;
    if (intent) return { action: "release-intent", reason: taken, warning: taken };
    return whyNotProvision(claim, ctx)
      ? { action: "ignore", reason: taken }
      : { action: "fail", message: taken };
  }
  if (pvRecordsClaim) {
    // Observed: a PV records the volume. The binder drops our finalizer when it binds; we drop it
    // when the claim is settled without that (bound by another binder, or deleted).
    if (!intent) return { action: "ignore", reason: `volume ${pv!.metadata.name} is provisioned` };
    if (claim.metadata.deletionTimestamp || claim.spec.volumeName) {
      return { action: "release-intent", reason: `volume ${pv!.metadata.name} records the volume` };
    }
    return { action: "ignore", reason: `volume ${pv!.metadata.name} is provisioned; waiting for the binder` };
  }

  const why = whyNotProvision(claim, ctx);
  if (why) {
    // Observed: provisioning is not (or no longer) wanted. An intent left from an
    // earlier attempt may stand for a volume the driver created: clean it up.
    return intent ? { action: "cleanup", reason: why } : { action: "ignore", reason: why };
  }
  if (!ctx.storageClass) return { action: "fail", message: message.classNotFound(claimClass(claim)) };
  if (claim.spec.selector) return { action: "fail", message: message.selectorNotSupported };
  const retryAfter = claim.metadata.annotations?.[annProvisioningRetryAfter];
  if (retryAfter && Date.parse(retryAfter) > ctx.now.getTime())
    return { action: "backoff", until: retryAfter };
  return intent ? { action: "provision" } : { action: "add-intent" };
}

/** Upstream's per-claim backoff: 1 s doubling to 5 min, retried forever. */
export function nextRetryDelaySeconds(
  failures: number,
  options: { startSeconds?: number; maxSeconds?: number } = {},
): number {
  const start = options.startSeconds ?? 1;
  const max = options.maxSeconds ?? 300;
  return Math.min(max, start * 2 ** Math.max(0, failures - 1));
}
