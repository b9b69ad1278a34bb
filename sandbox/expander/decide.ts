// kube-controller-manager's volume expand controller, the part a cluster of
// CSI volumes sees (pure: claims, PVs and what was last seen in, claims to
// tell out). Upstream queues a claim when it is added Bound, or when its
// storage request or status capacity grew; a queued claim whose request
// exceeds its capacity, bound both ways to a CSI PV, gets a Normal
// ExternalExpanding Event, as no volume plugin of its own expands CSI
// volumes. The resize itself is the resizer's (the csi-resizer sidecar).
import { compareQuantities, isValidQuantity } from "../../shared/kube/quantity.ts";
import type { PersistentVolume, PersistentVolumeClaim } from "../../shared/kube/types.ts";

export const externalExpandingReason = "ExternalExpanding";
export const externalExpandingMessage = "waiting for an external controller to expand this PVC";

/** What the controller remembers of a claim between passes (upstream: the informer's old object). */
export interface SeenClaim {
  uid: string;
  request: string;
  capacity: string;
}

function storage(v: string | undefined): string {
  return v !== undefined && isValidQuantity(v) ? v : "0";
}

function seenOf(claim: PersistentVolumeClaim): SeenClaim {
  return {
    uid: claim.metadata.uid ?? "",
    request: storage(claim.spec.resources?.requests?.storage),
    capacity: storage(claim.status?.capacity?.storage),
  };
}

/**
 * The claims to tell, in list order. `seen` is the caller's memory, keyed
 * namespace/name; this updates it (claims gone are forgotten).
 */
export function claimsWaitingForExternalExpansion(
  claims: readonly PersistentVolumeClaim[],
  volumes: readonly PersistentVolume[],
  seen: Map<string, SeenClaim>,
): PersistentVolumeClaim[] {
  const byName = new Map(volumes.map((v) => [v.metadata.name, v]));
  const present = new Set<string>();
  const out: PersistentVolumeClaim[] = [];
  for (const claim of claims) {
    const key = `${claim.metadata.namespace ?? ""}/${claim.metadata.name}`;
    present.add(key);
    const now = seenOf(claim);
    const before = seen.get(key);
    seen.set(key, now);
    const queued =
      before === undefined ||
      before.uid !== now.uid ||
      compareQuantities(now.request, before.request) > 0 ||
      compareQuantities(now.capacity, before.capacity) > 0;
    if (!queued || claim.status?.phase !== "Bound") continue;
    if (compareQuantities(now.request, now.capacity) <= 0) continue;
    const pv = byName.get(claim.spec.volumeName ?? "");
    const ref = pv?.spec.claimRef;
    if (!pv?.spec.csi || ref?.uid !== claim.metadata.uid || ref?.namespace !== claim.metadata.namespace)
      continue;
    out.push(claim);
  }
  for (const key of seen.keys()) if (!present.has(key)) seen.delete(key);
  return out;
}
