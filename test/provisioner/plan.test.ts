// The provisioner's rounds as tables: a claim or PV, what this sync's
// earlier steps left (progress), and the plan the round decides: the steps
// in order (writes with the objects they write, Events with reason and
// message), the outcome, and whether it decides again. Then the protocols
// walked round by round, the test carrying each step's answer as the
// executors would, and cut after every step to show the next sync resumes.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Volume } from "../../shared/csi/types.ts";
import type { PersistentVolume, PersistentVolumeClaim, StorageClass } from "../../shared/kube/types.ts";
import {
  annSelectedNode,
  provisioningFinalizer,
  pvDeletionProtectionFinalizer,
} from "../../shared/kube/well-known.ts";
import type { ClaimState } from "../../shared/provisioner/claim-state.ts";
import {
  buildCreateVolumeRequest,
  planProvisioning,
  type RequestOutcome,
} from "../../shared/provisioner/create-volume-request.ts";
import { planClaimRound } from "../../shared/provisioner/plan-claim.ts";
import { planVolumeRound, type VolumeState } from "../../shared/provisioner/plan-volume.ts";
import type {
  CsiFailure,
  Needs,
  Progress,
  ProvisionerPlan,
  ProvisionerStep,
} from "../../shared/provisioner/steps.ts";

const driver = "hostpath.csi.k8s.io";
const now = new Date("2026-01-01T00:00:00Z");
const pvName = "pvc-uid-1";
const failures = "storage.kube-storage-functions.io/provisioning-failures";
const retryAfter = "storage.kube-storage-functions.io/provisioning-retry-after";

function claim(
  o: {
    finalizers?: string[];
    annotations?: Record<string, string>;
    deleting?: boolean;
    source?: boolean;
  } = {},
): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: {
      name: "data",
      namespace: "ns",
      uid: "uid-1",
      resourceVersion: "7",
      // Made a minute before `now`: slow enough for the progress Event unless a test says otherwise.
      creationTimestamp: "2025-12-31T23:59:00Z",
      annotations: { "volume.kubernetes.io/storage-provisioner": driver, ...o.annotations },
      ...(o.finalizers ? { finalizers: o.finalizers } : {}),
      ...(o.deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}),
    },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: "1Gi" } },
      storageClassName: "fast",
      ...(o.source ? { dataSource: { kind: "PersistentVolumeClaim", name: "origin" } } : {}),
    },
    status: { phase: "Pending" },
  };
}

const intent = { finalizers: [provisioningFinalizer] };

function storageClass(reclaimPolicy = "Delete"): StorageClass {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: { name: "fast" },
    provisioner: driver,
    reclaimPolicy,
    volumeBindingMode: "Immediate",
  };
}

function ready(c: PersistentVolumeClaim, cls: StorageClass, selectedNode?: string): RequestOutcome {
  const plan = planProvisioning(c, cls, pvName, { defaultFsType: "ext4" });
  assert.ok(plan.ok);
  const request = buildCreateVolumeRequest({
    claim: c,
    storageClass: cls,
    pvName,
    plan: plan.value,
    options: { extraCreateMetadata: false },
    supportsSingleNodeMultiWriter: false,
    secrets: undefined,
    accessibility: undefined,
    contentSource: undefined,
  });
  assert.ok(request.ok);
  return { kind: "ready", request: request.value, plan: plan.value, selectedNode };
}

const created: Volume = {
  volumeId: "vol-1",
  capacityBytes: 1n << 30n,
  volumeContext: {},
  accessibleTopology: [],
};

function state(
  c: PersistentVolumeClaim,
  o: {
    cls?: StorageClass | null;
    progress?: Progress;
    request?: RequestOutcome | "ready";
    current?: ClaimState["current"];
    sourceClaims?: PersistentVolumeClaim[];
    at?: Date;
  } = {},
): ClaimState {
  const cls = o.cls === null ? undefined : (o.cls ?? storageClass());
  const request =
    o.request === "ready" && cls ? ready(c, cls) : o.request === "ready" ? undefined : o.request;
  return {
    claim: c,
    pvName: { ok: true, value: pvName },
    storageClass: cls,
    existingVolume: undefined,
    now: o.at ?? now,
    driverName: driver,
    identity: "id-1",
    progress: o.progress ?? {},
    startedAt: 100,
    ...(request ? { request } : {}),
    ...(o.current ? { current: o.current } : {}),
    ...(o.sourceClaims ? { sourceClaims: o.sourceClaims } : {}),
  };
}

