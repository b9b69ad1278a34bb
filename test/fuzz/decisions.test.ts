// Properties of the pure decisions of the controllers other than the binder
// (the binder has test/binder/properties.test.ts): the provisioner's claim and
// volume decisions, the attach/detach reconcile of one node (with a tiny
// in-memory API that applies its plans the way the runtime writes them), and
// the attacher's handlers, patches and status helpers. Each property says in
// a "Catches:" line which bug (mutation of the code) it would catch.
// Runs are deterministic (seed below; FUZZ_SEED / FUZZ_RUNS override).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import jsonpatch from "fast-json-patch";
import type { JsonObject } from "../../sandbox/apiserver/patch-values.ts";
import { applyStrategicMergePatch } from "../../sandbox/apiserver/strategic-merge.ts";
import {
  annAttachReported,
  annDetachRequestedAt,
  maxWaitForUnmountMs,
  outOfServiceTaint,
} from "../../shared/attach-detach/constants.ts";
import {
  type AttachDetachStep,
  type NodePlan,
  type NodeReconcileInput,
  reconcileNode,
} from "../../shared/attach-detach/reconcile-node.ts";
import { uniqueVolumeName, volumeAttachmentName } from "../../shared/attach-detach/volume-attachment-name.ts";
import {
  attachedStatus,
  detachedStatus,
  volumeError,
  withAttachError,
} from "../../shared/attacher/attachment-status.ts";
import { backoffUntil, withFailure, withoutBackoff } from "../../shared/attacher/backoff.ts";
import { annNodeId, backoffAnnotations } from "../../shared/attacher/constants.ts";
import { CsiHandler } from "../../shared/attacher/csi-handler.ts";
import { attacherFinalizer } from "../../shared/attacher/finalizer-name.ts";
import type { AttachHandler, AttachmentDecision } from "../../shared/attacher/handler.ts";
import {
  addVolumeFinalizerPatch,
  type MergePatch,
  prepareAttachmentPatch,
  releaseAttachmentPatch,
  removeVolumeFinalizerPatch,
  type StrategicPatch,
} from "../../shared/attacher/patches.ts";
import { findAttachmentMismatches } from "../../shared/attacher/reconcile.ts";
import { TrivialHandler } from "../../shared/attacher/trivial-handler.ts";
import type {
  CSIDriver,
  CSINode,
  Node,
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
  StorageClass,
  VolumeAttachment,
} from "../../shared/kube/types.ts";
import {
  annAttachLock,
  annBetaStorageProvisioner,
  annControllerManagedAttachDetach,
  annDynamicallyProvisioned,
  annSelectedNode,
  annStorageProvisioner,
  provisioningFinalizer,
  pvDeletionProtectionFinalizer,
} from "../../shared/kube/well-known.ts";
import { annProvisioningRetryAfter } from "../../shared/provisioner/constants.ts";
import {
  type ClaimContext,
  type ClaimDecision,
  claimNeedsNothing,
  decideClaim,
} from "../../shared/provisioner/decide-claim.ts";
import {
  decideVolume,
  type VolumeContext,
  volumeNeedsNothing,
} from "../../shared/provisioner/decide-volume.ts";

const SEED = Number(process.env.FUZZ_SEED ?? 20260802);
const RUNS = Number(process.env.FUZZ_RUNS ?? 1000);
const params = (numRuns = RUNS) => ({ seed: SEED, numRuns });

const ours = "hostpath.csi.k8s.io";
const other = "other.csi.example.com";
const now = new Date("2026-01-01T00:10:00Z");
const past = "2026-01-01T00:00:00Z";
const future = "2026-01-01T01:00:00Z";

function subset<T>(items: readonly T[]): fc.Arbitrary<T[]> {
  return fc.subarray([...items]);
}

// ---- the provisioner ------------------------------------------------------------

const claimArb: fc.Arbitrary<PersistentVolumeClaim> = fc
  .record({
    handedTo: fc.constantFrom<string | undefined>(ours, ours, other, undefined),
    betaHandedTo: fc.constantFrom<string | undefined>(undefined, undefined, ours, other),
    selectedNode: fc.boolean(),
    retryAfter: fc.constantFrom<string | undefined>(undefined, undefined, past, future, "garbage"),
    betaClass: fc.constantFrom<string | undefined>(undefined, undefined, "fast", "gone"),
    finalizers: subset([provisioningFinalizer, "kubernetes.io/pvc-protection"]),
    volumeName: fc.constantFrom<string | undefined>(undefined, undefined, "pvc-uid-1", "static-1"),
    deleting: fc.boolean(),
    className: fc.constantFrom<string | null | undefined>("fast", "fast", "gone", "", null, undefined),
    selector: fc.boolean(),
  })
  .map((r): PersistentVolumeClaim => {
    const annotations: Record<string, string> = {};
    if (r.handedTo) annotations[annStorageProvisioner] = r.handedTo;
    if (r.betaHandedTo) annotations[annBetaStorageProvisioner] = r.betaHandedTo;
    if (r.selectedNode) annotations[annSelectedNode] = "node-1";
    if (r.retryAfter) annotations[annProvisioningRetryAfter] = r.retryAfter;
    if (r.betaClass) annotations["volume.beta.kubernetes.io/storage-class"] = r.betaClass;
    return {
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: {
        name: "data",
        namespace: "ns",
        // Every stored claim has a uid (the runtime ignores one without before deciding).
        uid: "uid-1",
        annotations,
        ...(r.finalizers.length > 0 ? { finalizers: r.finalizers } : {}),
        ...(r.deleting ? { deletionTimestamp: past } : {}),
      },
      spec: {
        accessModes: ["ReadWriteOnce"],
        resources: { requests: { storage: "1Gi" } },
        ...(r.className !== undefined ? { storageClassName: r.className } : {}),
        ...(r.volumeName ? { volumeName: r.volumeName } : {}),
        ...(r.selector ? { selector: { matchLabels: { a: "b" } } } : {}),
      },
      status: { phase: r.volumeName ? "Bound" : "Pending" },
    };
  });

const classArb: fc.Arbitrary<StorageClass | undefined> = fc.option(
  fc
    .record({
      provisioner: fc.constantFrom(ours, ours, other),
      mode: fc.constantFrom("Immediate", "WaitForFirstConsumer"),
      policy: fc.constantFrom("Delete", "Retain"),
    })
    .map(
      (r): StorageClass => ({
        apiVersion: "storage.k8s.io/v1",
        kind: "StorageClass",
        metadata: { name: "fast" },
        provisioner: r.provisioner,
        volumeBindingMode: r.mode,
        reclaimPolicy: r.policy,
      }),
    ),
  { nil: undefined, freq: 5 },
);

/** The PV named after the claim (pvc-<uid>): absent, recording this claim, another claim, or no claim. */
function namedVolume(recordsUid: string | undefined | null): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name: "pvc-uid-1", annotations: { [annDynamicallyProvisioned]: ours } },
    spec: {
      capacity: { storage: "1Gi" },
      accessModes: ["ReadWriteOnce"],
      persistentVolumeReclaimPolicy: "Delete",
      csi: { driver: ours, volumeHandle: "vol-1" },
      ...(recordsUid === null
        ? {}
        : { claimRef: { namespace: "ns", name: "data", ...(recordsUid ? { uid: recordsUid } : {}) } }),
    },
    status: { phase: "Bound" },
  };
}
const existingVolumeArb = fc.constantFrom<PersistentVolume | undefined>(
  undefined,
  undefined,
  namedVolume("uid-1"),
  namedVolume("uid-other"),
  namedVolume(undefined),
  namedVolume(null),
);

const claimCase = fc.record({ claim: claimArb, storageClass: classArb, existingVolume: existingVolumeArb });

function contextOf(c: {
  storageClass: StorageClass | undefined;
  existingVolume: PersistentVolume | undefined;
}): ClaimContext {
  return { driverName: ours, storageClass: c.storageClass, existingVolume: c.existingVolume, now };
}

