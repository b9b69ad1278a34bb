// The resizer's decisions as tables: a claim, its PV and what the last round
// carried in; the steps (status patches, annotations, PV patches, CSI calls,
// Events, retries) out. Rows follow upstream's expand_and_recover_test.go and
// modify_volume_test.go cases.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { upstreamRetryInterval } from "../../shared/kube/retry-interval.ts";
import type {
  PersistentVolume,
  PersistentVolumeClaim,
  VolumeAttributesClass,
} from "../../shared/kube/types.ts";
import { annNodeExpansionNotRequired } from "../../shared/kube/well-known.ts";
import {
  annExpandFailures,
  annExpandInUse,
  annExpandRetryAfter,
  annExpandTarget,
  annModifyRetryAfter,
  annModifyTarget,
} from "../../shared/resizer/constants.ts";
import { planExpansion } from "../../shared/resizer/expand.ts";
import { planModification } from "../../shared/resizer/modify.ts";
import type { DriverAbilities, ResizerCarry, ResizerStep } from "../../shared/resizer/steps.ts";

const driverName = "hostpath.csi.k8s.io";
const now = new Date("2026-01-01T00:00:00Z");
const full: DriverAbilities = {
  controllerExpand: true,
  nodeExpand: true,
  modify: true,
  singleNodeMultiWriter: false,
};

interface ClaimOptions {
  request?: string;
  capacity?: string;
  allocated?: string;
  status?: string;
  conditions?: { type: string; status: string; reason?: string; message?: string }[];
  annotations?: Record<string, string>;
  vac?: string;
  currentVac?: string;
  modify?: { targetVolumeAttributesClassName?: string; status: "Pending" | "InProgress" | "Infeasible" };
}

function claim(o: ClaimOptions = {}): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: {
      name: "data",
      namespace: "ns",
      uid: "claim-uid",
      resourceVersion: "10",
      ...(o.annotations ? { annotations: o.annotations } : {}),
    },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: o.request ?? "2Gi" } },
      volumeName: "pv-1",
      ...(o.vac !== undefined ? { volumeAttributesClassName: o.vac } : {}),
    },
    status: {
      phase: "Bound",
      capacity: { storage: o.capacity ?? "1Gi" },
      ...(o.allocated ? { allocatedResources: { storage: o.allocated } } : {}),
      ...(o.status
        ? { allocatedResourceStatuses: { storage: o.status as "ControllerResizeInProgress" } }
        : {}),
      ...(o.conditions ? { conditions: o.conditions } : {}),
      ...(o.currentVac !== undefined ? { currentVolumeAttributesClassName: o.currentVac } : {}),
      ...(o.modify ? { modifyVolumeStatus: o.modify } : {}),
    },
  };
}

function volume(
  size = "1Gi",
  o: { driver?: string; uid?: string; vac?: string; block?: boolean } = {},
): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name: "pv-1", resourceVersion: "5" },
    spec: {
      capacity: { storage: size },
      accessModes: ["ReadWriteOnce"],
      claimRef: { namespace: "ns", name: "data", uid: o.uid ?? "claim-uid" },
      mountOptions: ["noatime"],
      ...(o.block ? { volumeMode: "Block" } : {}),
      ...(o.vac ? { volumeAttributesClassName: o.vac } : {}),
      csi: {
        driver: o.driver ?? driverName,
        volumeHandle: "vol-1",
        fsType: "ext4",
        controllerExpandSecretRef: { name: "expand", namespace: "secrets" },
      },
    },
  };
}

function expand(
  c: PersistentVolumeClaim,
  pv: PersistentVolume | undefined,
  extra: { carried?: ResizerCarry; abilities?: DriverAbilities; inUseBy?: string } = {},
) {
  return planExpansion({
    kind: "expand",
    driverName,
    abilities: extra.abilities ?? full,
    now,
    retryInterval: upstreamRetryInterval,
    claim: c,
    pv,
    ...(extra.inUseBy ? { inUseBy: extra.inUseBy } : {}),
    ...(extra.carried ? { carried: extra.carried } : {}),
  });
}

/** Steps with the claim objects of Events reduced to their reason and message. */
function brief(steps: readonly ResizerStep[]) {
  return steps.map((s) => {
    if (s.op === "event") return { op: s.op, type: s.type, reason: s.reason, message: s.message };
    if (s.op === "patch-claim-status") return { op: s.op, status: stripTimes(s.status) };
    return s;
  });
}