function failure(errorClass: CsiFailure["errorClass"], alreadyExists = false): CsiFailure {
  const text = `rpc error: code = ${alreadyExists ? "AlreadyExists" : "Internal"} desc = boom`;
  return { errorClass, alreadyExists, text, error: new Error(text) };
}

/** A plan's steps, each as its op and what it says: the finalizers and annotations a claim write leaves, an Event's text. */
function summary(round: ProvisionerPlan | Needs): unknown {
  if ("needs" in round) return { needs: round.needs };
  const steps = round.steps.map((s: ProvisionerStep) => {
    switch (s.op) {
      case "event":
        return `event ${s.type} ${s.reason}: ${s.message}`;
      case "add-intent-finalizer":
      case "write-claim": {
        const a = s.claim.metadata.annotations ?? {};
        const kept = [failures, retryAfter, annSelectedNode].filter((k) => a[k] !== undefined);
        return `${s.op} finalizers=${(s.claim.metadata.finalizers ?? []).join(",")} annotations=${kept.map((k) => `${k.split("/")[1]}=${a[k]}`).join(",")}`;
      }
      case "write-volume":
        return `write-volume finalizers=${(s.volume.metadata.finalizers ?? []).join(",")}`;
      case "count":
        return `count ${s.metric}${s.since !== undefined ? " timed" : ""}`;
      case "create-volume":
        return `create-volume ${s.request.name}${s.nodeSelected ? " on a selected node" : ""}`;
      case "create-pv":
        return `create-pv ${s.volume.metadata.name} for ${s.volume.spec.claimRef?.uid}`;
      case "delete-volume":
      case "take-back-volume":
        return `${s.op} ${s.volumeId}`;
      case "retry-later":
        return `retry-later: ${s.message}`;
      case "throw":
        return `throw: ${s.error instanceof Error ? s.error.message : String(s.error)}`;
      default:
        return s.op;
    }
  });
  return {
    steps,
    outcome: round.outcome,
    ...(round.error !== undefined ? { error: round.error } : {}),
    ...(round.again ? { again: true } : {}),
  };
}

const failed = (text: string) =>
  `event Warning ProvisioningFailed: failed to provision volume with StorageClass "fast": ${text}`;
const boom = "rpc error: code = Internal desc = boom";