function hasIntent(claim: PersistentVolumeClaim): boolean {
  return (claim.metadata.finalizers ?? []).includes(provisioningFinalizer);
}

/** Written out again here (not imported) so a bug in the module's own helper cannot hide itself. */
function recordsClaim(pv: PersistentVolume | undefined, claim: PersistentVolumeClaim): boolean {
  return pv !== undefined && claim.metadata.uid !== undefined && pv.spec.claimRef?.uid === claim.metadata.uid;
}

function handedToOurs(claim: PersistentVolumeClaim): boolean {
  const a = claim.metadata.annotations ?? {};
  // The GA annotation wins over the beta one, as the binder writes both.
  return (a[annStorageProvisioner] ?? a[annBetaStorageProvisioner]) === ours;
}

const startsProvisioning = (d: ClaimDecision) => d.action === "provision" || d.action === "add-intent";

/** What the runtime's writes leave behind for each decision, when they succeed. */
function applyClaimDecision(
  d: ClaimDecision,
  claim: PersistentVolumeClaim,
  ctx: ClaimContext,
): { claim: PersistentVolumeClaim; ctx: ClaimContext } {
  const finalizers = claim.metadata.finalizers ?? [];
  switch (d.action) {
    case "add-intent":
      return {
        claim: {
          ...claim,
          metadata: { ...claim.metadata, finalizers: [...finalizers, provisioningFinalizer] },
        },
        ctx,
      };
    case "provision":
      // CreateVolume, then the PV recording the claim by uid.
      return { claim, ctx: { ...ctx, existingVolume: namedVolume(claim.metadata.uid) } };
    case "release-intent":
    case "cleanup":
      return {
        claim: {
          ...claim,
          metadata: { ...claim.metadata, finalizers: finalizers.filter((f) => f !== provisioningFinalizer) },
        },
        ctx,
      };
    default:
      return { claim, ctx };
  }
}

describe("provisioner decisions", () => {
  it("never starts provisioning a claim that is bound, being deleted, another driver's, or waiting for a node", () => {
    // Catches: dropping any check of whyNotProvision (CreateVolume for a bound or dying claim, or for a
    // claim another provisioner owns: two drivers provision it, one volume leaks), or the beta annotation
    // winning over the GA one.
    fc.assert(
      fc.property(claimCase, (c) => {
        const d = decideClaim(c.claim, contextOf(c));
        if (!startsProvisioning(d)) return;
        assert.equal(c.claim.spec.volumeName, undefined, "claim has a volumeName");
        assert.equal(c.claim.metadata.deletionTimestamp, undefined, "claim is being deleted");
        assert.ok(handedToOurs(c.claim), "claim is not handed to this driver");
        assert.ok(
          c.storageClass !== undefined && c.storageClass.provisioner === ours,
          "class is another driver's",
        );
        assert.ok(
          c.storageClass.volumeBindingMode !== "WaitForFirstConsumer" ||
            c.claim.metadata.annotations?.[annSelectedNode],
          "WaitForFirstConsumer without a selected node",
        );
        assert.ok(!recordsClaim(c.existingVolume, c.claim), "a PV already records the claim");
        assert.equal(c.claim.spec.selector, undefined, "claims with a selector are not provisioned");
      }),
      params(),
    );
  });

  it("claimNeedsNothing (answering an event from its copy) only says yes where decideClaim ignores the claim whatever the class and PV", () => {
    // Catches: judging from an event's copy a claim whose decision depends on the objects the copy
    // does not show (an intent left behind, a PV, the class): that event would be dropped unread.
    let judgedFromCopy = 0;
    fc.assert(
      fc.property(claimCase, (c) => {
        if (!claimNeedsNothing(c.claim, ours)) return;
        judgedFromCopy++;
        const d = decideClaim(c.claim, contextOf(c));
        assert.equal(d.action, "ignore", JSON.stringify(d));
      }),
      params(),
    );
    assert.ok(judgedFromCopy > RUNS / 10, `exercised: ${judgedFromCopy} claims judged from a copy`);
  });

  it("a claim whose PV records it never gets cleanup (the cleanup would delete its data)", () => {
    // Catches: evaluating whyNotProvision before "a PV records the volume" (a Bound claim with a
    // leftover intent would have its volume deleted by the cleanup), or comparing claimRef by name.
    fc.assert(
      fc.property(claimCase, (c) => {
        if (!recordsClaim(c.existingVolume, c.claim)) return;
        const d = decideClaim(c.claim, contextOf(c));
        assert.notEqual(d.action, "cleanup", JSON.stringify(d));
        assert.ok(!startsProvisioning(d), JSON.stringify(d));
      }),
      params(),
    );
  });

  it("a claim whose PV name is taken by another claim's PV is never provisioned or cleaned up", () => {
    // CreateVolume is idempotent by name, so provisioning or cleaning up by that name reaches the
    // other claim's backing volume: cleanup would delete its data. (Names collide when
    // VOLUME_NAME_UUID_LENGTH truncates uids, or a PV of that name was made by hand.)
    // Catches: the `pv && !pvRecordsClaim` guard applying only without the intent finalizer.
    fc.assert(
      fc.property(claimCase, (c) => {
        const pv = c.existingVolume;
        const uid = pv?.spec.claimRef?.uid;
        if (pv === undefined || uid === undefined || uid === c.claim.metadata.uid) return;
        const d = decideClaim(c.claim, contextOf(c));
        assert.ok(
          d.action !== "cleanup" && !startsProvisioning(d),
          JSON.stringify({ decision: d, claim: c.claim.metadata, pv: pv.spec.claimRef }),
        );
      }),
      params(),
    );
  });

  it("the intent finalizer goes only when a PV records the volume, or through cleanup", () => {
    // Catches: release-intent when no PV records the volume (a backing volume nobody
    // records: the leak the finalizer exists to prevent), or decisions that drop a finalizer that is
    // not there.
    fc.assert(
      fc.property(claimCase, (c) => {
        const d = decideClaim(c.claim, contextOf(c));
        if (d.action === "release-intent") {
          assert.ok(hasIntent(c.claim));
          // A PV under the volume's name records whatever the driver holds under that name: this claim's
          // volume, or (a name taken by another claim's PV) the only volume that name can ever stand for.
          assert.ok(c.existingVolume !== undefined, "released without a PV recording the volume");
        }
        if (d.action === "cleanup") assert.ok(hasIntent(c.claim));
      }),
      params(),
    );
  });

  it("decisions make progress on their own output: add-intent → provision → no second provision; release and cleanup → ignore", () => {
    // Catches: add-intent not followed by provision (a claim stuck with the finalizer), provision
    // decided again once the PV records the claim (a second CreateVolume loop), or a cleanup / release
    // decided again after the finalizer is gone (a hot loop of writes).
    fc.assert(
      fc.property(claimCase, (c) => {
        const ctx = contextOf(c);
        const d = decideClaim(c.claim, ctx);
        const next = applyClaimDecision(d, c.claim, ctx);
        const again = decideClaim(next.claim, next.ctx);
        switch (d.action) {
          case "add-intent":
            assert.equal(again.action, "provision", JSON.stringify(again));
            break;
          case "provision":
            assert.ok(!["provision", "add-intent", "cleanup"].includes(again.action), JSON.stringify(again));
            break;
          case "release-intent":
          case "cleanup":
            // A name taken by another claim's PV stays a failure to report, never a write loop.
            assert.ok(again.action === "ignore" || again.action === "fail", JSON.stringify(again));
            break;
        }
      }),
      params(),
    );
  });
});

