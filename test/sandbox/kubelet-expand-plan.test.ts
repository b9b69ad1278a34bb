// The sandbox kubelet's node expansion as tables: when it calls
// NodeExpandVolume (at mount time, online), and what the claim looks like
// after each of its writes (the patch applied with the sandbox API server's
// strategic merge, as the server applies it).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { applyStrategicMergePatch } from "../../sandbox/apiserver/strategic-merge.ts";
import {
  type ExpansionPlan,
  type ExpansionView,
  expandedMessage,
  expansionFailure,
  finishedPatch,
  inProgressPatch,
  mountTimeExpansion,
  onlineExpansion,
  readOnlyMessage,
} from "../../sandbox/kubelet/expand-plan.ts";
import type { ClaimResourceStatus, PersistentVolumeClaim } from "../../shared/kube/types.ts";

interface ClaimShape {
  request?: string;
  capacity?: string;
  status?: ClaimResourceStatus;
  allocated?: string;
  conditions?: { type: string; status?: string; message?: string }[];
  otherStatuses?: Record<string, ClaimResourceStatus>;
}

function claim(shape: ClaimShape): PersistentVolumeClaim {
  const statuses = { ...shape.otherStatuses, ...(shape.status ? { storage: shape.status } : {}) };
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name: "data", namespace: "default", uid: "claim-uid", resourceVersion: "42" },
    spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: shape.request ?? "2Gi" } } },
    status: {
      phase: "Bound",
      ...(shape.capacity ? { capacity: { storage: shape.capacity } } : {}),
      ...(shape.allocated ? { allocatedResources: { storage: shape.allocated } } : {}),
      ...(Object.keys(statuses).length > 0 ? { allocatedResourceStatuses: statuses } : {}),
      ...(shape.conditions ? { conditions: shape.conditions.map((c) => ({ status: "True", ...c })) } : {}),
    },
  };
}

/** What the resizer leaves for the node: PV grown, claim capacity not, NodeResizePending. */
const resizerLeft: ClaimShape = {
  capacity: "1Gi",
  allocated: "2Gi",
  status: "NodeResizePending",
  conditions: [{ type: "Resizing" }, { type: "FileSystemResizePending" }],
};

function view(c: ClaimShape, extra: Partial<ExpansionView> = {}): ExpansionView {
  return {
    nodeExpands: true,
    readonly: false,
    pvCapacity: "2Gi",
    claim: claim(c),
    hadFinalError: false,
    ...extra,
  };
}

const recoveryExpand: ExpansionPlan = {
  kind: "expand",
  oldSize: "1Gi",
  newSize: "2Gi",
  markInProgress: true,
  recordOnClaim: true,
  recovery: true,
  infeasibleOnFailure: false,
};

describe("mount-time expansion: the claim's capacity below the PV's", () => {
  const rows: { name: string; view: ExpansionView; plan: ExpansionPlan["kind"] | ExpansionPlan }[] = [
    {
      name: "NodeResizePending: mark in progress, expand, record",
      view: view(resizerLeft),
      plan: recoveryExpand,
    },
    {
      name: "NodeResizeInProgress (a kubelet stopped mid-way): expand again",
      view: view({ ...resizerLeft, status: "NodeResizeInProgress" }),
      plan: recoveryExpand,
    },
    {
      name: "the node plugin has no EXPAND_VOLUME: the resizer finishes it",
      view: view(resizerLeft, { nodeExpands: false }),
      plan: "none",
    },
    { name: "capacity already the PV's", view: view({ ...resizerLeft, capacity: "2Gi" }), plan: "none" },
    { name: "capacity above the PV's", view: view({ ...resizerLeft, capacity: "3Gi" }), plan: "none" },
    {
      name: "ControllerResizeInProgress: the controller is not done",
      view: view({ ...resizerLeft, status: "ControllerResizeInProgress" }),
      plan: "none",
    },
    {
      name: "ControllerResizeInfeasible",
      view: view({ ...resizerLeft, status: "ControllerResizeInfeasible" }),
      plan: "none",
    },
    {
      name: "NodeResizeInfeasible: never retried by the kubelet",
      view: view({ ...resizerLeft, status: "NodeResizeInfeasible" }),
      plan: "none",
    },
    {
      name: "allocatedResources without a status (recovery resizer, nothing for the node)",
      view: view({ capacity: "1Gi", allocated: "2Gi" }),
      plan: "none",
    },
    {
      name: "an old resizer (neither field): the legacy path, no in-progress mark, no failure writes",
      view: view({ capacity: "1Gi", conditions: [{ type: "FileSystemResizePending" }] }),
      plan: { ...recoveryExpand, markInProgress: false, recovery: false },
    },
    {
      name: "read-only volume: warned, not expanded",
      view: view(resizerLeft, { readonly: true }),
      plan: { kind: "read-only", newSize: "2Gi" },
    },
    {
      name: "an earlier final error and a request since moved: a new failure is infeasible",
      view: view({ ...resizerLeft, request: "3Gi" }, { hadFinalError: true }),
      plan: { ...recoveryExpand, infeasibleOnFailure: true },
    },
    {
      name: "an earlier final error, request unchanged: retried as before",
      view: view(resizerLeft, { hadFinalError: true }),
      plan: recoveryExpand,
    },
    {
      name: "a claim with no capacity and a PV with no capacity",
      view: view({ status: "NodeResizePending" }, { pvCapacity: undefined }),
      plan: "none",
    },
    {
      name: "an unparsable PV capacity is no reason to expand",
      view: view(resizerLeft, { pvCapacity: "two gigs" }),
      plan: "none",
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const plan = mountTimeExpansion(row.view);
      if (typeof row.plan === "string") assert.equal(plan.kind, row.plan, JSON.stringify(plan));
      else assert.deepEqual(plan, row.plan);
    });
  }
});

