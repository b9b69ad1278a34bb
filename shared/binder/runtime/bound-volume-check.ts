// A volume event that needs no reads: the event's copy of a bound volume,
// judged with the watched copy of its claim, needs nothing written. Most
// events of a bound volume are echoes of the binder's and provisioner's own
// writes; without this check each cost a GET of the volume and one of its
// claim. As bound-claim-check.ts: the verdict is only "nothing to do", and
// only when the claim copy has reached the volume copy's revision and holds
// that very claim (same UID); anything else reads fresh.
import { volumeFromEvent } from "../../kube/event-copies.ts";
import { syncVolume } from "../sync-volume.ts";
import { type ClaimCache, refClaimFromCopy } from "./watched-reads.ts";

export function boundVolumeNeedsNothing(
  name: string,
  eventObject: Record<string, unknown> | undefined,
  claims: ClaimCache | undefined,
  now: string,
): boolean {
  if (!claims?.synced) return false;
  const volume = volumeFromEvent(eventObject);
  if (!volume || volume.metadata.name !== name || volume.status?.phase !== "Bound") return false;
  if (!claims.store.covers(volume.metadata.resourceVersion)) return false;
  const claim = refClaimFromCopy(claims, volume.spec.claimRef);
  if (!claim) return false;
  try {
    const plan = syncVolume(volume, { claim, pods: [], now });
    return plan.steps.length === 0 && plan.followUps.length === 0 && plan.error === undefined;
  } catch {
    return false;
  }
}