const volumeCase = fc
  .record({
    by: fc.constantFrom<string | undefined>(ours, ours, other, undefined),
    csiDriver: fc.constantFrom<string | undefined>(ours, ours, other, undefined),
    policy: fc.constantFrom<string | undefined>("Delete", "Delete", "Retain", "Recycle", undefined, "delete"),
    phase: fc.constantFrom<string | undefined>(
      "Bound",
      "Released",
      "Available",
      "Failed",
      "Pending",
      undefined,
    ),
    finalized: fc.boolean(),
    deleting: fc.boolean(),
    driverPublishes: fc.boolean(),
    attachments: fc.array(
      fc.record({
        pv: fc.constantFrom("pv-1", "pv-other"),
        node: fc.constantFrom("node-1", "node-2"),
        attacher: fc.constantFrom(ours, other),
      }),
      { maxLength: 3 },
    ),
  })
  .map((r) => {
    const pv: PersistentVolume = {
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: {
        name: "pv-1",
        ...(r.by ? { annotations: { [annDynamicallyProvisioned]: r.by } } : {}),
        ...(r.finalized
          ? { finalizers: ["kubernetes.io/pv-protection", pvDeletionProtectionFinalizer] }
          : {}),
        ...(r.deleting ? { deletionTimestamp: past } : {}),
      },
      spec: {
        capacity: { storage: "1Gi" },
        ...(r.policy ? { persistentVolumeReclaimPolicy: r.policy } : {}),
        ...(r.csiDriver ? { csi: { driver: r.csiDriver, volumeHandle: "vol-1" } } : {}),
      },
      ...(r.phase ? { status: { phase: r.phase } } : {}),
    };
    const attachments = r.attachments.map(
      (a, i): VolumeAttachment => ({
        apiVersion: "storage.k8s.io/v1",
        kind: "VolumeAttachment",
        metadata: { name: `va-${i}` },
        spec: { attacher: a.attacher, nodeName: a.node, source: { persistentVolumeName: a.pv } },
      }),
    );
    const ctx: VolumeContext = { driverName: ours, attachments, driverPublishes: r.driverPublishes };
    return { pv, ctx };
  });

function applyVolumeDecision(pv: PersistentVolume, action: string): PersistentVolume {
  const finalizers = pv.metadata.finalizers ?? [];
  if (action === "add-finalizer")
    return {
      ...pv,
      metadata: { ...pv.metadata, finalizers: [...finalizers, pvDeletionProtectionFinalizer] },
    };
  if (action === "remove-finalizer")
    return {
      ...pv,
      metadata: { ...pv.metadata, finalizers: finalizers.filter((f) => f !== pvDeletionProtectionFinalizer) },
    };
  return pv;
}

describe("provisioner volume decisions", () => {
  it('never "delete" a PV whose reclaim policy is not Delete, that is Bound, not ours, or still attached', () => {
    // Catches: a default policy of Delete for PVs that name none (Retain data deleted), a
    // case-insensitive policy match, deleting a PV deleted while Bound (its claim still uses it),
    // deleting another driver's volume, or ignoring VolumeAttachments when the driver publishes.
    fc.assert(
      fc.property(volumeCase, ({ pv, ctx }) => {
        const d = decideVolume(pv, ctx);
        if (d.action !== "delete") return;
        assert.equal(pv.spec.persistentVolumeReclaimPolicy, "Delete");
        assert.notEqual(pv.status?.phase, "Bound");
        const by = pv.metadata.annotations?.[annDynamicallyProvisioned];
        assert.equal(by ?? pv.spec.csi?.driver, ours);
        if (ctx.driverPublishes)
          assert.ok(!ctx.attachments.some((va) => va.spec.source.persistentVolumeName === pv.metadata.name));
      }),
      params(),
    );
  });

  it("ignore does not depend on attachments or driver capabilities, so volumeNeedsNothing may judge an event's copy", () => {
    // Catches: a decision that could ignore a PV only because of what the copy does not show.
    let judgedFromCopy = 0;
    fc.assert(
      fc.property(volumeCase, ({ pv, ctx }) => {
        const fromCopy = volumeNeedsNothing(pv, ours);
        if (fromCopy) judgedFromCopy++;
        assert.equal(
          fromCopy,
          decideVolume(pv, ctx).action === "ignore",
          JSON.stringify(decideVolume(pv, ctx)),
        );
      }),
      params(),
    );
    assert.ok(judgedFromCopy > RUNS / 10, `exercised: ${judgedFromCopy} volumes judged from a copy`);
  });

  it("finalizer decisions are idempotent: after add-finalizer or remove-finalizer the same is not decided again", () => {
    // Catches: a finalizer check by a different name than the one written (a write on every event),
    // or remove-finalizer on a Retain PV that then re-adds it (a flip-flop of writes).
    fc.assert(
      fc.property(volumeCase, ({ pv, ctx }) => {
        const d = decideVolume(pv, ctx);
        if (d.action !== "add-finalizer" && d.action !== "remove-finalizer") return;
        const again = decideVolume(applyVolumeDecision(pv, d.action), ctx);
        assert.ok(
          again.action !== "add-finalizer" && again.action !== "remove-finalizer",
          JSON.stringify(again),
        );
      }),
      params(),
    );
  });
});

// ---- attach/detach ------------------------------------------------------------------

const NODES = ["node-a", "node-b", "node-c"] as const;
const MODES = ["ReadWriteOnce", "ReadWriteOncePod", "ReadOnlyMany", "ReadWriteMany"] as const;
const drvAttach = "attach.csi.example.com";
const drvNoAttach = "noattach.csi.example.com";
const drvUnknown = "unknown.csi.example.com";

/** RWO / RWOP only: the volume may be attached to one node at a time. (Written out, not imported.) */
function singleNode(pv: PersistentVolume): boolean {
  const modes = pv.spec.accessModes ?? [];
  return modes.length > 0 && modes.every((m) => m === "ReadWriteOnce" || m === "ReadWriteOncePod");
}

interface World {
  nodes: Map<string, Node>;
  pods: Pod[];
  claims: PersistentVolumeClaim[];
  pvs: Map<string, PersistentVolume>;
  vas: Map<string, VolumeAttachment>;
  drivers: CSIDriver[];
  nextVersion: number;
}

function cloneWorld(w: World): World {
  return structuredClone(w);
}

