// The capacity decisions as tables: a StorageClass, the driver's segments and
// GetCapacity answers, the managed objects that exist, and the writes that
// follow (upstream's pkg/capacity/capacity_test.go cases, in this project's
// shape); and how segments come from CSINodes and Nodes.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { CSINode, CSIStorageCapacity, Node, StorageClass } from "../../shared/kube/types.ts";
import { driverNameLabel, managedByLabel } from "../../shared/provisioner/capacity/constants.ts";
import {
  type CapacityAnswer,
  type CapacityOptions,
  type CapacityStep,
  planClassCapacity,
  planSweep,
} from "../../shared/provisioner/capacity/plan-capacity.ts";
import { type Segment, segmentId, segmentsOf } from "../../shared/provisioner/capacity/segments.ts";

const driver = "hostpath.csi.k8s.io";
const options: CapacityOptions = { driverName: driver, namespace: "storage", forImmediateBinding: false };
const GiB = 1024n ** 3n;

function storageClass(
  name: string,
  o: { provisioner?: string; mode?: string; deleting?: boolean } = {},
): StorageClass {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: { name, ...(o.deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}) },
    provisioner: o.provisioner ?? driver,
    parameters: { kind: "fast" },
    volumeBindingMode: o.mode ?? "WaitForFirstConsumer",
  };
}

function object(
  name: string,
  className: string,
  segment: Segment,
  capacity: string,
  maximumVolumeSize?: string,
): CSIStorageCapacity {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "CSIStorageCapacity",
    metadata: {
      name,
      namespace: "storage",
      uid: `uid-${name}`,
      resourceVersion: "3",
      labels: { [driverNameLabel]: driver, [managedByLabel]: "external-provisioner" },
    },
    storageClassName: className,
    nodeTopology: { matchLabels: { ...segment } },
    capacity,
    ...(maximumVolumeSize ? { maximumVolumeSize } : {}),
  };
}

const zoneA: Segment = { "topology.hostpath.csi/node": "a" };
const zoneB: Segment = { "topology.hostpath.csi/node": "b" };

function answers(entries: [Segment, CapacityAnswer][]): Map<string, CapacityAnswer> {
  return new Map(entries.map(([s, a]) => [segmentId(s), a]));
}

/** Steps in a comparable shape: op, object name or segment, capacity. */
function summary(steps: readonly CapacityStep[]): string[] {
  return steps.map((s) => {
    if (s.op === "delete-capacity") return `delete ${s.name} (${s.reason})`;
    const o = s.object;
    const max = o.maximumVolumeSize ? ` max ${o.maximumVolumeSize}` : "";
    const who = s.op === "create-capacity" ? o.metadata.generateName : o.metadata.name;
    return `${s.op === "create-capacity" ? "create" : "update"} ${who} ${JSON.stringify(o.nodeTopology?.matchLabels)} ${o.capacity}${max}`;
  });
}

interface Row {
  name: string;
  cls?: StorageClass;
  segments: Segment[];
  answers: [Segment, CapacityAnswer][];
  existing: CSIStorageCapacity[];
  opts?: Partial<CapacityOptions>;
  steps: string[];
  error?: RegExp;
}

