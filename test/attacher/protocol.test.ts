// The attacher's rounds as tables: an attachment's objects, the reads each
// round asks for and the step it returns, driven to the end with each step
// answered as its executor would (or failing). Each row is one sync: the
// trace of reads and steps in order, the last outcome, and what the steps
// carried (patches, CSI requests, the recorded error). Rows that start from
// the objects a killed process left show the next event finishing the job.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { AttacherStep, AttachmentState } from "../../shared/attacher/attacher-steps.ts";
import {
  afterTakeBack,
  failedWith,
  nextAttachmentRead,
  planAttachment,
  withFailureProgress,
  withPublished,
  withStatusWritten,
  withVolumeSynced,
} from "../../shared/attacher/attachment-protocol.ts";
import { chooseHandler } from "../../shared/attacher/choose-handler.ts";
import { annAttachFailures, annAttachRetryAfter, annNodeId } from "../../shared/attacher/constants.ts";
import type { AttachHandler } from "../../shared/attacher/handler.ts";
import { mayReleaseVolume, planVolume } from "../../shared/attacher/volume-release.ts";
import { type CsiCapabilities, capabilitiesFrom } from "../../shared/csi/capabilities.ts";
import type { ControllerRpcType } from "../../shared/csi/types.ts";
import type { CSINode, PersistentVolume, VolumeAttachment } from "../../shared/kube/types.ts";

const driver = "hostpath.csi.k8s.io";
const finalizer = "external-attacher/hostpath-csi-k8s-io";
const now = new Date("2026-01-01T00:00:00Z");
const failedAt = new Date("2026-01-01T00:00:09Z");

function caps(rpcs: ControllerRpcType[]): CsiCapabilities {
  return capabilitiesFrom(
    [{ service: { type: "CONTROLLER_SERVICE" } }],
    rpcs.map((type) => ({ rpc: { type } })),
  );
}
const csiHandler = chooseHandler(caps(["PUBLISH_UNPUBLISH_VOLUME"]), { driverName: driver });
const trivialHandler = chooseHandler(caps(["CREATE_DELETE_VOLUME"]), { driverName: driver });

interface VaOptions {
  uid?: string;
  finalizers?: string[];
  annotations?: Record<string, string>;
  deleting?: boolean;
  attached?: boolean;
}

function va(o: VaOptions = {}): VolumeAttachment {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: {
      name: "va-1",
      uid: o.uid ?? "uid-1",
      resourceVersion: "7",
      ...(o.finalizers ? { finalizers: o.finalizers } : {}),
      ...(o.annotations ? { annotations: o.annotations } : {}),
      ...(o.deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}),
    },
    spec: { attacher: driver, nodeName: "node-1", source: { persistentVolumeName: "pv-1" } },
    ...(o.attached !== undefined ? { status: { attached: o.attached } } : {}),
  };
}

function pv(o: { finalizers?: string[]; deleting?: boolean } = {}): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: {
      name: "pv-1",
      resourceVersion: "42",
      ...(o.finalizers ? { finalizers: o.finalizers } : {}),
      ...(o.deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}),
    },
    spec: {
      accessModes: ["ReadWriteOnce"],
      capacity: { storage: "1Gi" },
      csi: { driver, volumeHandle: "vol-1" },
    },
  };
}

const csiNode: CSINode = {
  apiVersion: "storage.k8s.io/v1",
  kind: "CSINode",
  metadata: { name: "node-1" },
  spec: { drivers: [{ name: driver, nodeID: "node-1-id" }] },
};

/** What the cluster answers to reads, and how a step comes out when it does not simply succeed. */
interface World {
  pv?: PersistentVolume;
  csiNode?: CSINode;
  successor?: VolumeAttachment;
  /** The VA the attached-status write finds (default: ours, still holding the finalizer). */
  statusWriteFinds?: VolumeAttachment | undefined;
  fail?: Partial<Record<AttacherStep["op"], string>>;
}

function start(v: VolumeAttachment, handler: AttachHandler = csiHandler, force = false): AttachmentState {
  return { kind: "attachment", handler, now, force, va: v, stage: { at: "start" }, prefix: "" };
}