const worldArb: fc.Arbitrary<World> = fc
  .record({
    nodes: fc.array(
      fc.record({
        present: fc.constantFrom(true, true, true, false),
        ready: fc.constantFrom(true, true, false),
        outOfService: fc.constantFrom(false, false, false, true),
        inUse: fc.array(fc.nat(4), { maxLength: 3 }),
      }),
      { minLength: NODES.length, maxLength: NODES.length },
    ),
    pvs: fc.array(
      fc.record({
        modes: fc.oneof(
          { weight: 6, arbitrary: subset<string>(MODES).filter((m) => m.length > 0) },
          fc.constant<string[]>([]),
        ),
        driver: fc.constantFrom<string | undefined>(
          drvAttach,
          drvAttach,
          drvAttach,
          drvNoAttach,
          drvUnknown,
          undefined,
        ),
        // "pair": bound both ways to claim-<i> (most worlds need consistent pairs for anything to be desired).
        bound: fc.constantFrom("pair", "pair", "pair", "pair", "stale", "none", "other"),
        claim: fc.nat(4),
        lock: fc.option(fc.constantFrom(...NODES), { nil: undefined, freq: 3 }),
      }),
      { minLength: 1, maxLength: 5 },
    ),
    claims: fc.array(fc.option(fc.nat(4), { nil: undefined, freq: 5 }), { minLength: 5, maxLength: 5 }),
    pods: fc.array(
      fc.record({
        node: fc.option(fc.constantFrom(...NODES), { nil: undefined, freq: 6 }),
        phase: fc.constantFrom("Running", "Running", "Pending", "Succeeded", "Failed"),
        claims: fc.array(fc.nat(4), { maxLength: 2 }),
        ephemeral: fc.constantFrom(false, false, false, true),
      }),
      { maxLength: 6 },
    ),
    vas: fc.array(
      fc.record({
        pv: fc.nat(4),
        node: fc.constantFrom(...NODES),
        oddName: fc.constantFrom(false, false, false, false, true),
        attached: fc.boolean(),
        deleting: fc.constantFrom(false, false, false, true),
        detachRequested: fc.constantFrom<string | undefined>(
          undefined,
          undefined,
          "2026-01-01T00:00:00Z",
          "2026-01-01T00:09:00Z",
        ),
        reported: fc.boolean(),
      }),
      { maxLength: 4 },
    ),
  })
  .map((r): World => {
    const pvName = (i: number) => `pv-${i}`;
    const pvs = new Map<string, PersistentVolume>();
    r.pvs.forEach((p, i) => {
      pvs.set(pvName(i), {
        apiVersion: "v1",
        kind: "PersistentVolume",
        metadata: {
          name: pvName(i),
          uid: `pv-uid-${i}`,
          resourceVersion: "1",
          ...(p.lock ? { annotations: { [annAttachLock]: p.lock } } : {}),
        },
        spec: {
          accessModes: p.modes,
          claimRef: {
            namespace: "default",
            name: `claim-${p.bound === "other" ? p.claim : i}`,
            ...(p.bound === "pair"
              ? { uid: `claim-uid-${i}` }
              : p.bound === "stale"
                ? { uid: "old-uid" }
                : p.bound === "other"
                  ? { uid: `claim-uid-${p.claim}` }
                  : {}),
          },
          ...(p.driver
            ? { csi: { driver: p.driver, volumeHandle: `h-${i}` } }
            : { hostPath: { path: "/x" } }),
        },
        status: { phase: "Bound" },
      });
    });
    const claims = r.claims.map((v, i): PersistentVolumeClaim => {
      const volumeName = r.pvs[i]?.bound === "pair" ? pvName(i) : v !== undefined ? pvName(v) : undefined;
      return {
        apiVersion: "v1",
        kind: "PersistentVolumeClaim",
        metadata: { name: `claim-${i}`, namespace: "default", uid: `claim-uid-${i}` },
        spec: { accessModes: ["ReadWriteOnce"], ...(volumeName ? { volumeName } : {}) },
      };
    });
    // Generic ephemeral volumes: the claim is named <pod>-<volume>; give pod-0's one a claim of that name.
    const pods = r.pods.map(
      (p, i): Pod => ({
        apiVersion: "v1",
        kind: "Pod",
        metadata: { name: `pod-${i}`, namespace: "default", uid: `pod-uid-${i}` },
        spec: {
          ...(p.node ? { nodeName: p.node } : {}),
          volumes: [
            ...p.claims.map((c, j) => ({
              name: `v${j}`,
              persistentVolumeClaim: { claimName: `claim-${c}` },
            })),
            ...(p.ephemeral ? [{ name: "eph", ephemeral: { volumeClaimTemplate: {} } }] : []),
          ],
        },
        status: { phase: p.phase },
      }),
    );
    for (const [i, p] of r.pods.entries()) {
      if (!p.ephemeral) continue;
      const target = p.claims[0] ?? 0;
      claims.push({
        apiVersion: "v1",
        kind: "PersistentVolumeClaim",
        metadata: { name: `pod-${i}-eph`, namespace: "default", uid: `claim-uid-${target}` },
        spec: { volumeName: pvName(target) },
      });
    }
    const handleOf = (pvIndex: number) => pvs.get(pvName(pvIndex))?.spec.csi;
    const nodes = new Map<string, Node>();
    r.nodes.forEach((n, i) => {
      const name = NODES[i]!;
      if (!n.present) return;
      const inUse = n.inUse.flatMap((k) => {
        const csi = handleOf(k);
        return csi ? [uniqueVolumeName(csi.driver, csi.volumeHandle)] : [];
      });
      nodes.set(name, {
        apiVersion: "v1",
        kind: "Node",
        metadata: { name, annotations: { [annControllerManagedAttachDetach]: "true" } },
        spec: n.outOfService ? { taints: [{ key: outOfServiceTaint, effect: "NoExecute" }] } : {},
        status: { conditions: [{ type: "Ready", status: n.ready ? "True" : "False" }], volumesInUse: inUse },
      });
    });
    const vas = new Map<string, VolumeAttachment>();
    r.vas.forEach((v, i) => {
      const csi = handleOf(v.pv);
      const driver = csi?.driver ?? drvAttach;
      const name = v.oddName || !csi ? `va-odd-${i}` : volumeAttachmentName(csi.volumeHandle, driver, v.node);
      const annotations: Record<string, string> = {};
      if (v.detachRequested) annotations[annDetachRequestedAt] = v.detachRequested;
      if (v.reported) annotations[annAttachReported] = "true";
      vas.set(name, {
        apiVersion: "storage.k8s.io/v1",
        kind: "VolumeAttachment",
        metadata: {
          name,
          uid: `va-uid-${i}`,
          resourceVersion: "1",
          annotations,
          ...(v.deleting ? { deletionTimestamp: past, finalizers: ["external-attacher/x"] } : {}),
        },
        spec: { attacher: driver, nodeName: v.node, source: { persistentVolumeName: pvName(v.pv) } },
        status: { attached: v.attached },
      });
    });
    const drivers: CSIDriver[] = [
      {
        apiVersion: "storage.k8s.io/v1",
        kind: "CSIDriver",
        metadata: { name: drvAttach },
        spec: { attachRequired: true },
      },
      {
        apiVersion: "storage.k8s.io/v1",
        kind: "CSIDriver",
        metadata: { name: drvNoAttach },
        spec: { attachRequired: false },
      },
    ];
    return { nodes, pods, claims, pvs, vas, drivers, nextVersion: 2 };
  });

function podClaimNames(pod: Pod): string[] {
  return (pod.spec.volumes ?? []).flatMap((v) =>
    v.persistentVolumeClaim?.claimName
      ? [v.persistentVolumeClaim.claimName]
      : v.ephemeral
        ? [`${pod.metadata.name}-${v.name}`]
        : [],
  );
}

/** What the runtime reads for one node (attach-detach-controller reconcileOnce), plus the PVs it locks (resync's hint). */
function inputFor(w: World, nodeName: string): NodeReconcileInput {
  const pods = w.pods.filter((p) => p.spec.nodeName === nodeName);
  const keys = new Set(pods.flatMap((p) => podClaimNames(p).map((c) => `${p.metadata.namespace}/${c}`)));
  const claims = w.claims.filter((c) => keys.has(`${c.metadata.namespace}/${c.metadata.name}`));
  const attachments = [...w.vas.values()];
  const names = new Set<string>();
  for (const c of claims) if (c.spec.volumeName) names.add(c.spec.volumeName);
  for (const va of attachments)
    if (va.spec.nodeName === nodeName && va.spec.source.persistentVolumeName)
      names.add(va.spec.source.persistentVolumeName);
  for (const pv of w.pvs.values())
    if (pv.metadata.annotations?.[annAttachLock] === nodeName) names.add(pv.metadata.name);
  const volumes = [...names].flatMap((n) => {
    const pv = w.pvs.get(n);
    return pv ? [pv] : [];
  });
  return structuredClone({
    nodeName,
    node: w.nodes.get(nodeName),
    pods,
    claims,
    volumes,
    drivers: w.drivers,
    attachments,
    now,
  });
}

/** Every node a resync (or an event) would reconcile: Nodes, VolumeAttachments' nodes, lock holders, pods' nodes. */
function nodesOf(w: World): string[] {
  const out = new Set<string>(w.nodes.keys());
  for (const va of w.vas.values()) out.add(va.spec.nodeName);
  for (const pv of w.pvs.values()) {
    const lock = pv.metadata.annotations?.[annAttachLock];
    if (lock) out.add(lock);
  }
  for (const p of w.pods) if (p.spec.nodeName) out.add(p.spec.nodeName);
  return [...out].sort();
}

