// A claim event that needs no reads: the claim is bound, and the event's own
// copy of it, judged against the binder's watched copy of its volume, needs
// nothing written. Most events of a bound claim are the echoes of the
// binder's and provisioner's own writes; without this check each cost a GET
// of the claim and one of its volume.
//
// Why a decision on copies is safe here: the verdict is only "nothing to do",
// never a write, and only when the volume copy reflects every change up to
// the claim copy's revision (etcd revisions are global), or when both copies
// agree the two are bound to each other (the volume Bound, its claimRef
// naming this very claim by UID), as upstream's informers are trusted. A
// volume change the copy has not seen yet arrives as an event of its own (a
// deletion follows up on its claim), and the periodic resync reads
// everything again. Anything else (no copy, a copy behind that disagrees, an
// odd shape, a plan with any step) goes down the usual path of fresh reads.

import { claimFromEvent } from "../../kube/event-copies.ts";
import { annBindCompleted } from "../../kube/well-known.ts";
import { syncClaim } from "../sync-claim.ts";
import { hasAnnotation } from "../volume-helpers.ts";
import type { VolumeCache } from "./load-views.ts";

/** `key`: the claim the event is about; a copy of any other object is not judged. */
export function boundClaimNeedsNothing(
  key: { namespace: string; name: string },
  eventObject: Record<string, unknown> | undefined,
  cache: VolumeCache | undefined,
  now: string,
): boolean {
  if (!cache?.synced) return false;
  const claim = claimFromEvent(eventObject);
  // Observed: no usable copy of this claim, or a claim that is not (yet) bound: the usual path.
  if (!claim || claim.metadata.name !== key.name || (claim.metadata.namespace ?? "") !== key.namespace)
    return false;
  if (!claim.spec.volumeName || !hasAnnotation(claim, annBindCompleted)) return false;
  const volume = cache.store.get("", claim.spec.volumeName);
  // Observed: the copy has no such volume; whether it is gone is for fresh reads to say.
  if (!volume) return false;
  const mutual =
    volume.status?.phase === "Bound" &&
    volume.spec.claimRef?.uid === claim.metadata.uid &&
    claim.metadata.uid !== undefined;
  if (!mutual && !cache.store.covers(claim.metadata.resourceVersion)) return false;
  try {
    const plan = syncClaim(claim, { volumes: [volume], classes: [], pods: [], now });
    return plan.steps.length === 0 && plan.followUps.length === 0 && plan.error === undefined;
  } catch {
    return false;
  }
}