/** Drives one sync: the loader's reads, then each round's plan, each step answered like its executor. */
function drive(first: AttachmentState, world: World) {
  const trace: string[] = [];
  const steps: AttacherStep[] = [];
  let s = first;
  for (let round = 1; round < 40; round++) {
    for (let need = nextAttachmentRead(s); need; need = nextAttachmentRead(s)) {
      trace.push(`read ${need.read}`);
      if (need.read === "pv") s = { ...s, pv: world.pv ?? null };
      else if (need.read === "secrets") s = { ...s, secrets: { ok: true, value: undefined } };
      else if (need.read === "csiNode") s = { ...s, csiNode: world.csiNode ?? null };
      else s = afterTakeBack(s, world.successor, now);
    }
    const plan = planAttachment(s);
    const outcome = `${s.prefix}${plan.outcome}`;
    let next: AttachmentState | undefined;
    for (const step of plan.steps) {
      trace.push(step.op);
      steps.push(step);
      const failure = world.fail?.[step.op];
      next = answer(step, failure) ?? next;
    }
    if (!plan.again) return { trace, steps, outcome };
    assert.ok(next, `round ${round} asked to decide again without carrying a state`);
    s = next;
  }
  throw new Error("the sync never ended");

  function answer(step: AttacherStep, failure: string | undefined): AttachmentState | undefined {
    switch (step.op) {
      case "add-volume-finalizer":
        return { ...step.resume, pv: pv({ finalizers: [finalizer] }) };
      case "prepare-attachment":
        return {
          ...step.resume,
          va: { ...step.resume.va, metadata: { ...step.resume.va.metadata, ...prepared } },
        };
      case "publish":
        if (failure) {
          return failedWith(step.resume, { op: "attach", message: failure, grpcCode: 13, at: failedAt });
        }
        return withPublished(
          step.resume,
          { ...step.published, publishContext: { devicePath: "/dev/x" } },
          step.forced,
        );
      case "write-attached": {
        const found = "statusWriteFinds" in world ? world.statusWriteFinds : step.resume.va;
        return withStatusWritten(step.resume, found);
      }
      case "unpublish":
        return failure
          ? failedWith(step.resume, { op: "detach", message: failure, at: failedAt })
          : step.resume;
      case "take-back":
        return step.resume;
      case "sync-volume":
        return withVolumeSynced(step.resume, step.detached, step.name, "removed the attacher finalizer");
      case "save-backoff":
        return withFailureProgress(
          step.resume,
          failure ? { delaySeconds: 1, saveError: failure } : { delaySeconds: 1 },
        );
      case "save-error":
        return failure ? withFailureProgress(step.resume, { saveError: failure }) : step.resume;
      default:
        return undefined;
    }
  }
}

function only<Op extends AttacherStep["op"]>(
  steps: AttacherStep[],
  op: Op,
): Extract<AttacherStep, { op: Op }> {
  const found = steps.filter((s): s is Extract<AttacherStep, { op: Op }> => s.op === op);
  assert.equal(found.length, 1, `one ${op} step`);
  return found[0] as Extract<AttacherStep, { op: Op }>;
}

const attachReads = ["read pv", "read secrets", "read csiNode"];
const prepared = { finalizers: [finalizer], annotations: { [annNodeId]: "node-1-id" } };