function stripTimes(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(stripTimes);
  if (value && typeof value === "object")
    return Object.fromEntries(
      Object.entries(value)
        .filter(([k]) => k !== "lastTransitionTime" && k !== "lastProbeTime")
        .map(([k, v]) => [k, stripTimes(v)]),
    );
  return value;
}

const resizing = { type: "Resizing", status: "True" };
const rpcError = (code: number, name: string, desc: string) => ({
  code,
  message: `rpc error: code = ${name} desc = ${desc}`,
  details: desc,
});

describe("expansion decisions", () => {
  const rows: {
    name: string;
    claim: PersistentVolumeClaim;
    pv?: PersistentVolume | "none";
    carried?: ResizerCarry;
    abilities?: DriverAbilities;
    inUseBy?: string;
    steps: unknown[];
    again?: boolean;
    outcome?: RegExp;
  }[] = [
    {
      name: "1-1 request above capacity: intent first (allocated, ControllerResizeInProgress, Resizing)",
      claim: claim(),
      steps: [
        {
          op: "patch-claim-status",
          status: {
            conditions: [resizing],
            allocatedResources: { storage: "2Gi" },
            allocatedResourceStatuses: { storage: "ControllerResizeInProgress" },
          },
        },
      ],
      again: true,
    },
    {
      name: "1-2 intent present: Event Resizing, then ControllerExpandVolume with the PV's capability and secret ref",
      claim: claim({ allocated: "2Gi", status: "ControllerResizeInProgress", conditions: [resizing] }),
      steps: [
        {
          op: "event",
          type: "Normal",
          reason: "Resizing",
          message: "External resizer is resizing volume pv-1",
        },
        {
          op: "expand-volume",
          target: "2Gi",
          request: {
            volumeId: "vol-1",
            capacityRange: { requiredBytes: 2n << 30n },
            volumeCapability: {
              mount: { fsType: "ext4", mountFlags: ["noatime"] },
              accessMode: { mode: "SINGLE_NODE_WRITER" },
            },
          },
          secretRef: { name: "expand", namespace: "secrets" },
        },
      ],
      again: true,
    },
    {
      name: "1-3 the node-expansion-not-required annotation of an earlier expansion goes with the intent",
      claim: claim({ annotations: { [annNodeExpansionNotRequired]: "true" } }),
      steps: [
        {
          op: "patch-claim-annotations",
          namespace: "ns",
          name: "data",
          annotations: { [annNodeExpansionNotRequired]: null },
          resourceVersion: "10",
        },
        {
          op: "patch-claim-status",
          status: {
            conditions: [resizing],
            allocatedResources: { storage: "2Gi" },
            allocatedResourceStatuses: { storage: "ControllerResizeInProgress" },
          },
        },
      ],
      again: true,
    },
    {
      name: "1-4 driver answered: PV capacity first (never the claim before the PV)",
      claim: claim({ allocated: "2Gi", status: "ControllerResizeInProgress", conditions: [resizing] }),
      carried: { kind: "resized", target: "2Gi", capacity: "2Gi", nodeExpansionRequired: false },
      steps: [
        {
          op: "patch-volume",
          name: "pv-1",
          resourceVersion: "5",
          spec: { capacity: { storage: "2Gi" } },
          carry: { kind: "resized", target: "2Gi", capacity: "2Gi", nodeExpansionRequired: false },
        },
      ],
      again: true,
    },
    {
      name: "1-5 PV done, no node expansion: capacity, conditions and storage status cleared, annotation, VolumeResizeSuccessful",
      claim: claim({
        allocated: "2Gi",
        status: "ControllerResizeInProgress",
        conditions: [resizing, { type: "Other", status: "True" }],
      }),
      pv: volume("2Gi"),
      carried: { kind: "resized", target: "2Gi", capacity: "2Gi", nodeExpansionRequired: false },
      steps: [
        {
          op: "patch-claim-annotations",
          namespace: "ns",
          name: "data",
          annotations: { [annNodeExpansionNotRequired]: "true" },
          resourceVersion: "10",
        },
        {
          op: "patch-claim-status",
          status: {
            capacity: { storage: "2Gi" },
            conditions: [{ type: "Other", status: "True" }],
            allocatedResourceStatuses: { storage: null },
          },
        },
        { op: "event", type: "Normal", reason: "VolumeResizeSuccessful", message: "Resize volume succeeded" },
      ],
    },
    {
      name: "1-6 PV done, node expansion required: FileSystemResizePending + NodeResizePending, capacity untouched",
      claim: claim({ allocated: "2Gi", status: "ControllerResizeInProgress", conditions: [resizing] }),
      pv: volume("2Gi"),
      carried: { kind: "resized", target: "2Gi", capacity: "2Gi", nodeExpansionRequired: true },
      steps: [
        {
          op: "patch-claim-status",
          status: {
            conditions: [
              resizing,
              {
                type: "FileSystemResizePending",
                status: "True",
                message:
                  "Waiting for user to (re-)start a pod to finish file system resize of volume on node.",
              },
            ],
            allocatedResourceStatuses: { storage: "NodeResizePending" },
          },
        },
        {
          op: "event",
          type: "Normal",
          reason: "FileSystemResizeRequired",
          message: "Require file system resize of volume on node",
        },
      ],
    },
    {
      // Found by the chaos run (issue 18): a duplicate sync's result landed after the kubelet had started.
      name: "1-6a a carried result another sync already recorded, the kubelet expanding: nothing",
      claim: claim({ request: "3Gi", capacity: "2Gi", allocated: "3Gi", status: "NodeResizeInProgress" }),
      pv: volume("3Gi"),
      carried: { kind: "resized", target: "3Gi", capacity: "3Gi", nodeExpansionRequired: true },
      steps: [],
      outcome: /already recorded/,
    },
    {
      name: "1-6b a carried result another sync already recorded as NodeResizePending: nothing",
      claim: claim({ allocated: "2Gi", status: "NodeResizePending" }),
      pv: volume("2Gi"),
      carried: { kind: "resized", target: "2Gi", capacity: "2Gi", nodeExpansionRequired: true },
      steps: [],
      outcome: /already recorded/,
    },
    {
      name: "1-6c a carried result for an expansion the kubelet has finished: nothing",
      claim: claim({ capacity: "2Gi", allocated: "2Gi" }),
      pv: volume("2Gi"),
      carried: { kind: "resized", target: "2Gi", capacity: "2Gi", nodeExpansionRequired: true },
      steps: [],
      outcome: /already recorded/,
    },
    {
      name: "1-7 NodeResizePending and PV at the target: nothing (the kubelet's turn)",
      claim: claim({ allocated: "2Gi", status: "NodeResizePending", conditions: [resizing] }),
      pv: volume("2Gi"),
      steps: [],
      outcome: /waiting for the node/,
    },
    {
      name: "1-8 request not above capacity: nothing",
      claim: claim({ request: "1Gi" }),
      steps: [],
      outcome: /no expansion requested/,
    },
    {
      name: "1-9 PV of another driver: nothing",
      claim: claim(),
      pv: volume("1Gi", { driver: "other.csi" }),
      steps: [],
      outcome: /not a CSI volume of/,
    },
    {
      name: "1-10 PV bound to another claim (uid): nothing",
      claim: claim(),
      pv: volume("1Gi", { uid: "someone-else" }),
      steps: [],
      outcome: /not bound to this claim/,
    },
    {
      name: "1-11 node-only driver: Resizing Event and the PV set without a CSI call; node expansion required",
      claim: claim({ allocated: "2Gi", status: "ControllerResizeInProgress", conditions: [resizing] }),
      abilities: { ...full, controllerExpand: false },
      steps: [
        {
          op: "event",
          type: "Normal",
          reason: "Resizing",
          message: "External resizer is resizing volume pv-1",
        },
        {
          op: "patch-volume",
          name: "pv-1",
          resourceVersion: "5",
          spec: { capacity: { storage: "2Gi" } },
          carry: { kind: "resized", target: "2Gi", capacity: "2Gi", nodeExpansionRequired: true },
        },
      ],
      again: true,
    },
    {
      name: "1-12 infeasible (OutOfRange): ControllerResizeInfeasible + ControllerResizeError (on the RV read: a merge patch replaces the conditions), slow backoff, Warning",
      claim: claim({ allocated: "2Gi", status: "ControllerResizeInProgress", conditions: [resizing] }),
      carried: { kind: "expand-failed", target: "2Gi", failure: rpcError(11, "OutOfRange", "too big") },
      steps: [
        {
          op: "patch-claim-status",
          status: {
            conditions: [
              resizing,
              {
                type: "ControllerResizeError",
                status: "True",
                message: "failed to expand pvc with rpc error: code = OutOfRange desc = too big",
              },
            ],
            allocatedResourceStatuses: { storage: "ControllerResizeInfeasible" },
          },
        },
        {
          op: "patch-claim-annotations",
          namespace: "ns",
          name: "data",
          annotations: {
            [annExpandFailures]: "1",
            [annExpandRetryAfter]: "2026-01-01T00:05:00Z",
            [annExpandTarget]: "2Gi",
            [annExpandInUse]: null,
          },
          resourceVersion: "10",
        },
        {
          op: "event",
          type: "Warning",
          reason: "VolumeResizeFailed",
          message:
            'resize volume "pv-1" by resizer "hostpath.csi.k8s.io" failed: rpc error: code = OutOfRange desc = too big',
        },
        {
          op: "retry-later",
          message:
            'resize volume "pv-1" by resizer "hostpath.csi.k8s.io" failed: rpc error: code = OutOfRange desc = too big',
          delaySeconds: 300,
        },
      ],
    },
    {
      name: "1-13 other final error (Internal): ControllerResizeError only, status kept, backoff 1 s",
      claim: claim({ allocated: "2Gi", status: "ControllerResizeInProgress", conditions: [resizing] }),
      carried: { kind: "expand-failed", target: "2Gi", failure: rpcError(13, "Internal", "boom") },
      steps: [
        {
          op: "patch-claim-status",
          status: {
            conditions: [
              resizing,
              {
                type: "ControllerResizeError",
                status: "True",
                message: "failed to expand pvc with rpc error: code = Internal desc = boom",
              },
            ],
          },
        },
        {
          op: "patch-claim-annotations",
          namespace: "ns",
          name: "data",
          annotations: {
            [annExpandFailures]: "1",
            [annExpandRetryAfter]: "2026-01-01T00:00:01Z",
            [annExpandTarget]: "2Gi",
            [annExpandInUse]: null,
          },
          resourceVersion: "10",
        },
        {
          op: "event",
          type: "Warning",
          reason: "VolumeResizeFailed",
          message:
            'resize volume "pv-1" by resizer "hostpath.csi.k8s.io" failed: rpc error: code = Internal desc = boom',
        },
        {
          op: "retry-later",
          message:
            'resize volume "pv-1" by resizer "hostpath.csi.k8s.io" failed: rpc error: code = Internal desc = boom',
          delaySeconds: 1,
        },
      ],
    },
    {
      name: "1-14 non-final error (Unavailable), third failure: no status write, backoff 4 s",
      claim: claim({
        allocated: "2Gi",
        status: "ControllerResizeInProgress",
        conditions: [resizing],
        annotations: { [annExpandFailures]: "2", [annExpandTarget]: "2Gi" },
      }),
      carried: { kind: "expand-failed", target: "2Gi", failure: rpcError(14, "Unavailable", "down") },
      steps: [
        {
          op: "patch-claim-annotations",
          namespace: "ns",
          name: "data",
          annotations: {
            [annExpandFailures]: "3",
            [annExpandRetryAfter]: "2026-01-01T00:00:04Z",
            [annExpandTarget]: "2Gi",
            [annExpandInUse]: null,
          },
          resourceVersion: "10",
        },
        {
          op: "event",
          type: "Warning",
          reason: "VolumeResizeFailed",
          message:
            'resize volume "pv-1" by resizer "hostpath.csi.k8s.io" failed: rpc error: code = Unavailable desc = down',
        },
        {
          op: "retry-later",
          message:
            'resize volume "pv-1" by resizer "hostpath.csi.k8s.io" failed: rpc error: code = Unavailable desc = down',
          delaySeconds: 4,
        },
      ],
    },
    {
      name: "1-15 infeasible and backing off at the same target: nothing, no call",
      claim: claim({
        allocated: "2Gi",
        status: "ControllerResizeInfeasible",
        conditions: [resizing, { type: "ControllerResizeError", status: "True" }],
        annotations: {
          [annExpandRetryAfter]: "2026-01-01T00:05:00Z",
          [annExpandTarget]: "2Gi",
          [annExpandFailures]: "1",
        },
      }),
      steps: [],
      outcome: /backing off until 2026-01-01T00:05:00Z/,
    },
    {
      name: "1-16 infeasible, request lowered (recovery): the new request is the target at once, old error conditions dropped",
      claim: claim({
        request: "1500Mi",
        allocated: "2Gi",
        status: "ControllerResizeInfeasible",
        conditions: [resizing, { type: "ControllerResizeError", status: "True" }],
        annotations: {
          [annExpandRetryAfter]: "2026-01-01T00:05:00Z",
          [annExpandTarget]: "2Gi",
          [annExpandFailures]: "1",
        },
      }),
      steps: [
        {
          op: "patch-claim-status",
          status: {
            conditions: [resizing],
            allocatedResources: { storage: "1500Mi" },
            allocatedResourceStatuses: { storage: "ControllerResizeInProgress" },
          },
        },
      ],
      again: true,
    },
    {
      name: "1-17 infeasible, backoff over, same target: retried without touching the status (stays Infeasible)",
      claim: claim({
        allocated: "2Gi",
        status: "ControllerResizeInfeasible",
        conditions: [resizing, { type: "ControllerResizeError", status: "True" }],
        annotations: {
          [annExpandRetryAfter]: "2025-12-31T23:00:00Z",
          [annExpandTarget]: "2Gi",
          [annExpandFailures]: "1",
        },
      }),
      steps: [
        {
          op: "event",
          type: "Normal",
          reason: "Resizing",
          message: "External resizer is resizing volume pv-1",
        },
        {
          op: "expand-volume",
          target: "2Gi",
          request: {
            volumeId: "vol-1",
            capacityRange: { requiredBytes: 2n << 30n },
            volumeCapability: {
              mount: { fsType: "ext4", mountFlags: ["noatime"] },
              accessMode: { mode: "SINGLE_NODE_WRITER" },
            },
          },
          secretRef: { name: "expand", namespace: "secrets" },
        },
      ],
      again: true,
    },
    {
      name: "1-18 ControllerResizeInProgress after a final error: the (raised) request becomes the target",
      claim: claim({
        request: "3Gi",
        allocated: "2Gi",
        status: "ControllerResizeInProgress",
        conditions: [resizing, { type: "ControllerResizeError", status: "True" }],
      }),
      steps: [
        {
          op: "patch-claim-status",
          status: {
            conditions: [resizing],
            allocatedResources: { storage: "3Gi" },
            allocatedResourceStatuses: { storage: "ControllerResizeInProgress" },
          },
        },
      ],
      again: true,
    },
    {
      name: "1-19 ControllerResizeInProgress without a final error: the allocated size stays the target (killed mid-call)",
      claim: claim({
        request: "3Gi",
        allocated: "2Gi",
        status: "ControllerResizeInProgress",
        conditions: [resizing],
      }),
      steps: [
        {
          op: "event",
          type: "Normal",
          reason: "Resizing",
          message: "External resizer is resizing volume pv-1",
        },
        {
          op: "expand-volume",
          target: "2Gi",
          request: {
            volumeId: "vol-1",
            capacityRange: { requiredBytes: 2n << 30n },
            volumeCapability: {
              mount: { fsType: "ext4", mountFlags: ["noatime"] },
              accessMode: { mode: "SINGLE_NODE_WRITER" },
            },
          },
          secretRef: { name: "expand", namespace: "secrets" },
        },
      ],
      again: true,
    },
    {
      name: "1-20 offline driver said FailedPrecondition and a pod uses the claim: upstream's Warning, backoff, no call",
      claim: claim({
        allocated: "2Gi",
        status: "ControllerResizeInProgress",
        conditions: [resizing, { type: "ControllerResizeError", status: "True" }],
        annotations: { [annExpandInUse]: "true", [annExpandFailures]: "1", [annExpandTarget]: "2Gi" },
      }),
      inUseBy: "app-0",
      steps: [
        {
          op: "patch-claim-annotations",
          namespace: "ns",
          name: "data",
          annotations: {
            [annExpandFailures]: "2",
            [annExpandRetryAfter]: "2026-01-01T00:00:02Z",
            [annExpandTarget]: "2Gi",
            [annExpandInUse]: "true",
          },
          resourceVersion: "10",
        },
        {
          op: "event",
          type: "Warning",
          reason: "VolumeResizeFailed",
          message:
            "Unable to expand ns/data because CSI driver hostpath.csi.k8s.io only supports offline expansion and volume is currently in-use",
        },
        {
          op: "retry-later",
          message:
            "Unable to expand ns/data because CSI driver hostpath.csi.k8s.io only supports offline expansion and volume is currently in-use",
          delaySeconds: 2,
        },
      ],
    },
    {
      name: "1-21 FailedPrecondition marks the claim in use (final: ControllerResizeError)",
      claim: claim({ allocated: "2Gi", status: "ControllerResizeInProgress", conditions: [resizing] }),
      carried: { kind: "expand-failed", target: "2Gi", failure: rpcError(9, "FailedPrecondition", "in use") },
      steps: [
        {
          op: "patch-claim-status",
          status: {
            conditions: [
              resizing,
              {
                type: "ControllerResizeError",
                status: "True",
                message: "failed to expand pvc with rpc error: code = FailedPrecondition desc = in use",
              },
            ],
          },
        },
        {
          op: "patch-claim-annotations",
          namespace: "ns",
          name: "data",
          annotations: {
            [annExpandFailures]: "1",
            [annExpandRetryAfter]: "2026-01-01T00:00:01Z",
            [annExpandTarget]: "2Gi",
            [annExpandInUse]: "true",
          },
          resourceVersion: "10",
        },
        {
          op: "event",
          type: "Warning",
          reason: "VolumeResizeFailed",
          message:
            'resize volume "pv-1" by resizer "hostpath.csi.k8s.io" failed: rpc error: code = FailedPrecondition desc = in use',
        },
        {
          op: "retry-later",
          message:
            'resize volume "pv-1" by resizer "hostpath.csi.k8s.io" failed: rpc error: code = FailedPrecondition desc = in use',
          delaySeconds: 1,
        },
      ],
    },
    {
      name: "1-22 block volume: block capability",
      claim: claim({ allocated: "2Gi", status: "ControllerResizeInProgress", conditions: [resizing] }),
      pv: volume("1Gi", { block: true }),
      steps: [
        {
          op: "event",
          type: "Normal",
          reason: "Resizing",
          message: "External resizer is resizing volume pv-1",
        },
        {
          op: "expand-volume",
          target: "2Gi",
          request: {
            volumeId: "vol-1",
            capacityRange: { requiredBytes: 2n << 30n },
            volumeCapability: { block: {}, accessMode: { mode: "SINGLE_NODE_WRITER" } },
          },
          secretRef: { name: "expand", namespace: "secrets" },
        },
      ],
      again: true,
    },
  ];

  for (const row of rows) {
    it(row.name, () => {
      const pv = row.pv === "none" ? undefined : (row.pv ?? volume());
      const plan = expand(row.claim, pv, {
        ...(row.carried ? { carried: row.carried } : {}),
        ...(row.abilities ? { abilities: row.abilities } : {}),
        ...(row.inUseBy ? { inUseBy: row.inUseBy } : {}),
      });
      assert.deepEqual(brief(plan.steps), row.steps, plan.outcome);
      assert.equal(plan.again ?? false, row.again ?? false);
      if (row.outcome) assert.match(plan.outcome, row.outcome);
    });
  }
});

