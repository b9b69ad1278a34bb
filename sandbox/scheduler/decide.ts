// Where a pending pod goes, decided as kube-scheduler's filters and its
// VolumeBinding plugin would (pure: the cluster's objects in, one action
// out). Nodes must be Ready and schedulable, tolerate the NoSchedule and
// NoExecute taints, match the pod's node selector and required node
// affinity, and the node affinity of every bound claim's PV. An unbound
// Immediate claim holds the pod back until it is bound. An unbound
// WaitForFirstConsumer claim fits a node where an Available PV matches it
// (the scheduler then pre-binds that PV to it, claimRef, for the binder to
// finish), else where its class can provision: allowedTopologies and the
// driver's topology keys (the scheduler then sets the selected-node
// annotation). The pod is bound once its claims are; a claim carrying the
// annotation, or a PV pre-bound to it, fits only where those point. With
// storage capacity tracking (the class's CSIDriver has storageCapacity: true),
// a claim to provision fits only a node some CSIStorageCapacity of its class
// covers with enough room (maximumVolumeSize, else capacity).

import { findBestMatchForClaim } from "../../shared/binder/find-best-match.ts";
import { isVolumeBoundToClaim } from "../../shared/binder/volume-helpers.ts";
import { labelSelectorMatches } from "../../shared/kube/label-selector.ts";
import { podClaimNames } from "../../shared/kube/pod-claims.ts";
import { compareQuantities } from "../../shared/kube/quantity.ts";
import type {
  CSIDriver,
  CSINode,
  CSIStorageCapacity,
  Node,
  NodeSelectorTerm,
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
  StorageClass,
} from "../../shared/kube/types.ts";
import { annSelectedNode } from "../../shared/kube/well-known.ts";
import { isNodeReady } from "../cluster/node-ready.ts";
import { nodeSelectorTermsMatch } from "../cluster/node-selector.ts";

const noProvisioner = "kubernetes.io/no-provisioner";

export interface SchedulingView {
  nodes: readonly Node[];
  csiNodes: readonly CSINode[];
  claim(namespace: string, name: string): PersistentVolumeClaim | undefined;
  volume(name: string): PersistentVolume | undefined;
  /** Every PV: candidates for WaitForFirstConsumer claims. */
  volumes: readonly PersistentVolume[];
  storageClass(name: string): StorageClass | undefined;
  csiDriver(name: string): CSIDriver | undefined;
  /** Every CSIStorageCapacity, in any namespace (the scheduler does not look at labels or owners). */
  capacities: readonly CSIStorageCapacity[];
  /** Pods bound to the node and not finished: the scheduler spreads by it. */
  podCount(node: string): number;
}

export type ScheduleDecision =
  | { action: "bind"; node: string }
  /**
   * Pre-bind these PVs to their claims (claimRef) and write the
   * selected-node annotation on these claims, then wait for them to be bound.
   */
  | {
      action: "prebind";
      node: string;
      bindVolumes: { claim: string; volume: string }[];
      selectNode: string[];
    }
  /** The claims carry the node; the provisioner and binder have yet to bind them. */
  | { action: "wait-for-binding"; node: string; claims: string[] }
  | { action: "unschedulable"; message: string };

interface Toleration {
  key?: string;
  operator?: string;
  value?: string;
  effect?: string;
}

interface PodSpecView {
  nodeSelector?: Record<string, string>;
  tolerations?: Toleration[];
  affinity?: {
    nodeAffinity?: {
      requiredDuringSchedulingIgnoredDuringExecution?: { nodeSelectorTerms?: NodeSelectorTerm[] };
    };
  };
}

const reasons = {
  notReady: "node(s) had untolerated taint {node.kubernetes.io/not-ready: }",
  unschedulable: "node(s) were unschedulable",
  taint: "node(s) had untolerated taint(s)",
  selector: "node(s) didn't match Pod's node affinity/selector",
  volumeAffinity: "node(s) had volume node affinity conflict",
  bindConflict: "node(s) didn't find available persistent volumes to bind",
  selectedNode: "node(s) didn't match the claim's selected node",
  capacity: "node(s) did not have enough free storage",
} as const;