describe("online expansion: the PV grew past the size recorded at mount", () => {
  const rows: {
    name: string;
    view: Parameters<typeof onlineExpansion>[0];
    plan: ExpansionPlan["kind"] | ExpansionPlan;
  }[] = [
    {
      name: "recorded 1Gi, PV 2Gi, NodeResizePending: expand",
      view: { ...view(resizerLeft), recordedSize: "1Gi", inUseError: false },
      plan: recoveryExpand,
    },
    {
      name: "recorded size already the PV's",
      view: { ...view(resizerLeft), recordedSize: "2Gi", inUseError: false },
      plan: "none",
    },
    {
      name: "no recorded size (nothing mounted yet)",
      view: { ...view(resizerLeft), recordedSize: undefined, inUseError: false },
      plan: "none",
    },
    {
      name: "the driver said FailedPrecondition (offline only): not while mounted",
      view: { ...view(resizerLeft), recordedSize: "1Gi", inUseError: true },
      plan: "none",
    },
    {
      name: "no EXPAND_VOLUME on the node plugin",
      view: { ...view(resizerLeft, { nodeExpands: false }), recordedSize: "1Gi", inUseError: false },
      plan: "none",
    },
    {
      name: "another node already recorded the size (shared volume): expand here, write nothing",
      view: { ...view({ capacity: "2Gi", allocated: "2Gi" }), recordedSize: "1Gi", inUseError: false },
      plan: { ...recoveryExpand, markInProgress: false, recordOnClaim: false },
    },
    {
      name: "ControllerResizeInProgress while the PV already grew: wait",
      view: {
        ...view({ ...resizerLeft, status: "ControllerResizeInProgress" }),
        recordedSize: "1Gi",
        inUseError: false,
      },
      plan: "none",
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const plan = onlineExpansion(row.view);
      if (typeof row.plan === "string") assert.equal(plan.kind, row.plan, JSON.stringify(plan));
      else assert.deepEqual(plan, row.plan);
    });
  }
});

/** The claim after `patch`, as the API server applies it (null when nothing is written). */
function applied(before: PersistentVolumeClaim, patch: Record<string, unknown> | undefined) {
  if (!patch) return null;
  return applyStrategicMergePatch(
    before as unknown as Parameters<typeof applyStrategicMergePatch>[0],
    patch,
    "persistentvolumeclaims",
  ) as unknown as PersistentVolumeClaim;
}

