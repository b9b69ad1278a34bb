// When a pod's volumes are no longer wanted, by the rule of Kubernetes' volume
// code that the attach/detach controller and pvc-protection both apply: the
// pod finished, or it is being deleted and none of its containers runs.
import { isRecord } from "../is-record.ts";
import type { Pod } from "./types.ts";

/** Every container status is waiting or terminated (an empty list counts as not running). */
function notRunning(statuses: unknown): boolean {
  if (!Array.isArray(statuses)) return true;
  return statuses.every((s) => isRecord(s) && isRecord(s.state) && (s.state.terminated || s.state.waiting));
}

/** Succeeded or Failed, or being deleted with no container running. */
export function isPodTerminated(pod: Pod): boolean {
  const status = pod.status ?? {};
  if (status.phase === "Failed" || status.phase === "Succeeded") return true;
  return (
    Boolean(pod.metadata.deletionTimestamp) &&
    notRunning(status.initContainerStatuses) &&
    notRunning(status.containerStatuses) &&
    notRunning(status.ephemeralContainerStatuses)
  );
}
