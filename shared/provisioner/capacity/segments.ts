// Topology segments of one driver, as external-provisioner's central mode
// finds them (pkg/capacity/topology/nodes.go): for every CSINode that lists
// the driver, its topologyKeys (sorted) with the values of its Node's labels.
// A node whose Node object or one of whose key labels is missing is left out;
// equal segments are one. A driver listed without keys gives the empty
// segment, which every node matches.
import type { CSINode, Node } from "../../kube/types.ts";

/** Topology key → value, keys sorted. */
export type Segment = Readonly<Record<string, string>>;

export function segmentId(segment: Segment): string {
  return JSON.stringify(Object.entries(segment).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

export function segmentsOf(
  driverName: string,
  csiNodes: readonly CSINode[],
  nodes: readonly Node[],
): Segment[] {
  const nodeByName = new Map(nodes.map((n) => [n.metadata.name, n]));
  const found = new Map<string, Segment>();
  for (const csiNode of csiNodes) {
    const driver = csiNode.spec?.drivers?.find((d) => d.name === driverName);
    if (!driver) continue;
    const node = nodeByName.get(csiNode.metadata.name);
    if (!node) continue;
    const keys = [...(driver.topologyKeys ?? [])].sort();
    const segment: Record<string, string> = {};
    let complete = true;
    for (const key of keys) {
      const value = node.metadata.labels?.[key];
      if (value === undefined) {
        complete = false;
        break;
      }
      segment[key] = value;
    }
    if (!complete) continue;
    found.set(segmentId(segment), segment);
  }
  return [...found.values()].sort((a, b) => (segmentId(a) < segmentId(b) ? -1 : 1));
}

/** The segment an object's nodeTopology names (matchLabels only, as upstream writes them); undefined if it uses more. */
export function segmentOfSelector(selector: CSINodeTopologySelector | null | undefined): Segment | undefined {
  if (!selector) return {};
  if (selector.matchExpressions && selector.matchExpressions.length > 0) return undefined;
  const labels = selector.matchLabels ?? {};
  return Object.fromEntries(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

interface CSINodeTopologySelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: readonly unknown[];
}
