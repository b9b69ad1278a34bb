// Accessibility requirements and node affinity, with the cases of upstream's
// topology_test.go (allowed topologies, aggregation, selected node, strict)
// and the in-tree StatefulSet spreading hash.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { CSINode, Node } from "../../shared/kube/types.ts";
import {
  type AccessibilityInput,
  type AccessibilityResult,
  accessibilityRequirements,
  claimNameHashAndIndex,
  nodeAffinityFromTopology,
  type Topology,
  type TopologySelectorTerm,
} from "../../shared/provisioner/topology.ts";

const driver = "com.example.csi/test-driver";
const zone = "com.example.csi/zone";
const rack = "com.example.csi/rack";

function node(name: string, labels: Record<string, string>): Node {
  return { apiVersion: "v1", kind: "Node", metadata: { name, labels } };
}

function csiNode(name: string, drivers: Record<string, string[]>): CSINode {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "CSINode",
    metadata: { name },
    spec: {
      drivers: Object.entries(drivers).map(([d, keys]) => ({
        name: d,
        nodeID: `${name}-id`,
        topologyKeys: keys,
      })),
    },
  };
}

const z = (v: string): Topology => ({ segments: { [zone]: v } });
const zr = (zv: string, rv: string): Topology => ({ segments: { [rack]: rv, [zone]: zv } });

/** Three nodes in two zones, each with our driver (zone key) and another driver first. */
const nodes = [
  node("n1", { [zone]: "zone1" }),
  node("n2", { [zone]: "zone2" }),
  node("n3", { [zone]: "zone2" }),
];
const csiNodes = nodes.map((n) => csiNode(n.metadata.name, { "other.csi": ["other/key"], [driver]: [zone] }));

function base(over: Partial<AccessibilityInput> = {}): AccessibilityInput {
  return { driverName: driver, claimName: "henley", nodes, csiNodes, ...over };
}

function selected(name: string, over: { node?: Node | undefined; csiNode?: CSINode | undefined } = {}) {
  return {
    name,
    node: "node" in over ? over.node : nodes.find((n) => n.metadata.name === name),
    csiNode: "csiNode" in over ? over.csiNode : csiNodes.find((n) => n.metadata.name === name),
  };
}

const ok = (requisite: Topology[], preferred: Topology[]): AccessibilityResult => ({
  ok: true,
  value: { requisite, preferred },
});
const fail = (message: string): AccessibilityResult => ({
  ok: false,
  error: `error generating accessibility requirements: ${message}`,
  reschedule: false,
});

const allowedZones = (...values: string[][]): TopologySelectorTerm[] =>
  values.map((v) => ({ matchLabelExpressions: [{ key: zone, values: v }] }));

interface Case {
  name: string;
  input: AccessibilityInput;
  want: AccessibilityResult;
}