function tolerates(
  tolerations: readonly Toleration[],
  taint: { key: string; value?: string; effect: string },
): boolean {
  return tolerations.some((t) => {
    if (t.effect && t.effect !== taint.effect) return false;
    if (t.operator === "Exists") return !t.key || t.key === taint.key;
    return t.key === taint.key && (t.value ?? "") === (taint.value ?? "");
  });
}

function nodeView(node: Node): { name: string; labels: Record<string, string> } {
  return { name: node.metadata.name, labels: node.metadata.labels ?? {} };
}

function allowedTopologiesMatch(sc: StorageClass, labels: Readonly<Record<string, string>>): boolean {
  const terms = sc.allowedTopologies ?? [];
  if (terms.length === 0) return true;
  return terms.some((term) =>
    (term.matchLabelExpressions ?? []).every((e) => {
      const v = labels[e.key];
      return v !== undefined && e.values.includes(v);
    }),
  );
}

/**
 * VolumeBinding's capacity check for a claim to provision on this node: only
 * when the class's CSIDriver asks for it (storageCapacity: true) and the claim
 * requests storage; then some object of the class must cover the node and
 * have room for the request.
 */
function capacityFits(
  view: SchedulingView,
  claim: PersistentVolumeClaim,
  sc: StorageClass,
  node: Node,
): boolean {
  if (view.csiDriver(sc.provisioner)?.spec.storageCapacity !== true) return true;
  const request = claim.spec.resources?.requests?.storage;
  if (!request) return true;
  const labels = node.metadata.labels ?? {};
  return view.capacities.some((c) => {
    if (c.storageClassName !== sc.metadata.name) return false;
    const limit = c.maximumVolumeSize ?? c.capacity;
    if (limit === undefined || compareQuantities(limit, request) < 0) return false;
    return c.nodeTopology ? labelSelectorMatches(c.nodeTopology, labels) : false;
  });
}

/** A CSI driver known to any node must run on this node, with every topology key it reports there as a label. */
function driverFits(view: SchedulingView, driver: string, node: Node): boolean {
  const known = view.csiNodes.some((c) => c.spec.drivers?.some((d) => d.name === driver));
  if (!known) return true;
  const csiNode = view.csiNodes.find((c) => c.metadata.name === node.metadata.name);
  const entry = csiNode?.spec.drivers?.find((d) => d.name === driver);
  if (!entry) return false;
  const labels = node.metadata.labels ?? {};
  return (entry.topologyKeys ?? []).every((k) => Object.hasOwn(labels, k));
}

function unschedulable(total: number, why: string): ScheduleDecision {
  return { action: "unschedulable", message: `0/${total} nodes are available: ${why}.` };
}