/** Desired (node, PV) pairs, worked out independently of reconcile-node.ts. */
function desiredOn(w: World, nodeName: string): Set<string> {
  const out = new Set<string>();
  for (const pod of w.pods) {
    if (pod.spec.nodeName !== nodeName || pod.status?.phase === "Succeeded" || pod.status?.phase === "Failed")
      continue;
    for (const name of podClaimNames(pod)) {
      const claim = w.claims.find(
        (c) => c.metadata.namespace === pod.metadata.namespace && c.metadata.name === name,
      );
      const pv = claim?.spec.volumeName ? w.pvs.get(claim.spec.volumeName) : undefined;
      if (!claim || !pv?.spec.csi || pv.spec.claimRef?.uid !== claim.metadata.uid) continue;
      if (w.drivers.find((d) => d.metadata.name === pv.spec.csi?.driver)?.spec.attachRequired === false)
        continue;
      out.add(pv.metadata.name);
    }
  }
  return out;
}

class Conflict extends Error {}

interface ApplyLog {
  /** Writes that changed the world. */
  writes: number;
  /** Single-node PVs attached to a second node by a create (the Multi-Attach the lock prevents). */
  doubleAttach: string[];
}

/** Applies one step the way the API server would take the runtime's write (conditional where the runtime's is). */
function applyStep(w: World, step: AttachDetachStep, nodeName: string, log: ApplyLog): void {
  const version = () => String(w.nextVersion++);
  switch (step.op) {
    case "confirm-lock": {
      // The PV as read, conditional: a 409 if anyone wrote it since; otherwise no change (a no-op write).
      const current = w.pvs.get(step.volume.metadata.name);
      if (!current || current.metadata.resourceVersion !== step.volume.metadata.resourceVersion)
        throw new Conflict();
      return;
    }
    case "acquire-lock":
    case "release-lock": {
      // kube.replace with the resourceVersion read: a 409 if anyone wrote the PV since.
      const current = w.pvs.get(step.volume.metadata.name);
      if (!current || current.metadata.resourceVersion !== step.volume.metadata.resourceVersion)
        throw new Conflict();
      const annotations = { ...step.volume.metadata.annotations };
      if (step.op === "acquire-lock") annotations[annAttachLock] = nodeName;
      else delete annotations[annAttachLock];
      w.pvs.set(current.metadata.name, {
        ...step.volume,
        metadata: { ...step.volume.metadata, annotations, resourceVersion: version() },
      });
      log.writes++;
      return;
    }
    case "create-attachment": {
      const va = step.attachment;
      if (w.vas.has(va.metadata.name)) return; // AlreadyExists: counted as done
      const pvName = va.spec.source.persistentVolumeName ?? "";
      const pv = w.pvs.get(pvName);
      const elsewhere = [...w.vas.values()].some(
        (o) => o.spec.source.persistentVolumeName === pvName && o.spec.nodeName !== va.spec.nodeName,
      );
      if (pv && singleNode(pv) && elsewhere) log.doubleAttach.push(`${pvName} on ${va.spec.nodeName}`);
      w.vas.set(va.metadata.name, {
        ...va,
        metadata: { ...va.metadata, uid: `va-uid-${w.nextVersion}`, resourceVersion: version() },
      });
      log.writes++;
      return;
    }
    case "delete-attachment": {
      const current = w.vas.get(step.attachment.metadata.name);
      if (!current) return; // NotFound: done
      // uid and resourceVersion preconditions
      if (current.metadata.uid !== step.attachment.metadata.uid) throw new Conflict();
      if (current.metadata.resourceVersion !== step.attachment.metadata.resourceVersion) throw new Conflict();
      // The attacher's finalizer keeps a published attachment until it is detached.
      if ((current.metadata.finalizers ?? []).length > 0) {
        if (!current.metadata.deletionTimestamp)
          w.vas.set(current.metadata.name, {
            ...current,
            metadata: {
              ...current.metadata,
              deletionTimestamp: now.toISOString(),
              resourceVersion: version(),
            },
          });
      } else w.vas.delete(current.metadata.name);
      log.writes++;
      return;
    }
    case "update-attachment": {
      const current = w.vas.get(step.attachment.metadata.name);
      if (!current || current.metadata.resourceVersion !== step.attachment.metadata.resourceVersion)
        throw new Conflict();
      w.vas.set(current.metadata.name, {
        ...step.attachment,
        metadata: { ...step.attachment.metadata, resourceVersion: version() },
      });
      log.writes++;
      return;
    }
    case "update-node-status": {
      const current = w.nodes.get(step.node.metadata.name);
      if (!current) return; // NotFound: nothing to report
      if (current.metadata.resourceVersion !== step.node.metadata.resourceVersion) throw new Conflict();
      w.nodes.set(current.metadata.name, {
        ...current,
        metadata: { ...current.metadata, resourceVersion: version() },
        status: { ...current.status, volumesAttached: step.volumesAttached },
      });
      log.writes++;
      return;
    }
    case "event":
    case "multi-attach":
      return;
  }
}

/** Runs a plan's steps in order; a conflict ends it (the runtime re-decides on fresh state). */
function applyPlan(w: World, plan: NodePlan, nodeName: string, log: ApplyLog): void {
  try {
    for (const step of plan.steps) applyStep(w, step, nodeName, log);
  } catch (err) {
    if (!(err instanceof Conflict)) throw err;
  }
}

/** The CSI attacher, as far as attach/detach sees it: publishes (finalizer, attached) and finishes detaches. */
function attacherTick(w: World): number {
  let writes = 0;
  for (const [name, va] of [...w.vas]) {
    if (va.metadata.deletionTimestamp) {
      w.vas.delete(name);
      writes++;
    } else if (!va.status?.attached || (va.metadata.finalizers ?? []).length === 0) {
      w.vas.set(name, {
        ...va,
        metadata: {
          ...va.metadata,
          finalizers: ["external-attacher/x"],
          resourceVersion: String(w.nextVersion++),
        },
        status: { attached: true },
      });
      writes++;
    }
  }
  return writes;
}

function doubleAttached(w: World): string[] {
  const out: string[] = [];
  for (const pv of w.pvs.values()) {
    if (!singleNode(pv)) continue;
    const nodes = new Set(
      [...w.vas.values()]
        .filter((va) => va.spec.source.persistentVolumeName === pv.metadata.name)
        .map((va) => va.spec.nodeName),
    );
    if (nodes.size > 1) out.push(`${pv.metadata.name}: ${[...nodes].join(", ")}`);
  }
  return out;
}

const CHANGING = new Set([
  "acquire-lock",
  "release-lock",
  "create-attachment",
  "delete-attachment",
  "update-attachment",
  "update-node-status",
]);

function describeWorld(w: World): string {
  return JSON.stringify({
    nodes: [...w.nodes.values()].map((n) => [
      n.metadata.name,
      n.status?.conditions?.[0]?.status,
      n.spec?.taints?.length ?? 0,
      n.status?.volumesInUse,
    ]),
    pods: w.pods.map((p) => [p.metadata.name, p.spec.nodeName, p.status?.phase, podClaimNames(p)]),
    claims: w.claims.map((c) => [c.metadata.name, c.metadata.uid, c.spec.volumeName]),
    pvs: [...w.pvs.values()].map((p) => [
      p.metadata.name,
      p.spec.accessModes,
      p.spec.csi?.driver,
      p.spec.claimRef?.name,
      p.spec.claimRef?.uid,
      p.metadata.annotations?.[annAttachLock],
    ]),
    vas: [...w.vas.values()].map((v) => [
      v.metadata.name.slice(0, 12),
      v.spec.nodeName,
      v.spec.source.persistentVolumeName,
      v.status?.attached,
      v.metadata.deletionTimestamp ? "deleting" : "",
      v.metadata.annotations,
    ]),
  });
}

