// kube-controller-manager's pod garbage collector, the parts a cluster
// without it would get stuck on (pure: pods and nodes in, pods to force
// delete out): a pod being deleted on a node that is not Ready and carries
// the node.kubernetes.io/out-of-service taint (non-graceful node shutdown),
// a pod bound to a node that has not existed for the quarantine period, and
// a pod being deleted that was never scheduled.
import type { Node, Pod } from "../../shared/kube/types.ts";
import { isNodeReady } from "../cluster/node-ready.ts";

export const outOfServiceTaint = "node.kubernetes.io/out-of-service";

export interface PodToCollect {
  pod: Pod;
  /** Orphans are first marked Failed with a DisruptionTarget condition, as upstream does. */
  reason: "terminating-out-of-service" | "orphaned" | "unscheduled-terminating";
}

/**
 * `missingSince` remembers when each node name was first seen missing (the
 * caller keeps it between passes; this updates it): an orphan is collected
 * only once its node has been gone for `quarantineMs`.
 */
export function podsToCollect(
  pods: readonly Pod[],
  nodes: readonly Node[],
  missingSince: Map<string, number>,
  nowMs: number,
  quarantineMs: number,
): PodToCollect[] {
  const byName = new Map(nodes.map((n) => [n.metadata.name, n]));
  for (const name of [...missingSince.keys()]) if (byName.has(name)) missingSince.delete(name);
  const out: PodToCollect[] = [];
  for (const pod of pods) {
    const nodeName = pod.spec.nodeName;
    const deleting = pod.metadata.deletionTimestamp !== undefined;
    if (!nodeName) {
      if (deleting) out.push({ pod, reason: "unscheduled-terminating" });
      continue;
    }
    const node = byName.get(nodeName);
    if (!node) {
      const since = missingSince.get(nodeName) ?? nowMs;
      missingSince.set(nodeName, since);
      if (nowMs - since >= quarantineMs) out.push({ pod, reason: "orphaned" });
      continue;
    }
    if (
      deleting &&
      !isNodeReady(node) &&
      (node.spec?.taints ?? []).some((t) => t.key === outOfServiceTaint)
    ) {
      out.push({ pod, reason: "terminating-out-of-service" });
    }
  }
  return out;
}
