// findBestMatchForClaim: which existing PersistentVolume an unbound claim
// gets. Same order of checks and the same winner as upstream's index search,
// and the same per-volume verdicts feed "why is my PVC Pending?".

import { claimClass, volumeClass } from "../kube/claim-class.ts";
import { claimSelectorMatches, validateLabelSelector } from "../kube/label-selector.ts";
import type { PersistentVolume, PersistentVolumeClaim } from "../kube/types.ts";
import { volumePhase } from "./constants.ts";
import {
  accessModesKey,
  capacityBytes,
  isVolumeBoundToClaim,
  volumeAttributesClassMismatch,
  volumeAttributesClassOf,
  volumeIsLargeEnough,
  volumeModeMismatch,
} from "./volume-helpers.ts";

export type SkipReason =
  | "access-modes"
  | "bound-to-other-claim"
  | "too-small"
  | "volume-mode"
  | "volume-attributes-class"
  | "being-deleted"
  | "delayed-binding"
  | "phase"
  | "selector"
  | "class";

export type VolumeVerdict =
  | { kind: "pre-bound" }
  | { kind: "candidate" }
  | { kind: "skipped"; reason: SkipReason; detail: string };

export interface MatchResult {
  volume?: PersistentVolume;
  /** The claim's selector cannot be evaluated: upstream returns an error and retries. */
  error?: string;
}

/** Checks one volume against the claim, in upstream's order. Access modes are checked by the caller's grouping. */
export function judgeVolumeForClaim(
  volume: PersistentVolume,
  claim: PersistentVolumeClaim,
  delayBinding: boolean,
): VolumeVerdict {
  const ref = volume.spec.claimRef;
  if (ref && !isVolumeBoundToClaim(volume, claim)) {
    return {
      kind: "skipped",
      reason: "bound-to-other-claim",
      detail: `bound to claim ${ref.namespace}/${ref.name}`,
    };
  }
  if (!volumeIsLargeEnough(volume, claim)) {
    return {
      kind: "skipped",
      reason: "too-small",
      detail: `capacity ${volume.spec.capacity?.storage ?? "unset"} is less than the requested ${claim.spec.resources?.requests?.storage ?? "unset"}`,
    };
  }
  if (volumeModeMismatch(claim, volume)) {
    return {
      kind: "skipped",
      reason: "volume-mode",
      detail: `volumeMode ${volume.spec.volumeMode ?? "Filesystem"} does not match the claim's ${claim.spec.volumeMode ?? "Filesystem"}`,
    };
  }
  // Checked before the pre-bound shortcut, as upstream does: even a volume
  // pre-bound to the claim is passed over when the classes differ.
  if (volumeAttributesClassMismatch(claim, volume)) {
    return {
      kind: "skipped",
      reason: "volume-attributes-class",
      detail: `volumeAttributesClassName "${volumeAttributesClassOf(volume)}" does not match the claim's "${volumeAttributesClassOf(claim)}"`,
    };
  }
  if (volume.metadata.deletionTimestamp) {
    return { kind: "skipped", reason: "being-deleted", detail: "the volume is marked for deletion" };
  }
  // A volume pre-bound to this claim wins at once: phase, selector and class are not checked.
  if (isVolumeBoundToClaim(volume, claim)) return { kind: "pre-bound" };
  if (delayBinding) {
    return {
      kind: "skipped",
      reason: "delayed-binding",
      detail: "the class is WaitForFirstConsumer: the scheduler, not this controller, binds unbound volumes",
    };
  }
  if (volume.status?.phase !== volumePhase.available) {
    return {
      kind: "skipped",
      reason: "phase",
      detail: `phase is ${volume.status?.phase ?? "unset"}, not Available`,
    };
  }
  if (!claimSelectorMatches(claim.spec.selector ?? undefined, volume.metadata.labels)) {
    return { kind: "skipped", reason: "selector", detail: "labels do not match the claim's selector" };
  }
  if (volumeClass(volume) !== claimClass(claim)) {
    return {
      kind: "skipped",
      reason: "class",
      detail: `storageClassName "${volumeClass(volume)}" does not match the claim's "${claimClass(claim)}"`,
    };
  }
  return { kind: "candidate" };
}

/** Access-mode groups that can serve the claim, fewest modes first (ties by key, for determinism). */
export function matchingAccessModeGroups(
  volumes: readonly PersistentVolume[],
  claim: PersistentVolumeClaim,
): PersistentVolume[][] {
  const groups = new Map<string, PersistentVolume[]>();
  for (const v of volumes) {
    const key = accessModesKey(v.spec.accessModes);
    const group = groups.get(key);
    if (group) group.push(v);
    else groups.set(key, [v]);
  }
  const requested = claim.spec.accessModes ?? [];
  const keys = [...groups.keys()].filter((key) => {
    const offered = new Set(key.split(",").filter(Boolean));
    return requested.every((m) => offered.has(m));
  });
  keys.sort((a, b) => {
    const na = a ? a.split(",").length : 0;
    const nb = b ? b.split(",").length : 0;
    return na - nb || (a < b ? -1 : a > b ? 1 : 0);
  });
  return keys.map((k) => groups.get(k)!);
}

export function claimSelectorError(claim: PersistentVolumeClaim): string | undefined {
  const selector = claim.spec.selector;
  if (!selector) return undefined;
  const errors = validateLabelSelector(selector);
  return errors.length > 0
    ? `error creating internal label selector for claim: ${claim.metadata.namespace}/${claim.metadata.name}: ${errors.join("; ")}`
    : undefined;
}

export function findBestMatchForClaim(
  volumes: readonly PersistentVolume[],
  claim: PersistentVolumeClaim,
  delayBinding: boolean,
): MatchResult {
  const error = claimSelectorError(claim);
  if (error) return { error };
  for (const group of matchingAccessModeGroups(volumes, claim)) {
    let smallest: PersistentVolume | undefined;
    let smallestBytes = 0n;
    for (const volume of group) {
      const verdict = judgeVolumeForClaim(volume, claim, delayBinding);
      if (verdict.kind === "pre-bound") return { volume };
      if (verdict.kind !== "candidate") continue;
      const bytes = capacityBytes(volume);
      if (!smallest || bytes < smallestBytes) {
        smallest = volume;
        smallestBytes = bytes;
      }
    }
    if (smallest) return { volume: smallest };
  }
  return {};
}

/**
 * Whether `volume` is what findBestMatchForClaim would return over any set of
 * volumes: it is pre-bound to the claim (which wins within its access-mode
 * group) and offers exactly the claim's modes (the first group searched, so
 * no other group can win first). A provisioner's PV is such a volume, which
 * spares the claim sync a list of every PV.
 */
export function winsWithoutSearch(
  volume: PersistentVolume,
  claim: PersistentVolumeClaim,
  delayBinding: boolean,
): boolean {
  if (claimSelectorError(claim)) return false;
  if (accessModesKey(volume.spec.accessModes) !== accessModesKey(claim.spec.accessModes)) return false;
  return judgeVolumeForClaim(volume, claim, delayBinding).kind === "pre-bound";
}
