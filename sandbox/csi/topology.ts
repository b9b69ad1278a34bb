// Where a new volume is accessible from. The sandbox driver serves every
// simulated node, so it can place a volume in any topology the caller asks
// for: the first preferred segment (the provisioner puts the selected node's
// first), else the first requisite one, else the driver's own node.
import type { TopologyRequirement } from "../../shared/csi/types.ts";

export function chooseTopology(
  requirement: TopologyRequirement | undefined,
  topologyKey: string,
  nodeId: string,
): Record<string, string> {
  const preferred = requirement?.preferred ?? [];
  const requisite = requirement?.requisite ?? [];
  const inRequisite = (segments: Record<string, string>): boolean =>
    requisite.length === 0 || requisite.some((r) => sameSegments(r.segments, segments));
  const pick = preferred.find((p) => inRequisite(p.segments)) ?? requisite[0];
  return pick ? { ...pick.segments } : { [topologyKey]: nodeId };
}

/** Whether a volume placed in `placed` satisfies the requisite list (empty = anywhere). */
export function satisfiesRequisite(
  placed: readonly Record<string, string>[],
  requirement: TopologyRequirement | undefined,
): boolean {
  const requisite = requirement?.requisite ?? [];
  if (requisite.length === 0 || placed.length === 0) return true;
  return placed.some((p) => requisite.some((r) => sameSegments(r.segments, p)));
}

function sameSegments(a: Record<string, string>, b: Record<string, string>): boolean {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => a[k] === b[k]);
}