const cases: Case[] = [
  // Immediate binding.
  {
    name: "immediate binding without immediate topology: no requirement",
    input: base({ immediateTopology: false }),
    want: { ok: true, value: undefined },
  },
  {
    name: "immediate binding aggregates the cluster's distinct values",
    input: base(),
    want: ok([z("zone1"), z("zone2")], [z("zone1"), z("zone2")]),
  },
  {
    name: "immediate binding spreads StatefulSet replicas (henley-1: hash + 1)",
    input: base({ claimName: "data-henley-1" }),
    want: ok([z("zone1"), z("zone2")], [z("zone2"), z("zone1")]),
  },
  {
    name: "immediate binding: the hash of the whole name picks the start (henley-a: 2 mod 3)",
    input: base({
      claimName: "henley-a",
      nodes: [...nodes, node("n4", { [zone]: "zone3" })],
    }),
    want: ok([z("zone1"), z("zone2"), z("zone3")], [z("zone3"), z("zone1"), z("zone2")]),
  },
  {
    name: "immediate binding: no CSINode has the driver's keys",
    input: base({
      csiNodes: [csiNode("n1", { "other.csi": ["other/key"] }), csiNode("n2", { [driver]: [] })],
    }),
    want: fail("no available topology found"),
  },
  {
    name: "immediate binding: keys registered but no node carries the labels",
    input: base({ nodes: [node("n1", {}), node("n2", { "other/key": "x" })] }),
    want: fail(`topologyKeys [${zone}] were not found on any nodes`),
  },
  {
    name: "immediate binding: nodes missing one of several keys are left out",
    input: base({
      csiNodes: [csiNode("n1", { [driver]: [zone, rack] })],
      nodes: [
        node("n1", { [zone]: "zone1", [rack]: "rackA" }),
        node("n2", { [zone]: "zone2" }),
        node("n3", { [zone]: "zone1", [rack]: "rackB" }),
      ],
    }),
    want: ok([zr("zone1", "rackA"), zr("zone1", "rackB")], [zr("zone1", "rackA"), zr("zone1", "rackB")]),
  },
  // allowedTopologies (upstream TestAllowedTopologies).
  {
    name: "allowed: single expression, multiple values",
    input: base({ allowedTopologies: allowedZones(["zone2", "zone1"]) }),
    want: ok([z("zone1"), z("zone2")], [z("zone1"), z("zone2")]),
  },
  {
    name: "allowed: both expressions with several values are distributed, then sorted",
    input: base({
      allowedTopologies: [
        {
          matchLabelExpressions: [
            { key: zone, values: ["zone1", "zone2"] },
            { key: rack, values: ["rackA", "rackB"] },
          ],
        },
      ],
    }),
    want: ok(
      [zr("zone1", "rackA"), zr("zone2", "rackA"), zr("zone1", "rackB"), zr("zone2", "rackB")],
      [zr("zone1", "rackA"), zr("zone2", "rackA"), zr("zone1", "rackB"), zr("zone2", "rackB")],
    ),
  },
  {
    name: "allowed: overlapping values are deduplicated",
    input: base({ allowedTopologies: allowedZones(["zone1", "zone2"], ["zone2", "zone3"]) }),
    want: ok([z("zone1"), z("zone2"), z("zone3")], [z("zone1"), z("zone2"), z("zone3")]),
  },
  {
    name: "allowed: a subset duplicate stays, shorter terms first",
    input: base({
      allowedTopologies: [
        { matchLabelExpressions: [{ key: zone, values: ["zone1"] }] },
        {
          matchLabelExpressions: [
            { key: zone, values: ["zone1"] },
            { key: rack, values: ["rackA"] },
          ],
        },
      ],
    }),
    want: ok([z("zone1"), zr("zone1", "rackA")], [z("zone1"), zr("zone1", "rackA")]),
  },
  {
    name: "allowed: applies even with immediate topology off",
    input: base({ immediateTopology: false, allowedTopologies: allowedZones(["zone1"]) }),
    want: ok([z("zone1")], [z("zone1")]),
  },
  {
    name: "allowed: only empty entries behave as no topology",
    input: base({ allowedTopologies: [{}, { matchLabelExpressions: [] }] }),
    want: { ok: true, value: undefined },
  },
  {
    name: "allowed: an expression without values drops what came before it (upstream's flatten)",
    input: base({
      allowedTopologies: [
        {
          matchLabelExpressions: [
            { key: rack, values: ["rackA"] },
            { key: "x", values: [] },
            { key: zone, values: ["zone1"] },
          ],
        },
      ],
    }),
    want: ok([z("zone1")], [z("zone1")]),
  },
  // Delayed binding with a selected node.
  {
    name: "selected node: requisite aggregated, preferred starts at the node's zone",
    input: base({ selectedNode: selected("n2"), nodes: [...nodes, node("n4", { [zone]: "zone3" })] }),
    want: ok([z("zone1"), z("zone2"), z("zone3")], [z("zone2"), z("zone3"), z("zone1")]),
  },
  {
    name: "selected node: aggregation happens even with immediate topology off",
    input: base({ selectedNode: selected("n2"), immediateTopology: false }),
    want: ok([z("zone1"), z("zone2")], [z("zone2"), z("zone1")]),
  },
  {
    name: "selected node: requisite from allowedTopologies, preferred rotated to a term the node satisfies",
    input: base({
      selectedNode: selected("r1", {
        node: node("r1", { [zone]: "zone2", [rack]: "rackA" }),
        csiNode: csiNode("r1", { [driver]: [zone, rack] }),
      }),
      allowedTopologies: allowedZones(["zone1", "zone2", "zone3"]),
    }),
    want: ok([z("zone1"), z("zone2"), z("zone3")], [z("zone2"), z("zone3"), z("zone1")]),
  },
  {
    name: "selected node outside allowedTopologies",
    input: base({ selectedNode: selected("n1"), allowedTopologies: allowedZones(["zone2"]) }),
    want: fail(`topology [{${zone} zone1}] from selected node "n1" is not in requisite: [[{${zone} zone2}]]`),
  },
  {
    name: "strict: only the selected node's topology",
    input: base({ selectedNode: selected("n2"), strictTopology: true }),
    want: ok([z("zone2")], [z("zone2")]),
  },
  {
    name: "strict: selected node inside allowedTopologies",
    input: base({
      selectedNode: selected("n2"),
      strictTopology: true,
      allowedTopologies: allowedZones(["zone2", "zone3"]),
    }),
    want: ok([z("zone2")], [z("zone2")]),
  },
  {
    name: "strict: selected node outside allowedTopologies",
    input: base({
      selectedNode: selected("n1"),
      strictTopology: true,
      allowedTopologies: allowedZones(["zone2", "zone3"]),
    }),
    want: fail(
      `selected node '"n1"' topology '[{${zone} zone1}]' is not in allowed topologies: [[{${zone} zone2}] [{${zone} zone3}]]`,
    ),
  },
  {
    name: "selected Node is gone: reschedule",
    input: base({ selectedNode: selected("gone", { node: undefined, csiNode: undefined }) }),
    want: { ok: false, error: 'nodes "gone" not found', reschedule: true },
  },
  {
    name: "selected node's CSINode is gone: reschedule",
    input: base({ selectedNode: selected("n1", { csiNode: undefined }) }),
    want: {
      ok: false,
      error: 'failed to get selected CSINode n1: csinodes.storage.k8s.io "n1" not found',
      reschedule: true,
    },
  },
  {
    name: "driver not registered on the selected node",
    input: base({ selectedNode: selected("n1", { csiNode: csiNode("n1", { "other.csi": ["other/key"] }) }) }),
    want: fail("no topology key found for node n1"),
  },
  {
    name: "selected node lacks a topology label",
    input: base({
      selectedNode: selected("n1", {
        node: node("n1", { [zone]: "zone1", "kubernetes.io/hostname": "n1" }),
        csiNode: csiNode("n1", { [driver]: [zone, rack] }),
      }),
    }),
    want: fail(
      `topology labels from selected node map[${zone}:zone1 kubernetes.io/hostname:n1] does not match topology keys from CSINode [${zone} ${rack}]`,
    ),
  },
];