const rows: Row[] = [
  {
    name: "a new class gets one object per segment, with maximumVolumeSize when the driver gives one",
    cls: storageClass("fast"),
    segments: [zoneA, zoneB],
    answers: [
      [zoneA, { available: 10n * GiB, maximum: 4n * GiB }],
      [zoneB, { available: 1000n }],
    ],
    existing: [],
    steps: [
      `create csisc- {"topology.hostpath.csi/node":"a"} 10Gi max 4Gi`,
      `create csisc- {"topology.hostpath.csi/node":"b"} 1000`,
    ],
  },
  {
    name: "unchanged capacity writes nothing",
    cls: storageClass("fast"),
    segments: [zoneA],
    answers: [[zoneA, { available: 10n * GiB }]],
    existing: [object("csisc-1", "fast", zoneA, "10Gi")],
    steps: [],
  },
  {
    name: "capacity that shrank is updated in place",
    cls: storageClass("fast"),
    segments: [zoneA],
    answers: [[zoneA, { available: 9n * GiB }]],
    existing: [object("csisc-1", "fast", zoneA, "10Gi")],
    steps: [`update csisc-1 {"topology.hostpath.csi/node":"a"} 9Gi`],
  },
  {
    name: "zero capacity is still written (upstream writes it, whatever its README says)",
    cls: storageClass("fast"),
    segments: [zoneA],
    answers: [[zoneA, { available: 0n }]],
    existing: [object("csisc-1", "fast", zoneA, "1Gi")],
    steps: [`update csisc-1 {"topology.hostpath.csi/node":"a"} 0`],
  },
  {
    name: "a segment that went away loses its object; duplicates are deleted",
    cls: storageClass("fast"),
    segments: [zoneA],
    answers: [[zoneA, { available: GiB }]],
    existing: [
      object("csisc-1", "fast", zoneA, "1Gi"),
      object("csisc-2", "fast", zoneA, "1Gi"),
      object("csisc-3", "fast", zoneB, "1Gi"),
    ],
    steps: ["delete csisc-2 (duplicate)", "delete csisc-3 (segment gone)"],
  },
  {
    name: "a GetCapacity error keeps that segment's object and is reported",
    cls: storageClass("fast"),
    segments: [zoneA, zoneB],
    answers: [
      [zoneA, { error: "rpc error: code = Unavailable" }],
      [zoneB, { available: GiB }],
    ],
    existing: [object("csisc-1", "fast", zoneA, "5Gi")],
    steps: [`create csisc- {"topology.hostpath.csi/node":"b"} 1Gi`],
    error: /GetCapacity for segment .*"a".*Unavailable/,
  },
  {
    name: "a deleted class loses every object",
    segments: [],
    answers: [],
    existing: [object("csisc-1", "fast", zoneA, "1Gi"), object("csisc-2", "fast", zoneB, "1Gi")],
    steps: ["delete csisc-1 (class not tracked)", "delete csisc-2 (class not tracked)"],
  },
  {
    name: "a class being deleted is no longer tracked",
    cls: storageClass("fast", { deleting: true }),
    segments: [zoneA],
    answers: [[zoneA, { available: GiB }]],
    existing: [object("csisc-1", "fast", zoneA, "1Gi")],
    steps: ["delete csisc-1 (class not tracked)"],
  },
  {
    name: "another driver's class is not tracked",
    cls: storageClass("other", { provisioner: "other.csi.example.com" }),
    segments: [zoneA],
    answers: [[zoneA, { available: GiB }]],
    existing: [],
    steps: [],
  },
  {
    name: "an Immediate class is skipped without --capacity-for-immediate-binding",
    cls: storageClass("now", { mode: "Immediate" }),
    segments: [zoneA],
    answers: [[zoneA, { available: GiB }]],
    existing: [object("csisc-1", "now", zoneA, "1Gi")],
    steps: ["delete csisc-1 (class not tracked)"],
  },
  {
    name: "an Immediate class is tracked with --capacity-for-immediate-binding",
    cls: storageClass("now", { mode: "Immediate" }),
    segments: [zoneA],
    answers: [[zoneA, { available: 2n * GiB }]],
    existing: [],
    opts: { forImmediateBinding: true },
    steps: [`create csisc- {"topology.hostpath.csi/node":"a"} 2Gi`],
  },
  {
    name: "a driver without topology keys has one object that matches every node",
    cls: storageClass("fast"),
    segments: [{}],
    answers: [[{}, { available: GiB }]],
    existing: [],
    steps: ["create csisc- {} 1Gi"],
  },
];