export function decidePod(pod: Pod, view: SchedulingView): ScheduleDecision {
  const namespace = pod.metadata.namespace ?? "default";
  const total = view.nodes.length;
  const bound: PersistentVolume[] = [];
  const delayed: {
    name: string;
    claim: PersistentVolumeClaim;
    sc: StorageClass;
    prebound?: PersistentVolume;
  }[] = [];
  for (const name of podClaimNames(pod)) {
    const claim = view.claim(namespace, name);
    if (!claim) return unschedulable(total, `persistentvolumeclaim "${name}" not found`);
    if (claim.metadata.deletionTimestamp) {
      return unschedulable(total, `persistentvolumeclaim "${name}" is being deleted`);
    }
    if (claim.spec.volumeName) {
      const pv = view.volume(claim.spec.volumeName);
      if (!pv) return unschedulable(total, "pod has unbound immediate PersistentVolumeClaims");
      bound.push(pv);
      continue;
    }
    const sc = claim.spec.storageClassName ? view.storageClass(claim.spec.storageClassName) : undefined;
    if (sc?.volumeBindingMode !== "WaitForFirstConsumer") {
      return unschedulable(total, "pod has unbound immediate PersistentVolumeClaims");
    }
    const prebound = view.volumes.find((v) => v.spec.claimRef && isVolumeBoundToClaim(v, claim));
    delayed.push({ name, claim, sc, ...(prebound ? { prebound } : {}) });
  }
  /** node → claim → the Available PV that would be pre-bound to it there. */
  const staticMatches = new Map<string, Map<string, string>>();

  const spec = pod.spec as PodSpecView;
  const tolerations = spec.tolerations ?? [];
  const failures = new Map<string, number>();
  const feasible: string[] = [];
  for (const node of view.nodes) {
    const why = nodeProblem(node);
    if (why) failures.set(why, (failures.get(why) ?? 0) + 1);
    else feasible.push(node.metadata.name);
  }
  if (feasible.length === 0) {
    const text = [...failures.entries()]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([why, n]) => `${n} ${why}`)
      .join(", ");
    return unschedulable(total, text || "no nodes available to schedule pods");
  }

  const selected = [
    ...new Set(
      delayed.map((d) => d.claim.metadata.annotations?.[annSelectedNode]).filter((n): n is string => !!n),
    ),
  ];
  const node = feasible.find((n) => n === selected[0]) ?? pickNode(feasible, view);
  if (delayed.length === 0) return { action: "bind", node };
  const open = delayed.filter((d) => !d.prebound && !d.claim.metadata.annotations?.[annSelectedNode]);
  if (open.length > 0) {
    const matches = staticMatches.get(node) ?? new Map<string, string>();
    return {
      action: "prebind",
      node,
      bindVolumes: open
        .filter((d) => matches.has(d.name))
        .map((d) => ({ claim: d.name, volume: matches.get(d.name)! })),
      selectNode: open.filter((d) => !matches.has(d.name)).map((d) => d.name),
    };
  }
  return { action: "wait-for-binding", node, claims: delayed.map((d) => d.name) };

  function nodeProblem(node: Node): string | undefined {
    const name = node.metadata.name;
    const labels = node.metadata.labels ?? {};
    if (!isNodeReady(node)) return reasons.notReady;
    if (
      node.spec?.unschedulable === true &&
      !tolerates(tolerations, { key: "node.kubernetes.io/unschedulable", effect: "NoSchedule" })
    ) {
      return reasons.unschedulable;
    }
    const taints = (node.spec?.taints ?? []).filter(
      (t) => t.effect === "NoSchedule" || t.effect === "NoExecute",
    );
    if (taints.some((t) => !tolerates(tolerations, t))) return reasons.taint;
    const selector = spec.nodeSelector ?? {};
    if (Object.entries(selector).some(([k, v]) => labels[k] !== v)) return reasons.selector;
    const required =
      spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution?.nodeSelectorTerms;
    if (required && !nodeSelectorTermsMatch(required, nodeView(node))) return reasons.selector;
    for (const pv of bound) {
      if (!nodeSelectorTermsMatch(pv.spec.nodeAffinity?.required?.nodeSelectorTerms, nodeView(node))) {
        return reasons.volumeAffinity;
      }
    }
    const chosen = new Map<string, string>();
    for (const d of delayed) {
      if (d.prebound) {
        if (
          !nodeSelectorTermsMatch(d.prebound.spec.nodeAffinity?.required?.nodeSelectorTerms, nodeView(node))
        ) {
          return reasons.volumeAffinity;
        }
        continue;
      }
      const annotated = d.claim.metadata.annotations?.[annSelectedNode];
      if (annotated) {
        if (annotated !== name) return reasons.selectedNode;
        continue;
      }
      const taken = new Set(chosen.values());
      const candidates = view.volumes.filter(
        (v) =>
          !taken.has(v.metadata.name) &&
          nodeSelectorTermsMatch(v.spec.nodeAffinity?.required?.nodeSelectorTerms, nodeView(node)),
      );
      const match = findBestMatchForClaim(candidates, d.claim, false).volume;
      if (match) {
        chosen.set(d.name, match.metadata.name);
        continue;
      }
      if (d.sc.provisioner === noProvisioner) return reasons.bindConflict;
      if (!allowedTopologiesMatch(d.sc, labels)) return reasons.bindConflict;
      if (!driverFits(view, d.sc.provisioner, node)) return reasons.bindConflict;
      if (!capacityFits(view, d.claim, d.sc, node)) return reasons.capacity;
    }
    staticMatches.set(name, chosen);
    return undefined;
  }
}

/** The node with the fewest pods, by name among equals: pods spread over the sandbox's nodes. */
function pickNode(feasible: readonly string[], view: SchedulingView): string {
  return [...feasible].sort((a, b) => view.podCount(a) - view.podCount(b) || a.localeCompare(b))[0]!;
}