describe("claim rounds", () => {
  const rows: { name: string; state: ClaimState; want: unknown }[] = [
    {
      name: "a claim handed over without intent: the finalizer first, then decide again",
      state: state(claim()),
      want: {
        steps: [`add-intent-finalizer finalizers=${provisioningFinalizer} annotations=`],
        outcome: "recorded the provisioning intent",
        again: true,
      },
    },
    {
      name: "a slow claim with intent: the progress Event, then decide again",
      state: state(claim(intent)),
      want: {
        steps: ['event Normal Provisioning: External provisioner is provisioning volume for claim "ns/data"'],
        outcome: "provisioning",
        again: true,
      },
    },
    {
      name: "a fast claim needs no progress Event: the request is read",
      state: state(claim(intent), { at: new Date("2025-12-31T23:59:01Z") }),
      want: { needs: "request" },
    },
    {
      name: "announced, request ready: CreateVolume",
      state: state(claim(intent), { progress: { announced: true }, request: "ready" }),
      want: { steps: [`create-volume ${pvName}`], outcome: `creating volume ${pvName}`, again: true },
    },
    {
      name: "a clone: its source protected before CreateVolume",
      state: state(claim({ ...intent, source: true }), { progress: { announced: true }, request: "ready" }),
      want: {
        steps: ["protect-source", `create-volume ${pvName}`],
        outcome: `creating volume ${pvName}`,
        again: true,
      },
    },
    {
      name: "the request cannot be built: Warning, backoff, intent dropped, counted",
      state: state(claim(intent), {
        progress: { announced: true },
        request: { kind: "error", error: "bad" },
      }),
      want: {
        steps: [
          failed("bad"),
          `write-claim finalizers= annotations=provisioning-failures=1,provisioning-retry-after=2026-01-01T00:00:01Z`,
          "count provisionFailed",
        ],
        outcome: "provisioning failed",
        error: "bad",
      },
    },
    {
      name: "the selected node is gone: Warning, selected-node and intent dropped, counted",
      state: state(claim({ ...intent, annotations: { [annSelectedNode]: "n1" } }), {
        progress: { announced: true },
        request: { kind: "reschedule", error: 'nodes "n1" not found' },
      }),
      want: {
        steps: [
          failed('nodes "n1" not found'),
          "write-claim finalizers= annotations=",
          "count provisionFailed",
        ],
        outcome: "rescheduled",
        error: 'nodes "n1" not found',
      },
    },
    {
      name: "an external populator fills the claim: its Event only",
      state: state(claim(intent), {
        progress: { announced: true },
        request: {
          kind: "populator",
          reason: "not ours",
          event: { reason: "Provisioning", message: "populator" },
        },
      }),
      want: { steps: ["event Normal Provisioning: populator"], outcome: "not ours" },
    },
    {
      name: "CreateVolume answered: the PV that records it",
      state: state(claim(intent), { progress: { created }, request: "ready" }),
      want: { steps: [`create-pv ${pvName} for uid-1`], outcome: `recording volume ${pvName}`, again: true },
    },
    {
      name: "CreateVolume made a smaller volume: given back first",
      state: state(claim(intent), {
        progress: { created: { ...created, capacityBytes: 1n } },
        request: "ready",
      }),
      want: { steps: ["delete-volume vol-1"], outcome: "giving back volume vol-1", again: true },
    },
    {
      name: "the small volume given back: the claim fails and backs off",
      state: state(claim(intent), {
        progress: { created: { ...created, capacityBytes: 1n }, volumeDeleted: true },
        request: "ready",
      }),
      want: {
        steps: [
          failed("created volume capacity 1 less than requested capacity 1073741824"),
          "write-claim finalizers= annotations=provisioning-failures=1,provisioning-retry-after=2026-01-01T00:00:01Z",
        ],
        outcome: "provisioning failed",
        error: "created volume capacity 1 less than requested capacity 1073741824",
      },
    },
    {
      name: "PV saved: success Event, counted with its duration",
      state: state(claim(intent), { progress: { created, saved: true }, request: "ready" }),
      want: {
        steps: [
          `event Normal ProvisioningSucceeded: Successfully provisioned volume ${pvName}`,
          "count provisionTotal timed",
        ],
        outcome: `provisioned volume ${pvName}`,
      },
    },
    {
      name: "a clone's PV saved: the namespace's claims are read, to know whether its source may go",
      state: state(claim({ ...intent, source: true }), {
        progress: { created, saved: true },
        request: "ready",
      }),
      want: { needs: "source-claims" },
    },
    {
      name: "a clone's PV saved while another clone of the source is pending: the source stays protected",
      state: state(claim({ ...intent, source: true }), {
        progress: { created, saved: true },
        request: "ready",
        sourceClaims: [
          {
            ...claim({ ...intent, source: true }),
            metadata: { ...claim().metadata, uid: "uid-2", finalizers: [provisioningFinalizer] },
          },
        ],
      }),
      want: {
        steps: [
          `event Normal ProvisioningSucceeded: Successfully provisioned volume ${pvName}`,
          "count provisionTotal timed",
        ],
        outcome: `provisioned volume ${pvName}`,
      },
    },
    {
      name: "PV saved after failures: the backoff annotations go too; a clone's source is released first",
      state: state(claim({ ...intent, source: true, annotations: { [failures]: "2", [retryAfter]: "x" } }), {
        progress: { created, saved: true },
        request: "ready",
        sourceClaims: [claim({ ...intent, source: true })],
      }),
      want: {
        steps: [
          "release-source",
          `event Normal ProvisioningSucceeded: Successfully provisioned volume ${pvName}`,
          "count provisionTotal timed",
          `write-claim finalizers=${provisioningFinalizer} annotations=`,
        ],
        outcome: `provisioned volume ${pvName}`,
      },
    },
    {
      name: "a PV of that name records this claim already: success",
      state: state(claim(intent), {
        progress: { created, found: { spec: { claimRef: { uid: "uid-1" } } } as PersistentVolume },
        request: "ready",
      }),
      want: {
        steps: [
          `event Normal ProvisioningSucceeded: Successfully provisioned volume ${pvName}`,
          "count provisionTotal timed",
        ],
        outcome: `provisioned volume ${pvName}`,
      },
    },
    {
      name: "the PV save failed: the claim is read again",
      state: state(claim(intent), { progress: { created, saveFailed: new Error("503") }, request: "ready" }),
      want: { needs: "current-claim" },
    },
    {
      name: "the PV save failed, the claim still holds the intent: the error, the volume left for the next sync",
      state: state(claim(intent), {
        progress: { created, saveFailed: new Error("503") },
        request: "ready",
        current: { claim: claim(intent) },
      }),
      want: { steps: ["throw: 503"], outcome: "PV not saved" },
    },
    {
      name: "the PV save failed and the claim is gone: the volume is taken back, then the error",
      state: state(claim(intent), {
        progress: { created, saveFailed: new Error("503") },
        request: "ready",
        current: { claim: undefined },
      }),
      want: { steps: ["take-back-volume vol-1", "throw: 503"], outcome: "PV not saved; volume taken back" },
    },
    {
      // Found by the chaos run (issue 18): a duplicate sync's save failed (an injected 500) after another
      // sync had saved the PV and bound the claim; taking the volume back deleted a Bound PV's data.
      name: "the PV save failed but the claim is bound to that PV (another sync saved it): nothing, the volume stays",
      state: state(claim(intent), {
        progress: { created, saveFailed: new Error("503") },
        request: "ready",
        current: { claim: { ...claim(), spec: { ...claim().spec, volumeName: pvName } } },
      }),
      want: { steps: [], outcome: `PV ${pvName} saved by another sync` },
    },
    {
      // The window the row above leaves: the PV saved by another sync, the intent released because the PV
      // records the volume, the claim not bound yet. The PV read with the claim says the volume is in use.
      name: "the PV save failed, the intent released, not yet bound, but a PV of that name records the volume: nothing",
      state: state(claim(intent), {
        progress: { created, saveFailed: new Error("503") },
        request: "ready",
        current: {
          claim: claim(),
          volume: {
            apiVersion: "v1",
            kind: "PersistentVolume",
            metadata: { name: pvName },
            spec: { csi: { driver: "hostpath.csi.k8s.io", volumeHandle: "vol-1" } },
          },
        },
      }),
      want: { steps: [], outcome: `PV ${pvName} records the volume: saved by another sync` },
    },
    {
      name: "the PV save failed, a PV of that name records another volume, the claim holds nothing: taken back",
      state: state(claim(intent), {
        progress: { created, saveFailed: new Error("503") },
        request: "ready",
        current: {
          claim: claim(),
          volume: {
            apiVersion: "v1",
            kind: "PersistentVolume",
            metadata: { name: pvName },
            spec: { csi: { driver: "hostpath.csi.k8s.io", volumeHandle: "vol-other" } },
          },
        },
      }),
      want: { steps: ["take-back-volume vol-1", "throw: 503"], outcome: "PV not saved; volume taken back" },
    },
    {
      name: "a PV of that name belongs to another claim, which is gone too: taken back",
      state: state(claim(intent), {
        progress: { created, found: { spec: { claimRef: { uid: "other" } } } as PersistentVolume },
        request: "ready",
        current: { claim: claim() },
      }),
      want: {
        steps: [
          "take-back-volume vol-1",
          `throw: PersistentVolume ${pvName} exists and belongs to another claim`,
        ],
        outcome: "PV not saved; volume taken back",
      },
    },
    {
      name: "CreateVolume may still run: counted, Warning, retry later with the intent kept",
      state: state(claim(intent), { progress: { createFailed: failure("in-progress") }, request: "ready" }),
      want: {
        steps: [
          "count provisionFailed",
          failed(boom),
          `retry-later: CreateVolume for claim ns/data is still in progress: ${boom}`,
        ],
        outcome: "CreateVolume in progress",
      },
    },
    {
      name: "CreateVolume infeasible: the longest backoff",
      state: state(claim({ ...intent, source: true }), {
        progress: { createFailed: failure("infeasible") },
        request: "ready",
        sourceClaims: [],
      }),
      want: {
        steps: [
          "count provisionFailed",
          "event Warning ProvisioningFailed: Volume provisioning failed with infeasible error. Retries will be delayed.",
          "write-claim finalizers= annotations=provisioning-failures=1,provisioning-retry-after=2026-01-01T00:05:00Z",
          "release-source",
        ],
        outcome: "provisioning failed (infeasible)",
        error: boom,
      },
    },
    {
      name: "CreateVolume ALREADY_EXISTS: backoff, but the intent stays",
      state: state(claim({ ...intent, annotations: { [failures]: "3" } }), {
        progress: { createFailed: failure("final", true) },
        request: "ready",
      }),
      want: {
        steps: [
          "count provisionFailed",
          failed("rpc error: code = AlreadyExists desc = boom"),
          `write-claim finalizers=${provisioningFinalizer} annotations=provisioning-failures=4,provisioning-retry-after=2026-01-01T00:00:08Z`,
        ],
        outcome: "provisioning failed",
        error: "rpc error: code = AlreadyExists desc = boom",
      },
    },
    {
      name: "CreateVolume exhausted on the selected node: rescheduled",
      state: state(claim({ ...intent, annotations: { [annSelectedNode]: "n1" } }), {
        progress: { createFailed: failure("reschedule") },
        request: "ready",
      }),
      want: {
        steps: ["count provisionFailed", failed(boom), "write-claim finalizers= annotations="],
        outcome: "rescheduled",
        error: boom,
      },
    },
    {
      name: "a deleted claim with intent: CreateVolume by name, to learn the volume",
      state: state(claim({ ...intent, deleting: true }), { request: "ready" }),
      want: {
        steps: [`create-volume ${pvName}`],
        outcome: `asking the driver for volume ${pvName} to clean it up`,
        again: true,
      },
    },
    {
      name: "cleanup of a Delete class: DeleteVolume",
      state: state(claim({ ...intent, deleting: true }), { request: "ready", progress: { created } }),
      want: { steps: ["delete-volume vol-1"], outcome: "deleting unused volume vol-1", again: true },
    },
    {
      name: "cleanup deleted the volume: the intent goes",
      state: state(claim({ ...intent, deleting: true }), {
        request: "ready",
        progress: { created, volumeDeleted: true },
      }),
      want: {
        steps: ["write-claim finalizers= annotations="],
        outcome: "deleted unused volume vol-1 (claim is being deleted)",
      },
    },
    {
      name: "cleanup of a Retain class: the volume is recorded in a PV, then the intent goes",
      state: state(claim({ ...intent, deleting: true }), {
        cls: storageClass("Retain"),
        request: "ready",
        progress: { created },
      }),
      want: {
        steps: [`create-pv ${pvName} for uid-1`],
        outcome: `recording retained volume ${pvName}`,
        again: true,
      },
    },
    {
      name: "cleanup: the driver says no such volume can be made: nothing to clean up",
      state: state(claim({ ...intent, deleting: true }), {
        request: "ready",
        progress: { createFailed: failure("final") },
      }),
      want: {
        steps: ["write-claim finalizers= annotations="],
        outcome: "no volume to clean up (claim is being deleted)",
      },
    },
    {
      name: "cleanup: ALREADY_EXISTS is no answer; retry later",
      state: state(claim({ ...intent, deleting: true }), {
        request: "ready",
        progress: { createFailed: failure("final", true) },
      }),
      want: {
        steps: [`retry-later: cleanup of ${pvName}: rpc error: code = AlreadyExists desc = boom`],
        outcome: "cleanup waits for the driver",
      },
    },
    {
      name: "cleanup with the class gone: blocked, said on the claim",
      state: state(claim({ ...intent, deleting: true }), { cls: null }),
      want: {
        steps: [
          `event Warning ProvisioningFailed: cannot clean up a possible volume ${pvName}: StorageClass "fast" is gone; remove finalizer ${provisioningFinalizer} by hand once the volume is checked`,
        ],
        outcome: "cleanup blocked",
        error: `cannot clean up a possible volume ${pvName}: StorageClass "fast" is gone; remove finalizer ${provisioningFinalizer} by hand once the volume is checked`,
      },
    },
    {
      name: "in backoff: nothing",
      state: state(claim({ ...intent, annotations: { [retryAfter]: "2026-01-01T00:01:00Z" } })),
      want: { steps: [], outcome: "backing off until 2026-01-01T00:01:00Z" },
    },
  ];
  for (const row of rows) {
    it(row.name, () => assert.deepEqual(summary(planClaimRound(row.state)), row.want));
  }
});

