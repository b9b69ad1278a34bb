// CreateVolume's accessibility_requirements and the PV's nodeAffinity, as the
// external-provisioner builds them (topology.go). Upstream also keeps an
// in-memory per-claim cache so a retry survives a Node/CSINode vanishing; a
// stateless function re-reads instead, so a missing selected Node or CSINode
// asks for a reschedule, the way the provisioner library does for a missing
// Node.
import type { CSINode, Node, NodeSelectorTerm, StorageClass } from "../kube/types.ts";
import { compareStrings, goList, goMap, goQuote } from "./go-format.ts";

export interface Topology {
  segments: Record<string, string>;
}

export interface TopologyRequirement {
  requisite: Topology[];
  preferred: Topology[];
}

export type TopologySelectorTerm = NonNullable<StorageClass["allowedTopologies"]>[number];

export interface AccessibilityInput {
  driverName: string;
  /** The claim's name: with immediate binding it spreads StatefulSet replicas over the requisite terms. */
  claimName: string;
  /** The node in `volume.kubernetes.io/selected-node` with what was read for it; absent with immediate binding. */
  selectedNode?: { name: string; node: Node | undefined; csiNode: CSINode | undefined };
  /** Every Node (aggregation looks for the ones labelled with the driver's topology keys). */
  nodes: readonly Node[];
  /** Every CSINode (with immediate binding the topology keys come from the first one that has them). */
  csiNodes: readonly CSINode[];
  allowedTopologies?: readonly TopologySelectorTerm[] | undefined;
  /** --strict-topology (default false): only the selected node's topology. */
  strictTopology?: boolean;
  /** --immediate-topology (default true): with immediate binding and no allowedTopologies, still aggregate. */
  immediateTopology?: boolean;
}

export type AccessibilityResult =
  | { ok: true; value: TopologyRequirement | undefined }
  /** reschedule: the selected node (or its CSINode) is gone, so the scheduler should pick again. */
  | { ok: false; error: string; reschedule: boolean };

/** One AND of key=value pairs, kept sorted by key (then value) so terms compare by position. */
type Term = [key: string, value: string][];

export function accessibilityRequirements(input: AccessibilityInput): AccessibilityResult {
  const strict = input.strictTopology ?? false;
  const immediateTopology = input.immediateTopology ?? true;
  const allowed = input.allowedTopologies ?? [];
  const selected = input.selectedNode;
  const fail = (message: string): AccessibilityResult => ({
    ok: false,
    error: `error generating accessibility requirements: ${message}`,
    reschedule: false,
  });

  let topologyKeys: string[] = [];
  let selectedTopology: Term = [];
  let requisite: Term[] = [];

  if (selected) {
    if (!selected.node)
      return { ok: false, error: `nodes ${goQuote(selected.name)} not found`, reschedule: true };
    if (!selected.csiNode) {
      return {
        ok: false,
        error: `failed to get selected CSINode ${selected.name}: csinodes.storage.k8s.io ${goQuote(selected.name)} not found`,
        reschedule: true,
      };
    }
    topologyKeys = driverTopologyKeys(selected.csiNode, input.driverName);
    // The driver has not registered on that node (yet): an error, the scheduler may pick another node.
    if (topologyKeys.length === 0) return fail(`no topology key found for node ${selected.name}`);
    const labels = selected.node.metadata.labels ?? {};
    const term = termFromLabels(labels, topologyKeys);
    if (!term) {
      return fail(
        `topology labels from selected node ${goMap(labels)} does not match topology keys from CSINode ${goList(topologyKeys)}`,
      );
    }
    selectedTopology = term;

    if (strict) {
      if (allowed.length > 0) {
        const flat = flatten(allowed);
        if (!flat.some((t) => isSubset(t, selectedTopology))) {
          return fail(
            `selected node '${goQuote(selected.name)}' topology '${formatTerm(selectedTopology)}' is not in allowed topologies: ${formatTerms(flat)}`,
          );
        }
      }
      requisite = [selectedTopology];
    }
  }

  if (requisite.length === 0) {
    if (allowed.length > 0) {
      requisite = flatten(allowed);
    } else {
      // Neither the class nor the claim limits placement and the driver did not ask to be told.
      if (!selected && !immediateTopology) return { ok: true, value: undefined };
      const aggregated = aggregate(input, selected ? topologyKeys : undefined);
      if (!aggregated.ok) return fail(aggregated.error);
      requisite = aggregated.terms;
      if (requisite.length === 0) return fail("no available topology found");
    }
  }

  // allowedTopologies made only of empty entries: behave as if topology were off.
  if (requisite.length === 0) return { ok: true, value: undefined };

  requisite.sort(compareTerms);
  requisite = requisite.filter((t, i) => i === 0 || compareTerms(t, requisite[i - 1] ?? []) !== 0);

  let preferred: Term[];
  if (!selected) {
    const { hash, index } = claimNameHashAndIndex(input.claimName);
    preferred = rotate(requisite, ((hash + index) % 2 ** 32) % requisite.length);
  } else if (strict) {
    preferred = requisite;
  } else {
    const first = requisite.findIndex((t) => isSubset(t, selectedTopology));
    // Cannot happen when the scheduler honoured allowedTopologies, or with aggregation (the node is in it).
    if (first < 0) {
      return fail(
        `topology ${formatTerm(selectedTopology)} from selected node ${goQuote(selected.name)} is not in requisite: ${formatTerms(requisite)}`,
      );
    }
    preferred = rotate(requisite, first);
  }

  return { ok: true, value: { requisite: toTopologies(requisite), preferred: toTopologies(preferred) } };
}