describe("attach/detach reconcile", () => {
  it("never plans a create-attachment for a single-node PV attached or locked elsewhere, nor without taking the lock", () => {
    // Catches: dropping the `elsewhere` check (Multi-Attach: an RWO volume on two nodes, filesystem
    // corruption), ignoring a lock held by another node, skipping acquire-lock when no lock is held (two
    // reconciles racing for different nodes both attach), or treating RWO+ROX-less modes as multi-node.
    fc.assert(
      fc.property(worldArb, (w) => {
        for (const nodeName of nodesOf(w)) {
          const input = inputFor(w, nodeName);
          const plan = reconcileNode(input);
          plan.steps.forEach((step, i) => {
            if (step.op !== "create-attachment") return;
            const pvName = step.attachment.spec.source.persistentVolumeName!;
            const pv = w.pvs.get(pvName)!;
            assert.equal(step.attachment.spec.nodeName, nodeName);
            if (!singleNode(pv)) return;
            const elsewhere = input.attachments.filter(
              (va) => va.spec.source.persistentVolumeName === pvName && va.spec.nodeName !== nodeName,
            );
            assert.deepEqual(
              elsewhere.map((va) => va.spec.nodeName),
              [],
              `${pvName} is attached elsewhere`,
            );
            const lock = pv.metadata.annotations?.[annAttachLock];
            assert.ok(lock === undefined || lock === nodeName, `${pvName} is locked by ${lock}`);
            if (lock === undefined) {
              const acquired = plan.steps
                .slice(0, i)
                .some((s) => s.op === "acquire-lock" && s.volume.metadata.name === pvName);
              assert.ok(acquired, `${pvName} attached without taking the lock`);
            }
          });
        }
      }),
      params(),
    );
  });

  it("never detaches a volume a pod on the node still wants, nor one a healthy node still has mounted", () => {
    // Catches: detaching by PV name without checking desire (a running pod loses its disk), or
    // skipping the volumesInUse check / the 6-minute wait on unhealthy nodes (detach under a mount).
    fc.assert(
      fc.property(worldArb, (w) => {
        for (const nodeName of nodesOf(w)) {
          const input = inputFor(w, nodeName);
          const desired = desiredOn(w, nodeName);
          for (const step of reconcileNode(input).steps) {
            if (step.op !== "delete-attachment") continue;
            const va = step.attachment;
            const pvName = va.spec.source.persistentVolumeName!;
            assert.equal(va.spec.nodeName, nodeName);
            assert.ok(!desired.has(pvName), `${pvName} is still wanted on ${nodeName}`);
            const csi = w.pvs.get(pvName)?.spec.csi;
            const node = w.nodes.get(nodeName);
            const mounted =
              csi !== undefined &&
              (node?.status?.volumesInUse ?? []).includes(
                uniqueVolumeName(va.spec.attacher, csi.volumeHandle),
              );
            if (!mounted) continue;
            // Non-graceful shutdown: an out-of-service node's volumes detach at once.
            if ((node?.spec?.taints ?? []).some((t) => t.key === outOfServiceTaint)) continue;
            const healthy =
              node?.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") === true;
            assert.ok(!healthy, `${pvName} detached while mounted on a healthy node`);
            const since = Date.parse(va.metadata.annotations?.[annDetachRequestedAt] ?? "");
            assert.ok(
              now.getTime() - since >= maxWaitForUnmountMs,
              `${pvName} detached before the 6-minute wait`,
            );
          }
        }
      }),
      params(),
    );
  });

  it("applying each plan and reconciling again converges to the desired attachments, single-node PVs on one node", () => {
    // Catches: steps that undo each other (a lock released and re-taken forever, an annotation
    // flip-flop), a lock never released by a node that no longer wants the volume (the volume can
    // never move), an attachment left behind after its pod is gone, or a desired volume never attached.
    fc.assert(
      fc.property(worldArb, fc.array(fc.nat(), { minLength: 12, maxLength: 12 }), (initial, orders) => {
        const w = cloneWorld(initial);
        const before = doubleAttached(w);
        const log: ApplyLog = { writes: 0, doubleAttach: [] };
        let quiet = false;
        for (let round = 0; round < 12 && !quiet; round++) {
          const names = nodesOf(w);
          // Each round visits the nodes in another order.
          const shift = (orders[round] ?? 0) % Math.max(1, names.length);
          const order = [...names.slice(shift), ...names.slice(0, shift)];
          const writesBefore = log.writes;
          for (const nodeName of order) applyPlan(w, reconcileNode(inputFor(w, nodeName)), nodeName, log);
          const attacherWrites = attacherTick(w);
          quiet = log.writes === writesBefore && attacherWrites === 0;
        }
        const where = `\nstart: ${describeWorld(initial)}\nend:   ${describeWorld(w)}`;
        assert.ok(quiet, `no steady state after 12 rounds${where}`);
        assert.deepEqual(log.doubleAttach, [], `single-node volume attached to a second node${where}`);
        if (before.length === 0) assert.deepEqual(doubleAttached(w), [], where);
        for (const nodeName of nodesOf(w)) {
          assert.ok(
            reconcileNode(inputFor(w, nodeName)).steps.every((s) => !CHANGING.has(s.op)),
            `steady state still writes on ${nodeName}${where}`,
          );
          const desired = desiredOn(w, nodeName);
          const here = [...w.vas.values()].filter((va) => va.spec.nodeName === nodeName);
          for (const pvName of desired) {
            if (here.some((va) => va.spec.source.persistentVolumeName === pvName)) continue;
            const pv = w.pvs.get(pvName)!;
            const elsewhere = [...w.vas.values()].some(
              (va) => va.spec.source.persistentVolumeName === pvName,
            );
            assert.ok(
              singleNode(pv) && elsewhere,
              `${pvName} is wanted on ${nodeName} but not attached${where}`,
            );
          }
          const node = w.nodes.get(nodeName);
          for (const va of here) {
            const pvName = va.spec.source.persistentVolumeName!;
            if (desired.has(pvName)) continue;
            const csi = w.pvs.get(pvName)?.spec.csi;
            const mounted =
              csi !== undefined &&
              (node?.status?.volumesInUse ?? []).includes(
                uniqueVolumeName(va.spec.attacher, csi.volumeHandle),
              );
            assert.ok(mounted, `${pvName} stays attached to ${nodeName} with no pod and no mount${where}`);
          }
        }
        for (const pv of w.pvs.values()) {
          const lock = pv.metadata.annotations?.[annAttachLock];
          if (lock === undefined) continue;
          const holds = [...w.vas.values()].some(
            (va) => va.spec.nodeName === lock && va.spec.source.persistentVolumeName === pv.metadata.name,
          );
          assert.ok(
            holds || desiredOn(w, lock).has(pv.metadata.name),
            `${pv.metadata.name}: stale lock of ${lock}${where}`,
          );
        }
      }),
      params(Math.ceil(RUNS / 2)),
    );
  });

  it("reconciles of several nodes planned from one snapshot and written interleaved never attach a single-node PV twice", () => {
    // The lock protocol's claim (constants.ts annAttachLock): the plans race, the conditional lock
    // writes decide. Catches: an unconditional lock write (last writer wins: both nodes attach), or a
    // create-attachment for a lock this snapshot did not see held by this node.
    fc.assert(
      fc.property(worldArb, fc.array(fc.nat(), { minLength: 1, maxLength: 40 }), (initial, schedule) => {
        const w = cloneWorld(initial);
        const before = doubleAttached(w);
        const log: ApplyLog = { writes: 0, doubleAttach: [] };
        const queues = nodesOf(w).map((nodeName) => ({
          nodeName,
          steps: [...reconcileNode(inputFor(w, nodeName)).steps],
        }));
        let live = queues.filter((q) => q.steps.length > 0);
        for (let i = 0; live.length > 0; i++) {
          const q = live[(schedule[i % schedule.length] ?? 0) % live.length]!;
          const step = q.steps.shift()!;
          try {
            applyStep(w, step, q.nodeName, log);
          } catch (err) {
            if (!(err instanceof Conflict)) throw err;
            q.steps = []; // lost the race: the runtime decides again from a fresh read
          }
          live = live.filter((x) => x.steps.length > 0);
        }
        const where = `\nstart: ${describeWorld(initial)}\nend:   ${describeWorld(w)}`;
        assert.deepEqual(log.doubleAttach, [], `single-node volume attached to a second node${where}`);
        if (before.length === 0) assert.deepEqual(doubleAttached(w), [], where);
      }),
      params(),
    );
  });
});