function volume(o: { phase?: string; finalizers?: string[]; deleting?: boolean } = {}): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: {
      name: pvName,
      uid: "pv-uid",
      annotations: { "pv.kubernetes.io/provisioned-by": driver },
      finalizers: o.finalizers ?? [pvDeletionProtectionFinalizer],
      ...(o.deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}),
    },
    spec: {
      capacity: { storage: "1Gi" },
      persistentVolumeReclaimPolicy: "Delete",
      storageClassName: "fast",
      csi: { driver, volumeHandle: "vol-1" },
    },
    status: { phase: o.phase ?? "Released" },
  };
}

function volumeState(v: PersistentVolume, o: Partial<VolumeState> = {}): VolumeState {
  return {
    volume: v,
    driverName: driver,
    driverPublishes: false,
    attachments: [],
    progress: {},
    startedAt: 5,
    ...o,
  };
}

describe("volume rounds", () => {
  const rows: { name: string; state: VolumeState; want: unknown }[] = [
    {
      name: "released: the deletion Secret is read first",
      state: volumeState(volume()),
      want: { needs: "secrets" },
    },
    {
      name: "released, no Secret named: DeleteVolume",
      state: volumeState(volume(), { secrets: { ok: true, value: undefined } }),
      want: { steps: ["delete-volume vol-1"], outcome: "deleting volume vol-1", again: true },
    },
    {
      name: "the Secret is missing: Warning on the PV, counted",
      state: volumeState(volume(), { secrets: { ok: false, error: "no secret" } }),
      want: {
        steps: ["event Warning VolumeFailedDelete: no secret", "count deleteFailed"],
        outcome: "delete failed",
        error: "no secret",
      },
    },
    {
      name: "DeleteVolume may still run: Warning, counted, retry later",
      state: volumeState(volume(), {
        secrets: { ok: true, value: undefined },
        progress: { deleteFailed: failure("in-progress") },
      }),
      want: {
        steps: [
          `event Warning VolumeFailedDelete: ${boom}`,
          "count deleteFailed",
          `retry-later: DeleteVolume for volume ${pvName}: ${boom}`,
        ],
        outcome: "delete failed",
        error: boom,
      },
    },
    {
      name: "DeleteVolume failed for good: Warning, counted",
      state: volumeState(volume(), {
        secrets: { ok: true, value: undefined },
        progress: { deleteFailed: failure("final") },
      }),
      want: {
        steps: [`event Warning VolumeFailedDelete: ${boom}`, "count deleteFailed"],
        outcome: "delete failed",
        error: boom,
      },
    },
    {
      name: "the backing volume is gone: our finalizer goes, then the PV object (no race with pv-protection)",
      state: volumeState(volume(), {
        secrets: { ok: true, value: undefined },
        progress: { volumeDeleted: true },
      }),
      want: {
        steps: ["write-volume finalizers=", "delete-pv"],
        outcome: `deleting PV ${pvName}`,
        again: true,
      },
    },
    {
      name: "the backing volume is gone, the PV without our finalizer: the PV object next",
      state: volumeState(volume({ finalizers: ["kubernetes.io/pv-protection"] }), {
        secrets: { ok: true, value: undefined },
        progress: { volumeDeleted: true },
      }),
      want: { steps: ["delete-pv"], outcome: `deleting PV ${pvName}`, again: true },
    },
    {
      name: "the PV object is deleted but still held by our finalizer (deleted by someone else first): it goes, counted",
      state: volumeState(volume(), {
        secrets: { ok: true, value: undefined },
        progress: { volumeDeleted: true, pvDeleted: { remaining: volume({ deleting: true }) } },
      }),
      want: {
        steps: ["write-volume finalizers=", "count deleteTotal timed"],
        outcome: "deleted volume vol-1",
      },
    },
    {
      name: "the PV object is gone at once: counted",
      state: volumeState(volume(), {
        secrets: { ok: true, value: undefined },
        progress: { volumeDeleted: true, pvDeleted: { remaining: undefined } },
      }),
      want: { steps: ["count deleteTotal timed"], outcome: "deleted volume vol-1" },
    },
    {
      name: "a bound PV without our finalizer gets it",
      state: volumeState(volume({ phase: "Bound", finalizers: [] })),
      want: {
        steps: [`write-volume finalizers=${pvDeletionProtectionFinalizer}`],
        outcome: "added finalizer",
      },
    },
  ];
  for (const row of rows) {
    it(row.name, () => assert.deepEqual(summary(planVolumeRound(row.state)), row.want));
  }
});