describe("the claim after the kubelet's writes", () => {
  it("in progress: only the storage status changes, conditional on the resourceVersion read", () => {
    const before = claim(resizerLeft);
    const patch = inProgressPatch(before);
    assert.deepEqual(patch.metadata, { resourceVersion: "42" });
    const after = applied(before, patch)!;
    assert.deepEqual(after.status?.allocatedResourceStatuses, { storage: "NodeResizeInProgress" });
    assert.deepEqual(after.status?.conditions, before.status?.conditions);
    assert.deepEqual(after.status?.capacity, { storage: "1Gi" });
  });

  it("finished: capacity 2Gi, no storage status, no resize conditions, others kept", () => {
    const before = claim({
      ...resizerLeft,
      status: "NodeResizeInProgress",
      conditions: [
        { type: "Resizing" },
        { type: "FileSystemResizePending" },
        { type: "NodeResizeError", message: "failed to expand pvc with earlier" },
        { type: "ControllerResizeError", message: "old" },
        { type: "ModifyingVolume" },
      ],
    });
    const patch = finishedPatch(before, "2Gi");
    assert.deepEqual(patch.metadata, { resourceVersion: "42" });
    const after = applied(before, patch)!;
    assert.deepEqual(after.status?.capacity, { storage: "2Gi" });
    assert.equal(after.status?.allocatedResourceStatuses, undefined);
    assert.deepEqual(
      after.status?.conditions?.map((c) => c.type),
      ["ModifyingVolume"],
    );
    // allocatedResources stays, as upstream leaves it.
    assert.deepEqual(after.status?.allocatedResources, { storage: "2Gi" });
  });

  it("finished with another resource's status: only storage's goes", () => {
    const before = claim({
      ...resizerLeft,
      otherStatuses: { "example.com/iops": "ControllerResizeInProgress" },
    });
    const after = applied(before, finishedPatch(before, "2Gi"))!;
    assert.deepEqual(after.status?.allocatedResourceStatuses, {
      "example.com/iops": "ControllerResizeInProgress",
    });
  });

  const now = "2026-11-26T01:00:00Z";
  const inProgress = claim({ ...resizerLeft, status: "NodeResizeInProgress" });
  const plan = recoveryExpand as Extract<ExpansionPlan, { kind: "expand" }>;
  const failureRows: {
    name: string;
    code: string | undefined;
    plan?: Extract<ExpansionPlan, { kind: "expand" }>;
    before?: PersistentVolumeClaim;
    status: ClaimResourceStatus | undefined;
    condition: string | null;
    final: boolean;
    inUse?: boolean;
  }[] = [
    {
      name: "InvalidArgument: NodeResizeInfeasible and NodeResizeError",
      code: "InvalidArgument",
      status: "NodeResizeInfeasible",
      condition:
        "failed to expand pvc with Expander.NodeExpand failed to expand the volume rpc error: code = X desc = boom",
      final: true,
    },
    {
      name: "OutOfRange: infeasible",
      code: "OutOfRange",
      status: "NodeResizeInfeasible",
      condition: "",
      final: true,
    },
    {
      name: "NotFound: infeasible",
      code: "NotFound",
      status: "NodeResizeInfeasible",
      condition: "",
      final: true,
    },
    {
      name: "Internal: NodeResizeError only, status left NodeResizeInProgress and retried",
      code: "Internal",
      status: "NodeResizeInProgress",
      condition:
        "failed to expand pvc with Expander.NodeExpand failed to expand the volume: rpc error: code = X desc = boom",
      final: true,
    },
    {
      name: "Internal after the request moved: infeasible",
      code: "Internal",
      plan: { ...plan, infeasibleOnFailure: true },
      status: "NodeResizeInfeasible",
      condition: "",
      final: true,
    },
    {
      name: "FailedPrecondition: NodeResizeError, no online retry while mounted",
      code: "FailedPrecondition",
      status: "NodeResizeInProgress",
      condition: "",
      final: true,
      inUse: true,
    },
    {
      name: "Unavailable: not final, nothing written",
      code: "Unavailable",
      status: undefined,
      condition: null,
      final: false,
    },
    {
      name: "DeadlineExceeded: not final",
      code: "DeadlineExceeded",
      status: undefined,
      condition: null,
      final: false,
    },
    {
      name: "not a gRPC status: not final",
      code: undefined,
      status: undefined,
      condition: null,
      final: false,
    },
    {
      name: "legacy path (old resizer): nothing written",
      code: "Internal",
      plan: { ...plan, recovery: false },
      status: undefined,
      condition: null,
      final: true,
    },
    {
      name: "a NodeResizeError already True is kept as it is",
      code: "InvalidArgument",
      before: claim({
        ...resizerLeft,
        status: "NodeResizeInProgress",
        conditions: [
          { type: "FileSystemResizePending" },
          { type: "NodeResizeError", message: "failed to expand pvc with first" },
        ],
      }),
      status: "NodeResizeInfeasible",
      condition: "failed to expand pvc with first",
      final: true,
    },
  ];
  for (const row of failureRows) {
    it(`failure, ${row.name}`, () => {
      const before = row.before ?? inProgress;
      const failure = expansionFailure(
        row.plan ?? plan,
        before,
        row.code,
        "rpc error: code = X desc = boom",
        now,
      );
      assert.equal(failure.final, row.final);
      assert.equal(failure.inUse, row.inUse ?? false);
      const after = applied(before, failure.patch);
      if (row.condition === null) {
        assert.equal(after, null);
        return;
      }
      assert.ok(after);
      assert.equal(failure.patch?.metadata, undefined, "failure writes are not conditional, as upstream's");
      assert.equal(after.status?.allocatedResourceStatuses?.storage, row.status);
      const error = after.status?.conditions?.find((c) => c.type === "NodeResizeError");
      assert.equal(error?.status, "True");
      if (row.condition) assert.equal(error?.message, row.condition);
      // The resizer's conditions stay until the expansion succeeds.
      assert.ok(after.status?.conditions?.some((c) => c.type === "FileSystemResizePending"));
      assert.deepEqual(after.status?.capacity, { storage: "1Gi" });
    });
  }
});

describe("Event messages", () => {
  it("reads as upstream's", () => {
    assert.equal(
      expandedMessage("pv-1", "node-a"),
      'MountVolume.NodeExpandVolume succeeded for volume "pv-1" node-a',
    );
    assert.equal(
      readOnlyMessage("pv-1"),
      'MountVolume.NodeExpandVolume failed for volume "pv-1" requested read-only file system',
    );
  });
});
