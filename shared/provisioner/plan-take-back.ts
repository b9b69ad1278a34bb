// A created volume whose PV could not be saved: kept when a PV of that name
// records it (another sync saved it), or for the next sync while its claim
// still holds the intent, else taken back at once. Pure.
import type { ClaimState } from "./claim-state.ts";
import { hasProvisioningIntent } from "./decide-claim.ts";
import type { Needs, ProvisionerPlan, ProvisionerStep } from "./steps.ts";

/**
 * The PV could not be saved. While the claim still carries our intent, a
 * later sync records the volume (CreateVolume answers with the same one) or
 * cleans it up. Otherwise (claim gone, recreated, or its intent released by
 * another instance's cleanup while this CreateVolume was still queued at the
 * driver) nothing would ever name the volume again, so it is deleted now.
 */
export function takeBackRound(
  s: ClaimState,
  saveError: unknown,
  claimKey: string,
  secrets: Record<string, string> | undefined,
): ProvisionerPlan | Needs {
  const volumeId = s.progress.created?.volumeId ?? "";
  const fail: ProvisionerStep = { op: "throw", error: saveError };
  if (!s.current) return { needs: "current-claim" };
  if ("error" in s.current) {
    return {
      steps: [
        {
          op: "retry-later",
          message: takeBackFailure(volumeId, claimKey, s.current.error),
          cause: saveError,
        },
      ],
      outcome: "PV not saved",
    };
  }
  // A PV of that name records this very volume: another sync saved it, whatever this save answered
  // (the claim may already be bound to it, or its intent released because the PV records it).
  const recorded = s.current.volume;
  if (recorded?.spec.csi?.volumeHandle === volumeId && volumeId !== "")
    return { steps: [], outcome: `PV ${recorded.metadata.name} records the volume: saved by another sync` };
  const current = s.current.claim;
  const holds =
    current !== undefined && current.metadata.uid === s.claim.metadata.uid && hasProvisioningIntent(current);
  if (holds) return { steps: [fail], outcome: "PV not saved" };
  // Another sync saved the PV and the claim is bound to it (that is why the intent is gone): the
  // volume is in use, whatever this sync's save answered.
  const boundToIt =
    current !== undefined &&
    current.metadata.uid === s.claim.metadata.uid &&
    s.pvName.ok &&
    current.spec.volumeName === s.pvName.value;
  if (boundToIt) return { steps: [], outcome: `PV ${current.spec.volumeName} saved by another sync` };
  return {
    steps: [{ op: "take-back-volume", volumeId, secrets, claimKey, cause: saveError }, fail],
    outcome: "PV not saved; volume taken back",
  };
}

export function takeBackFailure(volumeId: string, claimKey: string, err: unknown): string {
  return `volume ${volumeId} was created for claim ${claimKey}, which no longer holds it, and neither recording nor deleting it worked: ${err instanceof Error ? err.message : String(err)}`;
}
