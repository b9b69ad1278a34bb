// Which Pending claims a volume that just became usable could bind, so the
// binder syncs them on the volume's event instead of leaving them to the next
// resync. Only a pre-filter: each claim's own sync still searches fresh state
// and picks the best volume, so a claim picked here that binds elsewhere (or
// not at all) costs one sync and nothing else.
import { claimClass, volumeClass } from "../kube/claim-class.ts";
import { claimSelectorMatches } from "../kube/label-selector.ts";
import { parseQuantityBytes } from "../kube/quantity.ts";
import type { PersistentVolume, PersistentVolumeClaim } from "../kube/types.ts";
import { annBindCompleted } from "../kube/well-known.ts";
import { claimPhase } from "./constants.ts";
import {
  claimKey,
  hasAnnotation,
  isVolumeBoundToClaim,
  requestedStorage,
  volumeHasAccessModes,
  volumeIsLargeEnough,
  volumeModeMismatch,
} from "./volume-helpers.ts";

/** Claims followed up per volume event: a bound on the syncs one event causes. */
export const maxWaitingClaims = 8;

/** What a volume event's copy says about where to look: undefined when no waiting claim can bind it. */
export type WaitingClaimsScope = { namespace?: string };

/**
 * Whether the volume (as its event carried it) could satisfy a waiting claim:
 * not being deleted, and unclaimed or pre-bound to a claim not bound yet (a
 * claimRef without uid). The binder's own write that turns such a volume
 * Available echoes back as an update: the event before it already looked, so
 * that echo does not look again.
 */
export function waitingClaimsScope(
  volume: PersistentVolume,
  action: "add" | "update",
): WaitingClaimsScope | undefined {
  if (volume.metadata.deletionTimestamp) return undefined;
  const ref = volume.spec?.claimRef;
  if (ref?.uid) return undefined;
  if (action === "update" && volume.status?.phase === "Available") return undefined;
  if (ref)
    return typeof ref.namespace === "string" && ref.namespace ? { namespace: ref.namespace } : undefined;
  return {};
}

/**
 * The Pending claims the volume could satisfy, smallest request first (ties by
 * namespace/name), at most `limit`: not being deleted, never bound
 * (no bind-completed annotation), and either naming this volume in
 * spec.volumeName, named by the volume's claimRef (pre-bound: the class is not
 * checked, as the search does not), or asking for no particular volume with
 * the volume's class (claimClass, so a claim with no class matches a volume
 * with none), size, access modes, volume mode and labels.
 */
export function waitingClaimsFor(
  volume: PersistentVolume,
  claims: readonly PersistentVolumeClaim[],
  limit = maxWaitingClaims,
): PersistentVolumeClaim[] {
  const picked: { claim: PersistentVolumeClaim; bytes: bigint }[] = [];
  for (const claim of claims) {
    if (!couldBind(volume, claim)) continue;
    picked.push({ claim, bytes: requestBytes(claim) });
  }
  picked.sort((a, b) =>
    a.bytes !== b.bytes
      ? a.bytes < b.bytes
        ? -1
        : 1
      : claimKey(a.claim) < claimKey(b.claim)
        ? -1
        : claimKey(a.claim) > claimKey(b.claim)
          ? 1
          : 0,
  );
  return picked.slice(0, Math.max(0, limit)).map((p) => p.claim);
}

function couldBind(volume: PersistentVolume, claim: PersistentVolumeClaim): boolean {
  if (claim.metadata.deletionTimestamp) return false;
  if (hasAnnotation(claim, annBindCompleted)) return false;
  const phase = claim.status?.phase;
  if (phase !== undefined && phase !== claimPhase.pending) return false;
  if (!volumeIsLargeEnough(volume, claim)) return false;
  if (volumeModeMismatch(claim, volume)) return false;
  if (!volumeHasAccessModes(volume, claim)) return false;
  const ref = volume.spec.claimRef;
  if (ref && !isVolumeBoundToClaim(volume, claim)) return false;
  const named = claim.spec.volumeName ?? "";
  if (named !== "") return named === volume.metadata.name;
  if (ref) return true;
  if (volumeClass(volume) !== claimClass(claim)) return false;
  // An invalid selector matches nothing here; the claim's own sync reports it.
  return claimSelectorMatches(claim.spec.selector ?? undefined, volume.metadata.labels);
}

function requestBytes(claim: PersistentVolumeClaim): bigint {
  try {
    return parseQuantityBytes(requestedStorage(claim));
  } catch {
    return 0n;
  }
}