// ---- the attacher ------------------------------------------------------------------

const finalizer = attacherFinalizer(ours);

const vaArb: fc.Arbitrary<VolumeAttachment> = fc
  .record({
    attacher: fc.constantFrom(ours, ours, ours, other),
    pv: fc.constantFrom("pv-1", "pv-2"),
    node: fc.constantFrom("node-1", "node-2"),
    deleting: fc.constantFrom(false, false, true),
    finalizers: subset([finalizer, "other.example.com/keep"]),
    nodeId: fc.constantFrom<string | undefined>(undefined, "node-1-id", "stale-id"),
    attached: fc.constantFrom<boolean | undefined>(undefined, true, false),
    attachError: fc.boolean(),
    detachError: fc.boolean(),
    metadata: fc.constantFrom<Record<string, string> | undefined>(undefined, { devicePath: "/dev/x" }),
    backoff: fc.constantFrom<"none" | "attach-past" | "attach-future" | "detach-future" | "garbage">(
      "none",
      "none",
      "attach-past",
      "attach-future",
      "detach-future",
      "garbage",
    ),
    failures: fc.constantFrom<string | undefined>(undefined, "1", "7", "x"),
  })
  .map((r): VolumeAttachment => {
    const annotations: Record<string, string> = {};
    if (r.nodeId) annotations[annNodeId] = r.nodeId;
    const [failuresKey, retryKey] = r.backoff.startsWith("detach")
      ? [backoffAnnotations[2], backoffAnnotations[3]]
      : [backoffAnnotations[0], backoffAnnotations[1]];
    if (r.backoff !== "none") {
      annotations[retryKey] = r.backoff === "garbage" ? "soon" : r.backoff.endsWith("past") ? past : future;
      if (r.failures) annotations[failuresKey] = r.failures;
    }
    return {
      apiVersion: "storage.k8s.io/v1",
      kind: "VolumeAttachment",
      metadata: {
        name: `va-${r.pv}-${r.node}`,
        uid: "va-uid",
        resourceVersion: "7",
        annotations,
        ...(r.finalizers.length > 0 ? { finalizers: r.finalizers } : {}),
        ...(r.deleting ? { deletionTimestamp: past } : {}),
      },
      spec: { attacher: r.attacher, nodeName: r.node, source: { persistentVolumeName: r.pv } },
      ...(r.attached === undefined
        ? {}
        : {
            status: {
              attached: r.attached,
              ...(r.metadata ? { attachmentMetadata: r.metadata } : {}),
              ...(r.attachError ? { attachError: volumeError("boom", new Date(past), 14) } : {}),
              ...(r.detachError ? { detachError: volumeError("bang", new Date(past)) } : {}),
            },
          }),
    };
  });

const handlers: AttachHandler[] = [
  new CsiHandler(ours, {
    publish: { publishReadonly: true, singleNodeMultiWriter: false, defaultFsType: "" },
    reconciles: true,
  }),
  new TrivialHandler(ours),
];

/** RFC 7386 merge patch, as the API server applies the attacher's metadata patches. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== "object" || Array.isArray(patch)) return patch;
  const base: Record<string, unknown> =
    target !== null && typeof target === "object" && !Array.isArray(target)
      ? { ...(target as Record<string, unknown>) }
      : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete base[k];
    else base[k] = mergePatch(base[k], v);
  }
  return base;
}

function applyMerge(va: VolumeAttachment, patch: MergePatch): VolumeAttachment {
  assert.equal(
    patch.metadata.resourceVersion,
    va.metadata.resourceVersion,
    "patch not conditional on what was read",
  );
  const out = mergePatch(va, patch) as VolumeAttachment;
  return {
    ...out,
    metadata: { ...out.metadata, resourceVersion: String(Number(va.metadata.resourceVersion) + 1) },
  };
}

function applyStrategic(va: VolumeAttachment, patch: StrategicPatch): VolumeAttachment {
  assert.equal(
    patch.metadata.resourceVersion,
    va.metadata.resourceVersion,
    "patch not conditional on what was read",
  );
  const out = applyStrategicMergePatch(
    va as unknown as JsonObject,
    patch,
    "volumeattachments",
  ) as unknown as VolumeAttachment;
  return {
    ...out,
    metadata: { ...out.metadata, resourceVersion: String(Number(va.metadata.resourceVersion) + 1) },
  };
}

function applyJson<T extends object>(o: T, ops: jsonpatch.Operation[]): T {
  const out = jsonpatch.applyPatch(structuredClone(o), ops, true, false).newDocument;
  return out;
}

/** The runtime's writes after a successful decision (attacher-controller attach / detach / writeStatus). */
function applyAttachmentDecision(
  va: VolumeAttachment,
  d: AttachmentDecision,
  h: AttachHandler,
): VolumeAttachment {
  switch (d.action) {
    case "attach": {
      const patch = prepareAttachmentPatch(va, h.finalizer ?? "", "node-1-id");
      const prepared = patch ? applyStrategic(va, patch) : va;
      return withoutBackoff({
        ...prepared,
        status: attachedStatus(prepared.status, { devicePath: "/dev/y" }),
      });
    }
    case "detach": {
      const patch = releaseAttachmentPatch(va, h.finalizer ?? "");
      const released = patch ? applyMerge(va, patch) : va;
      return { ...released, status: detachedStatus(released.status) };
    }
    case "mark-attached":
      return { ...va, status: attachedStatus(va.status, undefined) };
    case "mark-detached":
      return { ...va, status: detachedStatus(va.status) };
    default:
      return va;
  }
}

const volumeArb = fc
  .record({
    finalizers: subset([finalizer, "kubernetes.io/pv-protection", pvDeletionProtectionFinalizer]),
    deleting: fc.boolean(),
  })
  .map(
    (r): PersistentVolume => ({
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: {
        name: "pv-1",
        resourceVersion: "3",
        ...(r.finalizers.length > 0 ? { finalizers: r.finalizers } : {}),
        ...(r.deleting ? { deletionTimestamp: past } : {}),
      },
      spec: { accessModes: ["ReadWriteOnce"], csi: { driver: ours, volumeHandle: "vol-1" } },
    }),
  );

