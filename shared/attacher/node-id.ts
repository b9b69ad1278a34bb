// The CSI node id of a VolumeAttachment's node (upstream getNodeID): the
// driver's entry in the node's CSINode; for detach, when the CSINode or the
// entry is gone (node shut down, driver pod not running), the node id the
// attach recorded in the VA annotation, so unpublish is never blocked.
import type { CSINode, VolumeAttachment } from "../kube/types.ts";
import { annNodeId } from "./constants.ts";

type NodeIdResult = { ok: true; nodeId: string } | { ok: false; error: string };

function nodeIdFromCsiNode(driver: string, csiNode: CSINode): string | undefined {
  return csiNode.spec?.drivers?.find((d) => d.name === driver)?.nodeID;
}

/**
 * `csiNode` is the CSINode named like the VA's node, undefined when it does
 * not exist. Pass `fallback` (the VA) to allow the annotation (detach,
 * reconcile); attach always asks the CSINode.
 */
export function nodeIdFor(
  driver: string,
  nodeName: string,
  csiNode: CSINode | undefined,
  fallback?: VolumeAttachment,
): NodeIdResult {
  let error: string;
  if (csiNode) {
    const nodeId = nodeIdFromCsiNode(driver, csiNode);
    if (nodeId !== undefined) return { ok: true, nodeId };
    error = `CSINode ${nodeName} does not contain driver ${driver}`;
  } else {
    error = `csinode.storage.k8s.io "${nodeName}" not found`;
  }
  const recorded = fallback?.metadata.annotations?.[annNodeId];
  if (recorded !== undefined) return { ok: true, nodeId: recorded };
  return { ok: false, error };
}