describe("attach rounds (upstream csiAttach order)", () => {
  const rows: { name: string; state: AttachmentState; world: World; trace: string[]; outcome: string }[] = [
    {
      name: "a new attachment: PV finalizer, then reads, VA finalizer + node id, publish, status",
      state: start(va()),
      world: { pv: pv(), csiNode },
      trace: [
        "read pv",
        "add-volume-finalizer",
        "read secrets",
        "read csiNode",
        "prepare-attachment",
        "publish",
        "write-attached",
      ],
      outcome: "attached to node node-1-id",
    },
    {
      name: "killed after the PV finalizer: the next event goes on with the VA's",
      state: start(va()),
      world: { pv: pv({ finalizers: [finalizer] }), csiNode },
      trace: [...attachReads, "prepare-attachment", "publish", "write-attached"],
      outcome: "attached to node node-1-id",
    },
    {
      name: "killed after the VA patch (or the publish): publish again, then the status",
      state: start(va(prepared)),
      world: { pv: pv({ finalizers: [finalizer] }), csiNode },
      trace: [...attachReads, "publish", "write-attached"],
      outcome: "attached to node node-1-id",
    },
    {
      name: "attached after failures: the backoff annotations go last",
      state: start(
        va({
          ...prepared,
          annotations: {
            ...prepared.annotations,
            [annAttachFailures]: "2",
            [annAttachRetryAfter]: "2025-12-31T23:59:00Z",
          },
        }),
      ),
      world: { pv: pv({ finalizers: [finalizer] }), csiNode },
      trace: [...attachReads, "publish", "write-attached", "clear-backoff"],
      outcome: "attached to node node-1-id",
    },
    {
      name: "released while the publish was in flight: the publish is taken back",
      state: start(va(prepared)),
      world: { pv: pv({ finalizers: [finalizer] }), csiNode, statusWriteFinds: undefined },
      trace: [...attachReads, "publish", "write-attached", "take-back", "read successor"],
      outcome: "published to node node-1-id after the attachment was released; unpublished again",
    },
    {
      name: "released and created again: taken back, then the new VA is published, forced",
      state: start(va(prepared)),
      world: {
        pv: pv({ finalizers: [finalizer] }),
        csiNode,
        statusWriteFinds: va({ uid: "uid-2", ...prepared, attached: true }),
        successor: va({ uid: "uid-2", ...prepared, attached: true }),
      },
      trace: [
        ...attachReads,
        "publish",
        "write-attached",
        "take-back",
        "read successor",
        ...attachReads,
        "publish",
        "write-attached",
      ],
      outcome:
        "published to node node-1-id after the attachment was released; unpublished again; the new attachment: attached to node node-1-id (the driver did not list it as published)",
    },
    {
      name: "forced by the ListVolumes reconcile past 'already attached'",
      state: start(va({ ...prepared, attached: true }), csiHandler, true),
      world: { pv: pv({ finalizers: [finalizer] }), csiNode },
      trace: [...attachReads, "publish", "write-attached"],
      outcome: "attached to node node-1-id (the driver did not list it as published)",
    },
    {
      name: "already attached: no read, no step",
      state: start(va({ ...prepared, attached: true })),
      world: {},
      trace: [],
      outcome: "already attached",
    },
    {
      name: "backing off: no read, no step",
      state: start(va({ annotations: { [annAttachRetryAfter]: "2026-01-01T00:00:05Z" } })),
      world: {},
      trace: [],
      outcome: "backing off until 2026-01-01T00:00:05Z",
    },
    {
      name: "trivial handler: status only",
      state: start(va(), trivialHandler),
      world: {},
      trace: ["mark-attached"],
      outcome: "marked attached (the driver does not publish volumes)",
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const r = drive(row.state, row.world);
      assert.deepEqual(r.trace, row.trace);
      assert.equal(r.outcome, row.outcome);
    });
  }

  it("the steps carry conditional patches, the publish request and the decided-on uid", () => {
    const { steps } = drive(start(va()), { pv: pv(), csiNode });
    assert.deepEqual(only(steps, "add-volume-finalizer").patch, [
      { op: "test", path: "/metadata/resourceVersion", value: "42" },
      { op: "add", path: "/metadata/finalizers", value: [finalizer] },
    ]);
    assert.deepEqual(only(steps, "prepare-attachment").patch, {
      metadata: { resourceVersion: "7", finalizers: [finalizer], annotations: { [annNodeId]: "node-1-id" } },
    });
    const publish = only(steps, "publish");
    assert.equal(publish.request.volumeId, "vol-1");
    assert.equal(publish.request.nodeId, "node-1-id");
    const status = only(steps, "write-attached");
    assert.deepEqual(
      [status.uid, status.finalizer, status.publishContext],
      ["uid-1", finalizer, { devicePath: "/dev/x" }],
    );
  });
});

describe("detach rounds (upstream csiDetach, markAsDetached)", () => {
  const deleting = { ...prepared, deleting: true, attached: true };
  it("unpublish, then the finalizer goes before the status", () => {
    const r = drive(start(va(deleting)), { pv: pv({ finalizers: [finalizer] }), csiNode });
    assert.deepEqual(r.trace, [...attachReads, "unpublish", "release-attachment", "write-detached"]);
    assert.equal(r.outcome, "detached from node node-1-id");
    assert.deepEqual(only(r.steps, "release-attachment").patch, {
      metadata: { resourceVersion: "7", finalizers: null },
    });
  });

  it("a PV deleted meanwhile gets its own check after the detach, in the same answer", () => {
    const r = drive(start(va(deleting)), { pv: pv({ finalizers: [finalizer], deleting: true }), csiNode });
    assert.deepEqual(r.trace, [
      ...attachReads,
      "unpublish",
      "release-attachment",
      "write-detached",
      "sync-volume",
    ]);
    assert.equal(r.outcome, "detached from node node-1-id; volume pv-1: removed the attacher finalizer");
  });

  it("without the CSINode, the node id recorded at attach names the node", () => {
    const r = drive(start(va(deleting)), { pv: pv({ finalizers: [finalizer] }) });
    assert.equal(only(r.steps, "unpublish").request.nodeId, "node-1-id");
  });

  it("deleted without our finalizer but still attached: the status is finished", () => {
    const r = drive(start(va({ deleting: true, attached: true })), {});
    assert.deepEqual(r.trace, ["write-detached"]);
    assert.equal(r.outcome, "marked detached: unpublished; status not yet written");
  });
});