/**
 * The PV's `spec.nodeAffinity` for the topology CreateVolume reported: one
 * term per entry (ORed), one `In` requirement per segment (ANDed). Undefined
 * when there is no topology, so the PV is usable from every node.
 */
export function nodeAffinityFromTopology(
  accessibleTopology: readonly Topology[] | undefined,
): { required: { nodeSelectorTerms: NodeSelectorTerm[] } } | undefined {
  const nodeSelectorTerms: NodeSelectorTerm[] = [];
  for (const topology of accessibleTopology ?? []) {
    const keys = Object.keys(topology.segments ?? {}).sort(compareStrings);
    if (keys.length === 0) continue;
    // Go walks the map in random order; sorted keys keep the PV stable across retries.
    nodeSelectorTerms.push({
      matchExpressions: keys.map((key) => ({ key, operator: "In", values: [topology.segments[key] ?? ""] })),
    });
  }
  // Upstream would write an affinity with no terms (which the API server rejects); none is the safe reading.
  return nodeSelectorTerms.length > 0 ? { required: { nodeSelectorTerms } } : undefined;
}

function driverTopologyKeys(csiNode: CSINode, driverName: string): string[] {
  return csiNode.spec.drivers?.find((d) => d.name === driverName)?.topologyKeys ?? [];
}

function termFromLabels(labels: Readonly<Record<string, string>>, keys: readonly string[]): Term | undefined {
  const term: Term = [];
  for (const key of keys) {
    if (!Object.hasOwn(labels, key)) return undefined;
    term.push([key, labels[key] ?? ""]);
  }
  return sortTerm(term);
}

type Aggregated = { ok: true; terms: Term[] } | { ok: false; error: string };

/** Topology values of every node labelled with all of the driver's keys. */
function aggregate(input: AccessibilityInput, selectedNodeKeys: string[] | undefined): Aggregated {
  let keys = selectedNodeKeys ?? [];
  if (!selectedNodeKeys) {
    // Upstream takes the first CSINode (in random order) that has keys; name order keeps this deterministic.
    const csiNodes = [...input.csiNodes].sort((a, b) => compareStrings(a.metadata.name, b.metadata.name));
    for (const csiNode of csiNodes) {
      const found = driverTopologyKeys(csiNode, input.driverName);
      if (found.length > 0) {
        keys = found;
        break;
      }
    }
    // No node has registered the driver's keys yet: the caller reports "no available topology found".
    if (keys.length === 0) return { ok: true, terms: [] };
  }
  const terms: Term[] = [];
  for (const node of input.nodes) {
    const term = termFromLabels(node.metadata.labels ?? {}, keys);
    if (term && term.length > 0) terms.push(term);
  }
  if (terms.length === 0)
    return { ok: false, error: `topologyKeys ${goList(keys)} were not found on any nodes` };
  return { ok: true, terms };
}

