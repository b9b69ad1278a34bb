// Node selector terms as the scheduler evaluates them (a PV's node
// affinity, a pod's required node affinity): terms are ORed, the
// expressions of a term ANDed; matchFields knows metadata.name.
import type { NodeSelectorRequirement, NodeSelectorTerm } from "../../shared/kube/types.ts";

export interface NodeLike {
  name: string;
  labels: Readonly<Record<string, string>>;
}

function requirementMatches(r: NodeSelectorRequirement, value: string | undefined): boolean {
  const values = r.values ?? [];
  switch (r.operator) {
    case "In":
      return value !== undefined && values.includes(value);
    case "NotIn":
      return value === undefined || !values.includes(value);
    case "Exists":
      return value !== undefined;
    case "DoesNotExist":
      return value === undefined;
    case "Gt":
    case "Lt": {
      const have = Number(value);
      const limit = Number(values[0]);
      if (value === undefined || !Number.isInteger(have) || !Number.isInteger(limit)) return false;
      return r.operator === "Gt" ? have > limit : have < limit;
    }
    default:
      return false;
  }
}

function termMatches(term: NodeSelectorTerm, node: NodeLike): boolean {
  const expressions = term.matchExpressions ?? [];
  const fields = term.matchFields ?? [];
  // A term with no requirements matches nothing, as upstream.
  if (expressions.length === 0 && fields.length === 0) return false;
  return (
    expressions.every((r) => requirementMatches(r, node.labels[r.key])) &&
    fields.every((r) => r.key === "metadata.name" && requirementMatches(r, node.name))
  );
}

/** True when some term matches; an absent list constrains nothing. */
export function nodeSelectorTermsMatch(
  terms: readonly NodeSelectorTerm[] | undefined,
  node: NodeLike,
): boolean {
  if (terms === undefined) return true;
  return terms.some((t) => termMatches(t, node));
}
