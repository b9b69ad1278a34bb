// Whether a node counts as up for the sandbox's scheduler, kubelet and pod
// gc: its Ready condition is True, as upstream's components judge it.
import type { Node } from "../../shared/kube/types.ts";

export function isNodeReady(node: Node): boolean {
  return node.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
}
