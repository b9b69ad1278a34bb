// The kubelet's bookkeeping decisions, pure: which pods' volumes to tear
// down, which staged volumes to unstage, what node status reports in
// volumesInUse, and when a pod being deleted may go for good.
import type { Pod } from "../../shared/kube/types.ts";
import type { CsiVolumeToMount } from "./pod-volumes.ts";

/** What the kubelet has done on its node (its actual state of the world). */
export interface NodeVolumeState {
  /** unique volume name → the volume staged on the node. */
  staged: ReadonlyMap<string, { volume: CsiVolumeToMount }>;
  /** pod uid → unique volume name → the volume published for the pod. */
  mounted: ReadonlyMap<string, ReadonlyMap<string, { volume: CsiVolumeToMount }>>;
}

export function isFinished(p: Pod): boolean {
  return p.status?.phase === "Succeeded" || p.status?.phase === "Failed";
}

/** Pods with published volumes that are gone, being deleted or finished: unpublish theirs. */
export function podsToTearDown(state: NodeVolumeState, podsByUid: ReadonlyMap<string, Pod>): string[] {
  return [...state.mounted.keys()].filter((uid) => {
    const pod = podsByUid.get(uid);
    return !pod || pod.metadata.deletionTimestamp !== undefined || isFinished(pod);
  });
}

/** Staged volumes no pod has published and no pod here still wants: unstage them. */
export function volumesToUnstage(state: NodeVolumeState, wanted: ReadonlySet<string>): string[] {
  const published = new Set([...state.mounted.values()].flatMap((m) => [...m.keys()]));
  return [...state.staged.keys()].filter((unique) => !wanted.has(unique) && !published.has(unique));
}

/**
 * node.status.volumesInUse: the attachable volumes pods here want, plus
 * those still staged or published; sorted and deduplicated.
 */
export function volumesInUse(desired: readonly CsiVolumeToMount[], state: NodeVolumeState): string[] {
  const names = new Set<string>();
  const add = (v: CsiVolumeToMount): void => {
    if (v.attachRequired) names.add(v.uniqueName);
  };
  for (const v of desired) add(v);
  for (const s of state.staged.values()) add(s.volume);
  for (const mounts of state.mounted.values()) for (const m of mounts.values()) add(m.volume);
  return [...names].sort();
}

/**
 * A pod being deleted goes for good once nothing of it is published and the
 * volumes only it used are unstaged and out of volumesInUse.
 */
export function podMayGo(
  uid: string,
  state: NodeVolumeState,
  hadVolumes: ReadonlySet<string>,
  wanted: ReadonlySet<string>,
  inUse: readonly string[],
): boolean {
  if (state.mounted.has(uid)) return false;
  return [...hadVolumes]
    .filter((v) => !wanted.has(v))
    .every((v) => !state.staged.has(v) && !inUse.includes(v));
}
