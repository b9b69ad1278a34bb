// provisionClaim: hand a claim with a class to that class's provisioner. The
// controller has no in-tree plugins, so every provisioner outside
// kubernetes.io/ is external: annotate the claim and say so with an Event.

import { claimClass } from "../kube/claim-class.ts";
import { progressEventsDue } from "../kube/progress-events.ts";
import type { PersistentVolumeClaim, StorageClass } from "../kube/types.ts";
import { annBetaStorageProvisioner, annStorageProvisioner } from "../kube/well-known.ts";
import { message, reason } from "./constants.ts";
import type { Planner } from "./plan.ts";
import { isDelayBindingProvisioning } from "./volume-helpers.ts";

/**
 * Whether a claim that matches no volume is handed to a provisioner that can
 * act on it now: its class exists, names an external provisioner, and binds
 * at once or has the scheduler's node. For such a claim a search that misses
 * a volume only means a new volume instead of an existing one, as with
 * upstream's informer; any other claim would wait for the next resync.
 */
export function provisionsWhenNoMatch(
  claim: PersistentVolumeClaim,
  classes: readonly StorageClass[],
): boolean {
  const name = claimClass(claim);
  const cls = name ? classes.find((c) => c.metadata.name === name) : undefined;
  if (!cls || cls.provisioner.startsWith("kubernetes.io/")) return false;
  return cls.volumeBindingMode !== "WaitForFirstConsumer" || isDelayBindingProvisioning(claim);
}

export function provisionClaim(
  p: Planner,
  claim: PersistentVolumeClaim,
  cls: StorageClass | undefined,
): void {
  if (!cls) {
    // Observed: the class does not exist; every later sync tries again.
    p.event(claim, "Warning", reason.provisioningFailed, message.classNotFound(claimClass(claim)));
    p.decided(`StorageClass ${claimClass(claim)} not found`);
    return;
  }
  const provisioner = cls.provisioner;
  if (provisioner.startsWith("kubernetes.io/")) {
    // Observed: an in-tree provisioner name (e.g. kubernetes.io/no-provisioner): there is no such plugin here.
    p.event(claim, "Warning", reason.provisioningFailed, message.noProvisionablePlugin(provisioner));
    p.decided(`no volume plugin for provisioner ${provisioner}`);
    return;
  }
  let annotated = claim;
  if (claim.metadata.annotations?.[annStorageProvisioner] !== provisioner) {
    annotated = {
      ...claim,
      metadata: {
        ...claim.metadata,
        annotations: {
          ...claim.metadata.annotations,
          [annBetaStorageProvisioner]: provisioner,
          [annStorageProvisioner]: provisioner,
        },
      },
    };
    p.write({ op: "update-claim", claim: annotated });
  }
  // Only a claim that has waited a while is told what it waits for (see shared/kube/progress-events.ts).
  if (progressEventsDue(claim.metadata.creationTimestamp, new Date(p.now))) {
    p.event(annotated, "Normal", reason.externalProvisioning, message.externalProvisioning(provisioner));
  }
  p.decided(`waiting for external provisioner ${provisioner}`);
}