/** Lays what a step carried over the state, as the loader does for the next round. */
function advance(s: ClaimState, facts: Progress & { claim?: PersistentVolumeClaim }): ClaimState {
  const { claim: written, ...progress } = facts;
  return { ...s, ...(written ? { claim: written } : {}), progress: { ...s.progress, ...progress } };
}

describe("the provisioning protocol, round by round", () => {
  /** What each step answers in a run where everything works. */
  function answer(step: ProvisionerStep): Progress & { claim?: PersistentVolumeClaim } {
    switch (step.op) {
      case "add-intent-finalizer":
        return { claim: { ...step.claim, metadata: { ...step.claim.metadata, resourceVersion: "8" } } };
      case "event":
        return step.announces ? { announced: true } : {};
      case "create-volume":
        return { created };
      case "create-pv":
        return { saved: true };
      default:
        return {};
    }
  }

  /** Runs rounds from `s`, supplying what they need, until a plan stops; returns the steps in order. */
  function run(start: ClaimState, stopAfter = Number.POSITIVE_INFINITY): { ops: string[]; last: ClaimState } {
    let s = start;
    const ops: string[] = [];
    for (let round = 0; round < 16; round++) {
      const plan = planClaimRound(s);
      if ("needs" in plan) {
        assert.equal(plan.needs, "request");
        s = { ...s, request: ready(s.claim, s.storageClass as StorageClass) };
        continue;
      }
      let facts = {};
      for (const step of plan.steps) {
        ops.push(step.op);
        facts = { ...facts, ...answer(step) };
        if (ops.length >= stopAfter) return { ops, last: s };
      }
      if (!plan.again) return { ops, last: s };
      s = advance(s, facts);
    }
    assert.fail("the protocol did not end");
  }

  it("intent finalizer → progress Event → CreateVolume → PV → success, one write or call a round", () => {
    const { ops } = run(state(claim()));
    assert.deepEqual(ops, ["add-intent-finalizer", "event", "create-volume", "create-pv", "event", "count"]);
  });

  it("the intent write's answer (its new resourceVersion) is what later rounds write on", () => {
    const s = state(claim({ annotations: { [failures]: "1" } }), { at: new Date("2026-01-01T00:00:01Z") });
    let next = s;
    const written: string[] = [];
    for (let round = 0; round < 8; round++) {
      const plan = planClaimRound(next);
      if ("needs" in plan) {
        next = { ...next, request: ready(next.claim, storageClass()) };
        continue;
      }
      for (const step of plan.steps)
        if (step.op === "write-claim" || step.op === "add-intent-finalizer")
          written.push(step.claim.metadata.resourceVersion ?? "");
      if (!plan.again) break;
      next = advance(next, Object.assign({}, ...plan.steps.map(answer)));
    }
    assert.deepEqual(
      written,
      ["7", "8"],
      "the intent on the read copy, the backoff cleared on the written one",
    );
  });

  it("a process stopped after any step: the next sync, on what the API then holds, ends with the volume recorded", () => {
    const full = run(state(claim())).ops;
    for (let cut = 1; cut < full.length; cut++) {
      const stopped = run(state(claim()), cut).ops;
      // What the API holds: the intent once its write happened, the PV once it was created.
      const recorded = stopped.includes("create-pv");
      const resumed = {
        ...state(claim(stopped.includes("add-intent-finalizer") ? intent : {})),
        existingVolume: recorded
          ? ({ metadata: { name: pvName }, spec: { claimRef: { uid: "uid-1" } } } as PersistentVolume)
          : undefined,
      };
      const next = run(resumed).ops;
      if (recorded)
        assert.deepEqual(next, [], `after ${stopped.join(" → ")}: nothing left but the binder's bind`);
      else
        assert.deepEqual(
          next.slice(-4),
          ["create-volume", "create-pv", "event", "count"],
          `after ${stopped.join(" → ")}`,
        );
    }
  });
});