/**
 * allowedTopologies is an OR of terms, each an AND of (key, OR of values).
 * CSI wants an OR of ANDs, so the value ORs are distributed: {zone: [a, b],
 * rack: [x]} becomes (zone=a AND rack=x) OR (zone=b AND rack=x). Like
 * upstream, an expression with no values drops what came before it.
 */
function flatten(allowed: readonly TopologySelectorTerm[]): Term[] {
  const result: Term[] = [];
  for (const selectorTerm of allowed) {
    let terms: Term[] = [];
    for (const expression of selectorTerm.matchLabelExpressions ?? []) {
      const next: Term[] = [];
      for (const value of expression.values ?? []) {
        if (terms.length === 0) next.push([[expression.key, value]]);
        else for (const term of terms) next.push([...term, [expression.key, value]]);
      }
      terms = next;
    }
    result.push(...terms);
  }
  return result.map(sortTerm);
}

function sortTerm(term: Term): Term {
  return term.sort((a, b) => compareStrings(a[0], b[0]) || compareStrings(a[1], b[1]));
}

/** Shorter terms first, then segment by segment: upstream's topologyTerm.compare. */
function compareTerms(a: Term, b: Term): number {
  if (a.length !== b.length) return a.length - b.length;
  for (let i = 0; i < a.length; i++) {
    const [ka, va] = a[i] ?? ["", ""];
    const [kb, vb] = b[i] ?? ["", ""];
    const r = compareStrings(ka, kb) || compareStrings(va, vb);
    if (r !== 0) return r;
  }
  return 0;
}

/** Every segment of `term` is in `other` (both sorted): upstream's topologyTerm.subset, step for step. */
function isSubset(term: Term, other: Term): boolean {
  if (term.length === 0) return true;
  let j = 0;
  for (const [key, value] of other) {
    const segment = term[j];
    if (!segment || segment[0] !== key) continue;
    if (segment[1] !== value) return false;
    j++;
    if (j === term.length) return true;
  }
  return false;
}

function rotate<T>(items: T[], start: number): T[] {
  return [...items.slice(start), ...items.slice(0, start)];
}

function toTopologies(terms: Term[]): Topology[] {
  return terms.filter((t) => t.length > 0).map((t) => ({ segments: Object.fromEntries(t) }));
}

/**
 * The in-tree StatefulSet spreading heuristic (getPVCNameHashAndIndexOffset):
 * for `claim-set-3`, hash only "set" and offset by 3, so the replicas of one
 * StatefulSet land in consecutive terms and the claims of one replica together.
 */
export function claimNameHashAndIndex(claimName: string): { hash: number; index: number } {
  // Upstream picks a random hash for an empty name; a claim always has one, 0 keeps this pure.
  if (claimName === "") return { hash: 0, index: 0 };
  let hashString = claimName;
  let index = 0;
  const lastDash = claimName.lastIndexOf("-");
  if (lastDash !== -1) {
    const id = claimName.slice(lastDash + 1);
    if (/^[0-9]+$/.test(id) && Number(id) <= 0xffffffff) {
      index = Number(id);
      hashString = claimName.slice(0, lastDash);
      const prevDash = hashString.lastIndexOf("-");
      if (prevDash !== -1) hashString = hashString.slice(prevDash + 1);
    }
  }
  return { hash: fnv32(hashString), index };
}

/** FNV-1 (not 1a), 32 bits, over the UTF-8 bytes: Go's hash/fnv New32. */
function fnv32(s: string): number {
  let hash = 0x811c9dc5;
  for (const byte of Buffer.from(s, "utf8")) {
    hash = Math.imul(hash, 0x01000193) >>> 0;
    hash = (hash ^ byte) >>> 0;
  }
  return hash;
}

/** %v of upstream's topologyTerm: `[{key value} ...]`. */
function formatTerm(term: Term): string {
  return `[${term.map(([k, v]) => `{${k} ${v}}`).join(" ")}]`;
}

function formatTerms(terms: Term[]): string {
  return `[${terms.map(formatTerm).join(" ")}]`;
}