describe("capacity: one StorageClass", () => {
  for (const row of rows) {
    it(row.name, () => {
      const className = row.cls?.metadata.name ?? "fast";
      const plan = planClassCapacity(
        {
          className,
          ...(row.cls ? { storageClass: row.cls } : {}),
          segments: row.segments,
          answers: answers(row.answers),
          existing: row.existing,
        },
        { ...options, ...row.opts },
      );
      assert.deepEqual(summary(plan.steps), row.steps);
      if (row.error) assert.match(plan.error ?? "", row.error);
      else assert.equal(plan.error, undefined);
    });
  }

  it("creates carry upstream's labels, namespace and storageClassName, and the owner when one is set", () => {
    const owner = { apiVersion: "apps/v1", kind: "Deployment", name: "provisioner", uid: "u-1" };
    const plan = planClassCapacity(
      {
        className: "fast",
        storageClass: storageClass("fast"),
        segments: [zoneA],
        answers: answers([[zoneA, { available: GiB }]]),
        existing: [],
      },
      { ...options, owner },
    );
    const step = plan.steps[0];
    assert.ok(step && step.op === "create-capacity");
    assert.equal(step.object.metadata.namespace, "storage");
    assert.equal(step.object.storageClassName, "fast");
    assert.deepEqual(step.object.metadata.labels, {
      "csi.storage.k8s.io/drivername": driver,
      "csi.storage.k8s.io/managed-by": "external-provisioner",
    });
    assert.deepEqual(step.object.metadata.ownerReferences, [{ ...owner, controller: true }]);
  });

  it("an object without the owner gets it added (never removed)", () => {
    const owner = { apiVersion: "apps/v1", kind: "Deployment", name: "provisioner", uid: "u-1" };
    const plan = planClassCapacity(
      {
        className: "fast",
        storageClass: storageClass("fast"),
        segments: [zoneA],
        answers: answers([[zoneA, { available: GiB }]]),
        existing: [object("csisc-1", "fast", zoneA, "1Gi")],
      },
      { ...options, owner },
    );
    assert.deepEqual(summary(plan.steps), [`update csisc-1 {"topology.hostpath.csi/node":"a"} 1Gi`]);
  });
});

describe("capacity: the resync's sweep", () => {
  it("deletes objects of classes that are gone or no longer tracked, keeps the rest", () => {
    const plan = planSweep(
      [
        object("csisc-1", "fast", zoneA, "1Gi"),
        object("csisc-2", "gone", zoneA, "1Gi"),
        object("csisc-3", "now", zoneA, "1Gi"),
      ],
      [storageClass("fast"), storageClass("now", { mode: "Immediate" })],
      options,
    );
    assert.deepEqual(summary(plan.steps), [
      "delete csisc-2 (class not tracked)",
      "delete csisc-3 (class not tracked)",
    ]);
  });
});

describe("capacity: segments from CSINodes and Nodes", () => {
  const csiNode = (name: string, keys?: string[], driverName = driver): CSINode => ({
    apiVersion: "storage.k8s.io/v1",
    kind: "CSINode",
    metadata: { name },
    spec: { drivers: [{ name: driverName, nodeID: name, ...(keys ? { topologyKeys: keys } : {}) }] },
  });
  const node = (name: string, labels: Record<string, string>): Node => ({
    apiVersion: "v1",
    kind: "Node",
    metadata: { name, labels },
  });

  it("keys sorted, values from the Node; equal segments are one; incomplete nodes are left out", () => {
    const segments = segmentsOf(
      driver,
      [
        csiNode("n1", ["zone", "rack"]),
        csiNode("n2", ["rack", "zone"]),
        csiNode("n3", ["zone", "rack"]),
        csiNode("n4", ["zone"]),
        csiNode("n5", ["zone"], "other.csi"),
      ],
      [
        node("n1", { zone: "z1", rack: "r1" }),
        node("n2", { zone: "z1", rack: "r1" }),
        node("n3", { zone: "z2" }),
        node("n5", { zone: "z9" }),
      ],
    );
    assert.deepEqual(segments, [{ rack: "r1", zone: "z1" }]);
    assert.deepEqual(Object.keys(segments[0] ?? {}), ["rack", "zone"]);
  });

  it("a driver listed without keys gives the empty segment; no CSINode gives none", () => {
    assert.deepEqual(segmentsOf(driver, [csiNode("n1")], [node("n1", {})]), [{}]);
    assert.deepEqual(segmentsOf(driver, [], [node("n1", {})]), []);
  });
});