describe("attacher decisions", () => {
  it("never removes the PV finalizer while any VolumeAttachment references the PV, nor from a PV not being deleted", () => {
    // Catches: looking only at this driver's attachments or only at live (not deleting) ones (the PV,
    // and with it the volume handle a pending ControllerUnpublish needs, goes first: the volume stays
    // published forever), or releasing the PV of an attachment that is still attaching.
    fc.assert(
      fc.property(
        volumeArb,
        fc.array(vaArb, { maxLength: 4 }),
        fc.constantFrom(...handlers),
        (pv, attachments, h) => {
          const d = h.decideVolume(pv, attachments);
          if (d.action !== "remove-finalizer") return;
          assert.ok(pv.metadata.deletionTimestamp, "PV not being deleted");
          assert.ok((pv.metadata.finalizers ?? []).includes(finalizer));
          const users = attachments.filter((va) => va.spec.source.persistentVolumeName === pv.metadata.name);
          assert.deepEqual(
            users.map((va) => va.metadata.name),
            [],
            "still referenced",
          );
        },
      ),
      params(),
    );
  });

  it("attach, detach and mark decisions are idempotent on their own output", () => {
    // Catches: "already attached" checked on something attach does not write (ControllerPublish on
    // every event), a detach that leaves our finalizer (unpublished again forever), a status helper
    // that keeps attached=true after detach, or backoff annotations surviving a success.
    fc.assert(
      fc.property(vaArb, fc.constantFrom(...handlers), (va, h) => {
        const d = h.decideAttachment(va, { now });
        if (!["attach", "detach", "mark-attached", "mark-detached"].includes(d.action)) return;
        const next = applyAttachmentDecision(va, d, h);
        const again = h.decideAttachment(next, { now });
        assert.equal(again.action, "ignore", `${d.action} then ${JSON.stringify(again)}`);
        if (d.action === "attach") {
          assert.ok((next.metadata.finalizers ?? []).includes(finalizer));
          assert.equal(next.metadata.annotations?.[annNodeId], "node-1-id");
        }
        if (d.action === "detach") assert.ok(!(next.metadata.finalizers ?? []).includes(finalizer));
        // Other controllers' finalizers survive every write.
        for (const f of va.metadata.finalizers ?? [])
          if (f !== finalizer) assert.ok(next.metadata.finalizers?.includes(f));
      }),
      params(),
    );
  });

  it("a recorded failure backs off at once and not beyond its delay (no hot loop, no stall)", () => {
    // Catches: a retry-after rounded down or computed from the failure count before incrementing (the
    // next event retries at once: a hot loop of CSI calls), or a backoff that never ends.
    fc.assert(
      fc.property(vaArb, fc.constantFrom<"attach" | "detach">("attach", "detach"), (va, op) => {
        const h = handlers[0]!;
        const wanted =
          op === "attach" ? !va.metadata.deletionTimestamp : va.metadata.deletionTimestamp !== undefined;
        if (!wanted || va.spec.attacher !== ours) return;
        const { va: failed, delaySeconds } = withFailure(va, op, now);
        assert.ok(delaySeconds >= 1 && delaySeconds <= 300);
        assert.ok(backoffUntil(failed, op, now) !== undefined);
        const d = h.decideAttachment(failed, { now });
        if (op === "attach" && va.status?.attached) return; // attached: nothing to retry
        if (op === "detach" && !(va.metadata.finalizers ?? []).includes(finalizer)) return; // nothing published
        assert.equal(d.action, "backoff", JSON.stringify(d));
        const later = new Date(now.getTime() + (delaySeconds + 1) * 1000);
        assert.notEqual(h.decideAttachment(failed, { now: later }).action, "backoff");
      }),
      params(),
    );
  });

  it("patches are idempotent, conditional, and keep other controllers' finalizers in place", () => {
    // Catches: a patch computed again after it was applied (a write per event), a merge patch without
    // the resourceVersion or a JSON patch without its `test` (lost updates), or a finalizer list
    // written whole (another controller's finalizer added meanwhile dropped).
    fc.assert(
      fc.property(vaArb, volumeArb, fc.constantFrom("node-1-id", "node-2-id"), (va, pv, nodeId) => {
        const prepare = prepareAttachmentPatch(va, finalizer, nodeId);
        if (prepare) {
          const next = applyStrategic(va, prepare);
          assert.equal(prepareAttachmentPatch(next, finalizer, nodeId), undefined);
          assert.deepEqual(
            (next.metadata.finalizers ?? []).filter((f) => f !== finalizer),
            (va.metadata.finalizers ?? []).filter((f) => f !== finalizer),
          );
        }
        const release = releaseAttachmentPatch(va, finalizer);
        if (release) {
          const next = applyMerge(va, release);
          assert.equal(releaseAttachmentPatch(next, finalizer), undefined);
          assert.deepEqual(
            next.metadata.finalizers ?? [],
            (va.metadata.finalizers ?? []).filter((f) => f !== finalizer),
          );
          assert.ok(backoffAnnotations.every((k) => next.metadata.annotations?.[k] === undefined));
        }
        const add = addVolumeFinalizerPatch(pv, finalizer);
        if (add) {
          assert.equal(add[0]?.op, "test");
          const next = applyJson(pv, add as jsonpatch.Operation[]);
          assert.equal(addVolumeFinalizerPatch(next, finalizer), undefined);
          assert.deepEqual(next.metadata.finalizers, [...(pv.metadata.finalizers ?? []), finalizer]);
        }
        const remove = removeVolumeFinalizerPatch(pv, finalizer);
        if (remove) {
          assert.equal(remove[0]?.op, "test");
          const next = applyJson(pv, remove as jsonpatch.Operation[]);
          assert.equal(removeVolumeFinalizerPatch(next, finalizer), undefined);
          assert.deepEqual(
            next.metadata.finalizers,
            (pv.metadata.finalizers ?? []).filter((f) => f !== finalizer),
          );
          // Stale read: someone wrote the PV since; the patch must not apply.
          const moved = { ...pv, metadata: { ...pv.metadata, resourceVersion: "4" } };
          assert.throws(() => applyJson(moved, remove as jsonpatch.Operation[]));
        }
      }),
      params(),
    );
  });

  it("status helpers are idempotent and do what they say", () => {
    // Catches: attachedStatus keeping an old attachError, detachedStatus keeping metadata or
    // attached=true, or either not idempotent (a status write on every event).
    fc.assert(
      fc.property(
        vaArb,
        fc.option(fc.dictionary(fc.string({ maxLength: 3 }), fc.string({ maxLength: 3 }), { maxKeys: 2 }), {
          nil: undefined,
        }),
        (va, meta) => {
          const a = attachedStatus(va.status, meta);
          assert.deepEqual(attachedStatus(a, meta), a);
          assert.equal(a.attached, true);
          assert.equal(a.attachError, undefined);
          const d = detachedStatus(va.status);
          assert.deepEqual(detachedStatus(d), d);
          assert.equal(d.attached, false);
          assert.equal(d.attachmentMetadata, undefined);
          assert.equal(d.detachError, undefined);
          const e = withAttachError(va.status, volumeError("x", now));
          assert.equal(e.attached, va.status?.attached ?? false);
        },
      ),
      params(),
    );
  });

  it("the ListVolumes comparison finds nothing once each mismatch is repaired", () => {
    // Catches: a mismatch test that a forced sync cannot satisfy (every resync re-publishes the
    // same attachments forever).
    const csiNode: CSINode = {
      apiVersion: "storage.k8s.io/v1",
      kind: "CSINode",
      metadata: { name: "node-1" },
      spec: { drivers: [{ name: ours, nodeID: "node-1-id" }] },
    };
    const pvs = new Map(
      ["pv-1", "pv-2"].map((name): [string, PersistentVolume] => [
        name,
        {
          apiVersion: "v1",
          kind: "PersistentVolume",
          metadata: { name },
          spec: { csi: { driver: ours, volumeHandle: `h-${name}` } },
        },
      ]),
    );
    fc.assert(
      fc.property(
        // Names are unique in the API.
        fc.uniqueArray(vaArb, { maxLength: 4, selector: (va) => va.metadata.name }),
        fc.dictionary(fc.constantFrom("h-pv-1", "h-pv-2"), subset(["node-1-id", "node-2-id", "stale-id"])),
        (attachments, publishedObj) => {
          const published = new Map(Object.entries(publishedObj));
          const input = {
            driverName: ours,
            volumes: pvs,
            csiNodes: new Map([["node-1", csiNode]]),
            published,
          };
          const mismatches = findAttachmentMismatches({ ...input, attachments });
          const repaired = attachments.map((va) => {
            const m = mismatches.find((x) => x.name === va.metadata.name);
            return m
              ? { ...va, status: { ...(va.status ?? { attached: false }), attached: m.published } }
              : va;
          });
          assert.deepEqual(findAttachmentMismatches({ ...input, attachments: repaired }), []);
        },
      ),
      params(),
    );
  });
});
