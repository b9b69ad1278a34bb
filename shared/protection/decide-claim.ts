// pvc-protection for one claim: objects in, the one step out. A claim being
// deleted loses kubernetes.io/pvc-protection only once no pod can still use
// it, judged first on pods already at hand (an event's pod, a cached list) and
// then, when those show no user, on a live list of the claim's namespace read
// after the claim: pods at hand alone never free a claim, as they may be
// behind.
import type { PersistentVolumeClaim, Pod } from "../kube/types.ts";
import { pvcProtectionFinalizer } from "../kube/well-known.ts";
import { isDeletionCandidate, needToAddFinalizer, withFinalizer, withoutFinalizer } from "./finalizers.ts";
import { podUsesClaim } from "./pod-usage.ts";

export interface ClaimInput {
  claim: PersistentVolumeClaim;
  /** Pods known without asking the API; only ever a reason to keep the finalizer. */
  cachedPods?: readonly Pod[];
  /** Every pod of the claim's namespace, listed after the claim was read; undefined: not listed yet. */
  livePods?: readonly Pod[];
}

export type ClaimStep =
  | { op: "add-finalizer"; claim: PersistentVolumeClaim }
  | { op: "remove-finalizer"; claim: PersistentVolumeClaim }
  /** Only a live list of the namespace's pods can tell; decide again with livePods. */
  | { op: "list-pods"; namespace: string }
  | { op: "keep"; reason: string }
  | { op: "none"; reason: string };

function user(pods: readonly Pod[] | undefined, claim: PersistentVolumeClaim): Pod | undefined {
  return pods?.find((pod) => podUsesClaim(pod, claim));
}

export function decideClaim(input: ClaimInput): ClaimStep {
  const { claim } = input;
  if (isDeletionCandidate(claim, pvcProtectionFinalizer)) {
    const pod = user(input.cachedPods, claim) ?? user(input.livePods, claim);
    if (pod) return { op: "keep", reason: `used by pod ${pod.metadata.namespace}/${pod.metadata.name}` };
    if (input.livePods === undefined) return { op: "list-pods", namespace: claim.metadata.namespace ?? "" };
    return { op: "remove-finalizer", claim: withoutFinalizer(claim, pvcProtectionFinalizer) };
  }
  if (needToAddFinalizer(claim, pvcProtectionFinalizer))
    return { op: "add-finalizer", claim: withFinalizer(claim, pvcProtectionFinalizer) };
  return {
    op: "none",
    reason: claim.metadata.deletionTimestamp ? "being deleted, not held by pvc-protection" : "protected",
  };
}

/** What a claim event's own copy shows is enough to do nothing: upstream's informer handler filter. */
export function claimNeedsNoSync(claim: PersistentVolumeClaim): boolean {
  return (
    !isDeletionCandidate(claim, pvcProtectionFinalizer) && !needToAddFinalizer(claim, pvcProtectionFinalizer)
  );
}