describe("failures: backoff annotations, then the status error, then retry later", () => {
  it("a PV being deleted: nothing is written before the error record", () => {
    const r = drive(start(va()), { pv: pv({ deleting: true }), csiNode });
    assert.deepEqual(r.trace, ["read pv", "save-backoff", "save-error", "retry-later"]);
    const saved = only(r.steps, "save-error");
    assert.deepEqual(saved.error, {
      time: "2026-01-01T00:00:00Z",
      message: 'PersistentVolume "pv-1" is marked for deletion',
    });
    const later = only(r.steps, "retry-later");
    assert.equal(later.message, 'failed to attach: PersistentVolume "pv-1" is marked for deletion');
    assert.equal(later.delaySeconds, 1);
  });

  it("a failed publish records the gRPC code and the time it failed", () => {
    const r = drive(start(va(prepared)), {
      pv: pv({ finalizers: [finalizer] }),
      csiNode,
      fail: { publish: "rpc error: code = Internal desc = boom" },
    });
    assert.deepEqual(r.trace, [...attachReads, "publish", "save-backoff", "save-error", "retry-later"]);
    assert.equal(only(r.steps, "save-backoff").now, failedAt);
    assert.deepEqual(only(r.steps, "save-error").error, {
      time: "2026-01-01T00:00:09Z",
      message: "rpc error: code = Internal desc = boom",
      errorCode: 13,
    });
  });

  it("a failed unpublish is a detach error, without a gRPC code", () => {
    const r = drive(start(va({ ...prepared, deleting: true })), {
      pv: pv({ finalizers: [finalizer] }),
      csiNode,
      fail: { unpublish: "rpc error: code = Internal desc = stuck" },
    });
    assert.deepEqual(r.trace, [...attachReads, "unpublish", "save-backoff", "save-error", "retry-later"]);
    assert.equal(only(r.steps, "save-error").operation, "detach");
    assert.equal(only(r.steps, "save-error").error.errorCode, undefined);
    assert.equal(
      only(r.steps, "retry-later").message,
      "failed to detach: rpc error: code = Internal desc = stuck",
    );
  });

  it("saving the backoff fails: no status write, and the answer says so", () => {
    const r = drive(start(va()), { pv: pv({ deleting: true }), fail: { "save-backoff": "boom" } });
    assert.deepEqual(r.trace, ["read pv", "save-backoff", "retry-later"]);
    assert.equal(
      only(r.steps, "retry-later").message,
      'failed to attach: PersistentVolume "pv-1" is marked for deletion (and saving the error failed: boom)',
    );
  });

  it("a missing CSINode fails an attach (no recorded id stands in for it)", () => {
    const r = drive(start(va()), { pv: pv({ finalizers: [finalizer] }) });
    assert.equal(
      only(r.steps, "retry-later").message,
      'failed to attach: csinode.storage.k8s.io "node-1" not found',
    );
  });
});

describe("the attacher's side of a PV", () => {
  const attachmentOf = (name: string) => ({ ...va(), metadata: { ...va().metadata, name } });
  const rows: {
    name: string;
    volume: PersistentVolume;
    attachments: VolumeAttachment[];
    handler?: AttachHandler;
    outcome: string;
    steps: string[];
  }[] = [
    {
      name: "not being deleted",
      volume: pv({ finalizers: [finalizer] }),
      attachments: [],
      outcome: "not being deleted",
      steps: [],
    },
    {
      name: "deleting, still named by an attachment",
      volume: pv({ finalizers: [finalizer], deleting: true }),
      attachments: [attachmentOf("va-9")],
      outcome: "still needed by VolumeAttachment va-9",
      steps: [],
    },
    {
      name: "deleting and free: the finalizer goes",
      volume: pv({ finalizers: ["kubernetes.io/pv-protection", finalizer], deleting: true }),
      attachments: [],
      outcome: "removed the attacher finalizer",
      steps: ["remove-volume-finalizer"],
    },
    {
      name: "trivial handler",
      volume: pv({ deleting: true }),
      attachments: [],
      handler: trivialHandler,
      outcome: "the trivial handler keeps no PV finalizer",
      steps: [],
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const handler = row.handler ?? csiHandler;
      const plan = planVolume({ kind: "volume", handler, pv: row.volume, attachments: row.attachments });
      assert.equal(plan.outcome, row.outcome);
      assert.deepEqual(
        plan.steps.map((s) => s.op),
        row.steps,
      );
    });
  }

  it("only a deleting PV holding our finalizer is worth listing every attachment for", () => {
    assert.equal(mayReleaseVolume(pv({ finalizers: [finalizer], deleting: true }), csiHandler), true);
    assert.equal(mayReleaseVolume(pv({ finalizers: [finalizer] }), csiHandler), false);
    assert.equal(mayReleaseVolume(pv({ deleting: true }), csiHandler), false);
    assert.equal(mayReleaseVolume(pv({ finalizers: [finalizer], deleting: true }), trivialHandler), false);
    // An event's copy is untrusted: a finalizers field that is not a list holds nothing.
    const odd = {
      metadata: { name: "pv-1", deletionTimestamp: "x", finalizers: finalizer as unknown as string[] },
    };
    assert.equal(mayReleaseVolume(odd, csiHandler), false);
  });
});
