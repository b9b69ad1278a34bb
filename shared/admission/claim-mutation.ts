// What a new PersistentVolumeClaim gets at creation (PVC CREATE, main
// resource only), decided from the claim and the cluster's StorageClasses:
//
// - DefaultStorageClass: no class asked for (no spec.storageClassName, no
//   beta annotation) -> the default class (newest wins, then name).
// - StorageObjectInUseProtection: kubernetes.io/pvc-protection.
// - The binder's hand-over, done at once: when the class exists, binds
//   Immediate and names an external provisioner, and the claim is not
//   pre-bound, both storage-provisioner annotations = that provisioner. The
//   binder would write them on its first sync; here they cost no write.
// - Our provisioner's intent (see shared/provisioner/decide-claim.ts): when
//   that provisioner is one of ours, its "a volume may exist" finalizer too,
//   which the provisioner would otherwise add in a write of its own before
//   CreateVolume.
//
// Idempotent, so kube-apiserver may reinvoke the hook (reinvocationPolicy
// IfNeeded): a second pass changes nothing.

import { claimClass, claimHasClass, defaultStorageClass } from "../kube/claim-class.ts";
import type { PersistentVolumeClaim, StorageClass } from "../kube/types.ts";
import {
  annBetaStorageProvisioner,
  annStorageProvisioner,
  provisioningFinalizer,
  pvcProtectionFinalizer,
} from "../kube/well-known.ts";
import { waitForFirstConsumer } from "./constants.ts";

export interface ClaimMutationInput {
  claim: PersistentVolumeClaim;
  /** Every StorageClass; undefined when they could not be looked up (then nothing class-dependent happens). */
  classes: readonly StorageClass[] | undefined;
  /** Provisioner names served by our provisioner function (PROVISIONER_DRIVERS). */
  ourProvisioners: ReadonlySet<string>;
}

export interface ClaimMutation {
  /** A changed copy; the input claim is left untouched. */
  claim: PersistentVolumeClaim;
  /** What was done, in words, for logs and tests. */
  applied: string[];
}

/** Whether the decision depends on StorageClasses at all: not for a claim that asked for no class (""). */
export function claimMutationNeedsClasses(claim: PersistentVolumeClaim): boolean {
  return !claimHasClass(claim) || claimClass(claim) !== "";
}

function addFinalizer(claim: PersistentVolumeClaim, finalizer: string): boolean {
  const finalizers = claim.metadata.finalizers ?? [];
  if (finalizers.includes(finalizer)) return false;
  claim.metadata.finalizers = [...finalizers, finalizer];
  return true;
}

/** The provisioner the binder would hand this claim to, or undefined when it would not. */
function provisionerFor(claim: PersistentVolumeClaim, cls: StorageClass | undefined): string | undefined {
  if (cls === undefined) return undefined;
  if (cls.volumeBindingMode === waitForFirstConsumer) return undefined; // the scheduler picks a node first
  if (claim.spec.volumeName) return undefined; // pre-bound: the binder binds, nobody provisions
  const provisioner = cls.provisioner;
  // kubernetes.io/ names are in-tree plugins (e.g. no-provisioner); the binder never hands those over.
  if (typeof provisioner !== "string" || provisioner === "" || provisioner.startsWith("kubernetes.io/"))
    return undefined;
  return provisioner;
}

export function mutateClaimOnCreate(input: ClaimMutationInput): ClaimMutation {
  // Only metadata and spec are changed, each by replacing a member: copies of
  // those two levels leave the input untouched, share the rest, and let the
  // patch diff skip every subtree the two still share.
  const claim: PersistentVolumeClaim = {
    ...input.claim,
    metadata: { ...input.claim.metadata },
    spec: { ...input.claim.spec },
  };
  const applied: string[] = [];

  if (addFinalizer(claim, pvcProtectionFinalizer)) applied.push(`finalizer ${pvcProtectionFinalizer}`);

  const classes = input.classes;
  if (classes === undefined) return { claim, applied };

  if (!claimHasClass(claim)) {
    const def = defaultStorageClass(classes);
    if (def !== undefined) {
      claim.spec.storageClassName = def.metadata.name;
      applied.push(`default StorageClass ${def.metadata.name}`);
    }
  }

  const className = claimClass(claim);
  if (className === "") return { claim, applied };
  const provisioner = provisionerFor(
    claim,
    classes.find((c) => c.metadata.name === className),
  );
  if (provisioner === undefined) return { claim, applied };

  // Never overwrite a value already there: whoever set it owns it.
  const annotations = { ...claim.metadata.annotations };
  let annotated = false;
  for (const key of [annStorageProvisioner, annBetaStorageProvisioner]) {
    if (annotations[key] === undefined) {
      annotations[key] = provisioner;
      annotated = true;
    }
  }
  if (annotated) {
    claim.metadata.annotations = annotations;
    applied.push(`storage-provisioner ${provisioner}`);
  }
  const handedTo = annotations[annStorageProvisioner] ?? annotations[annBetaStorageProvisioner];
  if (handedTo === provisioner && input.ourProvisioners.has(provisioner)) {
    if (addFinalizer(claim, provisioningFinalizer)) applied.push(`finalizer ${provisioningFinalizer}`);
  }
  return { claim, applied };
}