const gold: VolumeAttributesClass = {
  apiVersion: "storage.k8s.io/v1",
  kind: "VolumeAttributesClass",
  metadata: { name: "gold" },
  driverName,
  parameters: { iops: "3000" },
};
const silver: VolumeAttributesClass = { ...gold, metadata: { name: "silver" }, parameters: { iops: "1000" } };

function modify(
  c: PersistentVolumeClaim,
  o: { carried?: ResizerCarry; pv?: PersistentVolume; classes?: VolumeAttributesClass[] } = {},
) {
  const classes = new Map((o.classes ?? [gold, silver]).map((v) => [v.metadata.name, v]));
  return planModification({
    kind: "modify",
    driverName,
    now,
    retryInterval: upstreamRetryInterval,
    claim: c,
    pv: o.pv ?? volume("1Gi", { vac: "silver" }),
    classes,
    extraModifyMetadata: false,
    ...(o.carried ? { carried: o.carried } : {}),
  });
}

describe("modification decisions", () => {
  const inProgress = {
    type: "ModifyingVolume",
    status: "True",
    message: 'Modifying volume to "gold" is in progress.',
  };
  const rows: {
    name: string;
    claim: PersistentVolumeClaim;
    carried?: ResizerCarry;
    classes?: VolumeAttributesClass[];
    pv?: PersistentVolume;
    steps: unknown[];
    again?: boolean;
    outcome?: RegExp;
  }[] = [
    {
      name: "2-1 spec equals current, no status: nothing",
      claim: claim({ request: "1Gi", vac: "silver", currentVac: "silver" }),
      steps: [],
      outcome: /is "silver"/,
    },
    {
      name: "2-2 spec changed: InProgress + target + ModifyingVolume (RV), Event VolumeModify",
      claim: claim({ request: "1Gi", vac: "gold", currentVac: "silver" }),
      steps: [
        {
          op: "patch-claim-status",
          status: {
            modifyVolumeStatus: { targetVolumeAttributesClassName: "gold", status: "InProgress" },
            conditions: [inProgress],
          },
        },
        {
          op: "event",
          type: "Normal",
          reason: "VolumeModify",
          message: "external resizer is modifying volume data with vac gold",
        },
      ],
      again: true,
    },
    {
      name: "2-3 intent written: ControllerModifyVolume with the class's parameters and the PV's expand secret ref",
      claim: claim({
        request: "1Gi",
        vac: "gold",
        currentVac: "silver",
        modify: { targetVolumeAttributesClassName: "gold", status: "InProgress" },
      }),
      carried: { kind: "modify-started", target: "gold" },
      steps: [
        {
          op: "modify-volume",
          target: "gold",
          volumeId: "vol-1",
          mutableParameters: { iops: "3000" },
          secretRef: { name: "expand", namespace: "secrets" },
        },
      ],
      again: true,
    },
    {
      name: "2-4 InProgress without a final error (killed, or uncertain): the old target is retried",
      claim: claim({
        request: "1Gi",
        vac: "silver",
        currentVac: "silver",
        modify: { targetVolumeAttributesClassName: "gold", status: "InProgress" },
      }),
      steps: [
        {
          op: "modify-volume",
          target: "gold",
          volumeId: "vol-1",
          mutableParameters: { iops: "3000" },
          secretRef: { name: "expand", namespace: "secrets" },
        },
      ],
      again: true,
    },
    {
      name: "2-5 driver answered: PV class first",
      claim: claim({
        request: "1Gi",
        vac: "gold",
        currentVac: "silver",
        modify: { targetVolumeAttributesClassName: "gold", status: "InProgress" },
      }),
      carried: { kind: "modified", target: "gold" },
      steps: [
        {
          op: "patch-volume",
          name: "pv-1",
          resourceVersion: "5",
          spec: { volumeAttributesClassName: "gold" },
          carry: { kind: "modified", target: "gold" },
        },
      ],
      again: true,
    },
    {
      name: "2-6 PV done: status cleared, current = target, modify conditions dropped, VolumeModifySuccessful",
      claim: claim({
        request: "1Gi",
        vac: "gold",
        currentVac: "silver",
        modify: { targetVolumeAttributesClassName: "gold", status: "InProgress" },
        conditions: [inProgress, { type: "Other", status: "True" }],
        annotations: { [annModifyTarget]: "gold", [annModifyRetryAfter]: "2025-01-01T00:00:00Z" },
      }),
      pv: volume("1Gi", { vac: "gold" }),
      carried: { kind: "modified", target: "gold" },
      steps: [
        {
          op: "patch-claim-annotations",
          namespace: "ns",
          name: "data",
          annotations: { [annModifyRetryAfter]: null, [annModifyTarget]: null },
          resourceVersion: "10",
        },
        {
          op: "patch-claim-status",
          status: {
            modifyVolumeStatus: null,
            currentVolumeAttributesClassName: "gold",
            conditions: [{ type: "Other", status: "True" }],
          },
        },
        {
          op: "event",
          type: "Normal",
          reason: "VolumeModifySuccessful",
          message: "external resizer modified volume data with vac gold successfully",
        },
      ],
    },
    {
      name: "2-7 InvalidArgument: Infeasible, ModifyingVolume 'failed. Waiting for retry.' + ModifyVolumeError, slow backoff, Warning",
      claim: claim({
        request: "1Gi",
        vac: "gold",
        currentVac: "silver",
        modify: { targetVolumeAttributesClassName: "gold", status: "InProgress" },
        conditions: [inProgress],
      }),
      carried: { kind: "modify-failed", target: "gold", failure: rpcError(3, "InvalidArgument", "bad iops") },
      steps: [
        {
          op: "patch-claim-status",
          status: {
            modifyVolumeStatus: { targetVolumeAttributesClassName: "gold", status: "Infeasible" },
            conditions: [
              {
                type: "ModifyingVolume",
                status: "True",
                message: 'Modifying volume to "gold" failed. Waiting for retry.',
              },
              { type: "ModifyVolumeError", status: "True", reason: "InvalidArgument", message: "bad iops" },
            ],
          },
        },
        {
          op: "patch-claim-annotations",
          namespace: "ns",
          name: "data",
          annotations: {
            "resizer.kube-storage-functions.io/modify-failures": "1",
            [annModifyRetryAfter]: "2026-01-01T00:05:00Z",
            [annModifyTarget]: "gold",
          },
          resourceVersion: "10",
        },
        {
          op: "event",
          type: "Warning",
          reason: "VolumeModifyFailed",
          message: "rpc error: code = InvalidArgument desc = bad iops",
        },
        {
          op: "retry-later",
          message: "rpc error: code = InvalidArgument desc = bad iops",
          delaySeconds: 300,
        },
      ],
    },
    {
      name: "2-8 Unavailable: stays InProgress, 'still in progress', Warning says Still modifying",
      claim: claim({
        request: "1Gi",
        vac: "gold",
        currentVac: "silver",
        modify: { targetVolumeAttributesClassName: "gold", status: "InProgress" },
        conditions: [inProgress],
      }),
      carried: { kind: "modify-failed", target: "gold", failure: rpcError(14, "Unavailable", "down") },
      steps: [
        {
          op: "patch-claim-status",
          status: {
            modifyVolumeStatus: { targetVolumeAttributesClassName: "gold", status: "InProgress" },
            conditions: [
              {
                type: "ModifyingVolume",
                status: "True",
                message: 'Modifying volume to "gold" is still in progress.',
              },
              { type: "ModifyVolumeError", status: "True", reason: "Unavailable", message: "down" },
            ],
          },
        },
        {
          op: "patch-claim-annotations",
          namespace: "ns",
          name: "data",
          annotations: {
            "resizer.kube-storage-functions.io/modify-failures": "1",
            [annModifyRetryAfter]: "2026-01-01T00:00:01Z",
            [annModifyTarget]: "gold",
          },
          resourceVersion: "10",
        },
        {
          op: "event",
          type: "Warning",
          reason: "VolumeModifyFailed",
          message: "rpc error: code = Unavailable desc = down. Still modifying to VAC gold",
        },
        {
          op: "retry-later",
          message: "rpc error: code = Unavailable desc = down. Still modifying to VAC gold",
          delaySeconds: 1,
        },
      ],
    },
    {
      name: "2-9 Infeasible and backing off at the same target: nothing",
      claim: claim({
        request: "1Gi",
        vac: "gold",
        currentVac: "silver",
        modify: { targetVolumeAttributesClassName: "gold", status: "Infeasible" },
        annotations: { [annModifyTarget]: "gold", [annModifyRetryAfter]: "2026-01-01T00:05:00Z" },
      }),
      steps: [],
      outcome: /backing off/,
    },
    {
      name: "2-10 rolled back after Infeasible: spec at the old class becomes the target at once",
      claim: claim({
        request: "1Gi",
        vac: "silver",
        currentVac: "silver",
        modify: { targetVolumeAttributesClassName: "gold", status: "Infeasible" },
        conditions: [
          { type: "ModifyingVolume", status: "True", message: "x" },
          { type: "ModifyVolumeError", status: "True", reason: "InvalidArgument", message: "bad" },
        ],
        annotations: { [annModifyTarget]: "gold", [annModifyRetryAfter]: "2026-01-01T00:05:00Z" },
      }),
      steps: [
        {
          op: "patch-claim-status",
          status: {
            modifyVolumeStatus: { targetVolumeAttributesClassName: "silver", status: "InProgress" },
            conditions: [
              { type: "ModifyVolumeError", status: "True", reason: "InvalidArgument", message: "bad" },
              {
                type: "ModifyingVolume",
                status: "True",
                message: 'Modifying volume to "silver" is in progress.',
              },
            ],
          },
        },
        {
          op: "event",
          type: "Normal",
          reason: "VolumeModify",
          message: "external resizer is modifying volume data with vac silver",
        },
      ],
      again: true,
    },
    {
      name: "2-11 class missing: Pending (target untouched), Warning VAC does not exist; no retry",
      claim: claim({ request: "1Gi", vac: "platinum", currentVac: "silver" }),
      steps: [
        {
          op: "patch-claim-status",
          status: { modifyVolumeStatus: { status: "Pending" } },
        },
        {
          op: "event",
          type: "Warning",
          reason: "VolumeModifyFailed",
          message: 'VAC "platinum" does not exist.',
        },
      ],
    },
    {
      name: "2-12 class still missing and already Pending: nothing (no Event storm)",
      claim: claim({ request: "1Gi", vac: "platinum", currentVac: "silver", modify: { status: "Pending" } }),
      steps: [],
      outcome: /waiting for VolumeAttributesClass platinum/,
    },
    {
      name: "2-13 PV of another driver: nothing",
      claim: claim({ request: "1Gi", vac: "gold", currentVac: "silver" }),
      pv: volume("1Gi", { driver: "other.csi" }),
      steps: [],
      outcome: /not a CSI volume/,
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const plan = modify(row.claim, {
        ...(row.carried ? { carried: row.carried } : {}),
        ...(row.pv ? { pv: row.pv } : {}),
        ...(row.classes ? { classes: row.classes } : {}),
      });
      assert.deepEqual(brief(plan.steps), row.steps, plan.outcome);
      assert.equal(plan.again ?? false, row.again ?? false);
      if (row.outcome) assert.match(plan.outcome, row.outcome);
    });
  }
});