describe("accessibilityRequirements", () => {
  for (const c of cases) {
    it(c.name, () => {
      assert.deepEqual(accessibilityRequirements(c.input), c.want);
    });
  }

  it("does not depend on the order CSINodes are listed in", () => {
    const reversed = accessibilityRequirements(base({ csiNodes: [...csiNodes].reverse() }));
    assert.deepEqual(reversed, accessibilityRequirements(base()));
  });
});

describe("claimNameHashAndIndex (FNV-32 values from the in-tree tests)", () => {
  const cases: [string, number, number][] = [
    ["henley", 1180403676, 0],
    ["henley-", 2652299129, 0],
    ["henley-a", 1459735322, 0],
    ["henley-3", 1180403676, 3],
    ["medium-henley-4", 1180403676, 4],
    ["medium-alpha-henley-2", 1180403676, 2],
    ["medium--1", 2166136261, 1],
    ["medium-henley--3", 2166136261, 3],
    // Beyond uint32: not an index, the whole name is hashed (value computed independently).
    ["henley-99999999999", 494488668, 0],
  ];
  for (const [name, hash, index] of cases) {
    it(name, () => assert.deepEqual(claimNameHashAndIndex(name), { hash, index }));
  }
});

describe("nodeAffinityFromTopology", () => {
  it("no topology: no affinity", () => {
    assert.equal(nodeAffinityFromTopology(undefined), undefined);
    assert.equal(nodeAffinityFromTopology([]), undefined);
    assert.equal(nodeAffinityFromTopology([{ segments: {} }]), undefined);
  });

  it("one term per topology, one In requirement per segment", () => {
    assert.deepEqual(nodeAffinityFromTopology([zr("zone1", "rack2"), { segments: {} }, z("zone2")]), {
      required: {
        nodeSelectorTerms: [
          {
            matchExpressions: [
              { key: rack, operator: "In", values: ["rack2"] },
              { key: zone, operator: "In", values: ["zone1"] },
            ],
          },
          { matchExpressions: [{ key: zone, operator: "In", values: ["zone2"] }] },
        ],
      },
    });
  });
});
