// The protection decisions as tables: a claim or PV and the pods at hand in,
// the one step out (upstream's pvc_protection_controller_test and
// pv_protection_controller_test cases, in this project's shape), and which
// pod changes send their claims to be checked.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { podClaimNames } from "../../shared/kube/pod-claims.ts";
import { isPodTerminated } from "../../shared/kube/pod-terminated.ts";
import type { PersistentVolume, PersistentVolumeClaim, Pod } from "../../shared/kube/types.ts";
import { pvcProtectionFinalizer, pvProtectionFinalizer } from "../../shared/kube/well-known.ts";
import { type ClaimStep, claimNeedsNoSync, decideClaim } from "../../shared/protection/decide-claim.ts";
import { decideVolume, type VolumeStep, volumeNeedsNoSync } from "../../shared/protection/decide-volume.ts";
import { podFromEvent } from "../../shared/protection/pod-from-event.ts";
import { podIsShutDown, podMayFreeClaims } from "../../shared/protection/pod-usage.ts";

const deletedAt = "2026-01-01T00:00:00Z";

function claim(
  name: string,
  opts: { deleting?: boolean; finalizers?: string[]; owner?: { uid: string; controller?: boolean } } = {},
): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: {
      name,
      namespace: "ns",
      uid: `uid-${name}`,
      resourceVersion: "7",
      finalizers: opts.finalizers ?? [pvcProtectionFinalizer],
      ...(opts.deleting ? { deletionTimestamp: deletedAt } : {}),
      ...(opts.owner
        ? {
            ownerReferences: [
              {
                apiVersion: "v1",
                kind: "Pod",
                name: "owner",
                uid: opts.owner.uid,
                ...(opts.owner.controller === undefined ? {} : { controller: opts.owner.controller }),
              },
            ],
          }
        : {}),
    },
    spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
  };
}

interface PodOptions {
  claim?: string;
  ephemeral?: string;
  nodeName?: string | null;
  namespace?: string;
  phase?: string;
  deletionGracePeriodSeconds?: number;
  containers?: Record<string, unknown>[];
  initContainers?: Record<string, unknown>[];
}

function pod(name: string, o: PodOptions = {}): Pod {
  const volumes = [
    ...(o.claim ? [{ name: "data", persistentVolumeClaim: { claimName: o.claim } }] : []),
    ...(o.ephemeral ? [{ name: o.ephemeral, ephemeral: { volumeClaimTemplate: { spec: {} } } }] : []),
  ];
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace: o.namespace ?? "ns",
      uid: `uid-${name}`,
      ...(o.deletionGracePeriodSeconds === undefined
        ? {}
        : { deletionTimestamp: deletedAt, deletionGracePeriodSeconds: o.deletionGracePeriodSeconds }),
    },
    spec: { ...(o.nodeName === null ? {} : { nodeName: o.nodeName ?? "node-a" }), volumes },
    status: {
      phase: o.phase ?? "Running",
      ...(o.containers ? { containerStatuses: o.containers } : {}),
      ...(o.initContainers ? { initContainerStatuses: o.initContainers } : {}),
    },
  };
}

const running = { name: "c", state: { running: { startedAt: deletedAt } } };
const terminated = { name: "c", state: { terminated: { exitCode: 0 } } };
const waiting = { name: "c", state: { waiting: { reason: "ContainerCreating" } } };

/** A step as a line: what would be written (finalizers of the PUT body) or why not. */
function describeClaimStep(s: ClaimStep): string {
  switch (s.op) {
    case "add-finalizer":
    case "remove-finalizer":
      return `${s.op} -> [${(s.claim.metadata.finalizers ?? []).join(",")}] @rv ${s.claim.metadata.resourceVersion}`;
    case "list-pods":
      return `list-pods ${s.namespace}`;
    case "keep":
    case "none":
      return `${s.op}: ${s.reason}`;
  }
}

function describeVolumeStep(s: VolumeStep): string {
  switch (s.op) {
    case "add-finalizer":
    case "remove-finalizer":
      return `${s.op} -> [${(s.volume.metadata.finalizers ?? []).join(",")}] @rv ${s.volume.metadata.resourceVersion}`;
    case "keep":
    case "none":
      return `${s.op}: ${s.reason}`;
  }
}

const other = "example.com/keep-me";

describe("pvc-protection: one claim, the pods at hand and the live list", () => {
  const cases: {
    name: string;
    claim: PersistentVolumeClaim;
    cachedPods?: Pod[];
    livePods?: Pod[];
    expected: string;
  }[] = [
    {
      name: "a claim with the finalizer, not being deleted: nothing",
      claim: claim("c"),
      livePods: [],
      expected: "none: protected",
    },
    {
      name: "a claim without the finalizer (made before admission added it): the finalizer is appended",
      claim: claim("c", { finalizers: [other] }),
      expected: `add-finalizer -> [${other},${pvcProtectionFinalizer}] @rv 7`,
    },
    {
      name: "a claim with no finalizers at all: added",
      claim: claim("c", { finalizers: [] }),
      expected: `add-finalizer -> [${pvcProtectionFinalizer}] @rv 7`,
    },
    {
      name: "being deleted, no pod at hand uses it: only a live list can tell",
      claim: claim("c", { deleting: true }),
      cachedPods: [pod("elsewhere", { claim: "other-claim" })],
      expected: "list-pods ns",
    },
    {
      name: "being deleted and a pod at hand uses it: kept without listing",
      claim: claim("c", { deleting: true }),
      cachedPods: [pod("p", { claim: "c" })],
      expected: "keep: used by pod ns/p",
    },
    {
      name: "being deleted, the live list is empty: removed, other finalizers stay",
      claim: claim("c", { deleting: true, finalizers: [other, pvcProtectionFinalizer] }),
      livePods: [],
      expected: `remove-finalizer -> [${other}] @rv 7`,
    },
    {
      name: "being deleted, the finalizer twice: every copy goes",
      claim: claim("c", {
        deleting: true,
        finalizers: [pvcProtectionFinalizer, other, pvcProtectionFinalizer],
      }),
      livePods: [],
      expected: `remove-finalizer -> [${other}] @rv 7`,
    },
    {
      name: "being deleted, a running scheduled pod uses it: kept",
      claim: claim("c", { deleting: true }),
      livePods: [pod("a", { claim: "other" }), pod("p", { claim: "c" })],
      expected: "keep: used by pod ns/p",
    },
    {
      name: "being deleted, the only user is not scheduled (the kubelet will not start it): removed",
      claim: claim("c", { deleting: true }),
      livePods: [pod("p", { claim: "c", nodeName: null })],
      expected: "remove-finalizer -> [] @rv 7",
    },
    {
      name: "being deleted, the user finished (Succeeded) but is not deleted: kept",
      claim: claim("c", { deleting: true }),
      livePods: [pod("p", { claim: "c", phase: "Succeeded" })],
      expected: "keep: used by pod ns/p",
    },
    {
      name: "being deleted, the user Failed but is not deleted: kept",
      claim: claim("c", { deleting: true }),
      livePods: [pod("p", { claim: "c", phase: "Failed" })],
      expected: "keep: used by pod ns/p",
    },
    {
      name: "being deleted, the user is terminating with a grace period: kept until it is gone",
      claim: claim("c", { deleting: true }),
      livePods: [pod("p", { claim: "c", deletionGracePeriodSeconds: 30 })],
      expected: "keep: used by pod ns/p",
    },
    {
      name: "being deleted, the user is shut down (grace 0): a claim it names directly is still kept",
      claim: claim("c", { deleting: true }),
      livePods: [pod("p", { claim: "c", deletionGracePeriodSeconds: 0 })],
      expected: "keep: used by pod ns/p",
    },
    {
      name: "being deleted, a pod of another namespace names a claim of the same name: removed",
      claim: claim("c", { deleting: true }),
      livePods: [pod("p", { claim: "c", namespace: "other-ns" })],
      expected: "remove-finalizer -> [] @rv 7",
    },
    {
      name: "ephemeral: the claim <pod>-<volume> controlled by the pod is kept",
      claim: claim("p-scratch", { deleting: true, owner: { uid: "uid-p", controller: true } }),
      livePods: [pod("p", { ephemeral: "scratch" })],
      expected: "keep: used by pod ns/p",
    },
    {
      name: "ephemeral: a claim of that name the pod does not control is not the pod's: removed",
      claim: claim("p-scratch", { deleting: true, owner: { uid: "uid-p" } }),
      livePods: [pod("p", { ephemeral: "scratch" })],
      expected: "remove-finalizer -> [] @rv 7",
    },
    {
      name: "ephemeral: controlled by another pod of the same name (a new UID): removed",
      claim: claim("p-scratch", { deleting: true, owner: { uid: "uid-old", controller: true } }),
      livePods: [pod("p", { ephemeral: "scratch" })],
      expected: "remove-finalizer -> [] @rv 7",
    },
    {
      name: "ephemeral: the owning pod is shut down (deleted with grace 0): removed",
      claim: claim("p-scratch", { deleting: true, owner: { uid: "uid-p", controller: true } }),
      livePods: [pod("p", { ephemeral: "scratch", deletionGracePeriodSeconds: 0 })],
      expected: "remove-finalizer -> [] @rv 7",
    },
    {
      name: "ephemeral: the owning pod is terminating with a grace period: kept",
      claim: claim("p-scratch", { deleting: true, owner: { uid: "uid-p", controller: true } }),
      livePods: [pod("p", { ephemeral: "scratch", deletionGracePeriodSeconds: 30 })],
      expected: "keep: used by pod ns/p",
    },
    {
      name: "being deleted without pvc-protection (another finalizer holds it): nothing",
      claim: claim("c", { deleting: true, finalizers: [other] }),
      livePods: [],
      expected: "none: being deleted, not held by pvc-protection",
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const before = structuredClone(c.claim);
      const step = decideClaim({
        claim: c.claim,
        ...(c.cachedPods ? { cachedPods: c.cachedPods } : {}),
        ...(c.livePods ? { livePods: c.livePods } : {}),
      });
      assert.equal(describeClaimStep(step), c.expected);
      assert.deepEqual(c.claim, before, "the input claim is not changed");
    });
  }

  it("pods at hand never free a claim: with no live list it is always list-pods, never a removal", () => {
    for (const cachedPods of [[], [pod("p", { claim: "c", nodeName: null })], [pod("q", { claim: "x" })]]) {
      const step = decideClaim({ claim: claim("c", { deleting: true }), cachedPods });
      assert.equal(step.op, "list-pods");
    }
  });

  it("an event's copy needs no read exactly when decideClaim would do nothing", () => {
    assert.equal(claimNeedsNoSync(claim("c")), true);
    assert.equal(claimNeedsNoSync(claim("c", { finalizers: [] })), false);
    assert.equal(claimNeedsNoSync(claim("c", { deleting: true })), false);
    assert.equal(claimNeedsNoSync(claim("c", { deleting: true, finalizers: [other] })), true);
  });
});

describe("pv-protection: one PV", () => {
  function volume(phase: string | undefined, opts: { deleting?: boolean; finalizers?: string[] } = {}) {
    return {
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: {
        name: "pv",
        resourceVersion: "3",
        finalizers: opts.finalizers ?? [pvProtectionFinalizer],
        ...(opts.deleting ? { deletionTimestamp: deletedAt } : {}),
      },
      spec: { capacity: { storage: "1Gi" }, accessModes: ["ReadWriteOnce"] },
      ...(phase ? { status: { phase } } : {}),
    } satisfies PersistentVolume;
  }
  const cases: { name: string; volume: PersistentVolume; expected: string }[] = [
    { name: "protected, not being deleted: nothing", volume: volume("Bound"), expected: "none: protected" },
    {
      name: "lacking the finalizer: appended",
      volume: volume("Available", { finalizers: [other] }),
      expected: `add-finalizer -> [${other},${pvProtectionFinalizer}] @rv 3`,
    },
    {
      name: "being deleted while Bound: kept",
      volume: volume("Bound", { deleting: true }),
      expected: "keep: Bound",
    },
    {
      name: "being deleted, Released: removed",
      volume: volume("Released", { deleting: true, finalizers: [pvProtectionFinalizer, other] }),
      expected: `remove-finalizer -> [${other}] @rv 3`,
    },
    {
      name: "being deleted, Available: removed",
      volume: volume("Available", { deleting: true }),
      expected: "remove-finalizer -> [] @rv 3",
    },
    {
      name: "being deleted, Failed: removed",
      volume: volume("Failed", { deleting: true }),
      expected: "remove-finalizer -> [] @rv 3",
    },
    {
      name: "being deleted, no phase yet: removed (only Bound holds it)",
      volume: volume(undefined, { deleting: true }),
      expected: "remove-finalizer -> [] @rv 3",
    },
    {
      name: "being deleted without pv-protection: nothing",
      volume: volume("Bound", { deleting: true, finalizers: [other] }),
      expected: "none: being deleted, not held by pv-protection",
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      assert.equal(describeVolumeStep(decideVolume(c.volume)), c.expected);
      assert.equal(volumeNeedsNoSync(c.volume), c.expected.startsWith("none"));
    });
  }
});

describe("pod changes that send their claims to be checked", () => {
  const cases: { name: string; pod: Pod; deleted?: boolean; frees: boolean }[] = [
    {
      name: "running on its node: frees nothing",
      pod: pod("p", { claim: "c", containers: [running] }),
      frees: false,
    },
    { name: "deleted", pod: pod("p", { claim: "c", containers: [running] }), deleted: true, frees: true },
    { name: "not scheduled", pod: pod("p", { claim: "c", nodeName: null }), frees: true },
    { name: "Succeeded", pod: pod("p", { claim: "c", phase: "Succeeded" }), frees: true },
    { name: "Failed", pod: pod("p", { claim: "c", phase: "Failed" }), frees: true },
    {
      name: "terminating, every container terminated or waiting",
      pod: pod("p", { claim: "c", deletionGracePeriodSeconds: 30, containers: [terminated, waiting] }),
      frees: true,
    },
    {
      name: "terminating, no container status yet",
      pod: pod("p", { claim: "c", deletionGracePeriodSeconds: 30 }),
      frees: true,
    },
    {
      name: "terminating, a container still running",
      pod: pod("p", { claim: "c", deletionGracePeriodSeconds: 30, containers: [terminated, running] }),
      frees: false,
    },
    {
      name: "terminating, an init container still running",
      pod: pod("p", {
        claim: "c",
        deletionGracePeriodSeconds: 30,
        containers: [waiting],
        initContainers: [running],
      }),
      frees: false,
    },
    {
      name: "terminating, a container status without a state counts as running",
      pod: pod("p", { claim: "c", deletionGracePeriodSeconds: 30, containers: [{ name: "c" }] }),
      frees: false,
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      assert.equal(podMayFreeClaims(c.pod, c.deleted ?? false), c.frees);
    });
  }

  it("terminated as the volume code says: phase, or deletion with nothing running", () => {
    assert.equal(isPodTerminated(pod("p", { phase: "Running" })), false);
    assert.equal(isPodTerminated(pod("p", { phase: "Pending", deletionGracePeriodSeconds: 0 })), true);
  });

  it("shut down means deleted with a zero grace period", () => {
    assert.equal(podIsShutDown(pod("p", { deletionGracePeriodSeconds: 0 })), true);
    assert.equal(podIsShutDown(pod("p", { deletionGracePeriodSeconds: 30 })), false);
    assert.equal(podIsShutDown(pod("p")), false);
  });

  it("a pod's claims: persistentVolumeClaim names and <pod>-<volume> for ephemeral volumes, nothing else", () => {
    const p = pod("web-0", { claim: "data-claim", ephemeral: "cache" });
    p.spec.volumes?.push({ name: "tmp", emptyDir: {} } as never, {
      name: "again",
      persistentVolumeClaim: { claimName: "data-claim" },
    });
    assert.deepEqual(podClaimNames(p), ["data-claim", "web-0-cache"]);
    assert.deepEqual(podClaimNames(pod("bare")), []);
  });
});

describe("an event's Pod is checked before its volumes route anything", () => {
  const good = pod("p", { claim: "c", ephemeral: "scratch" }) as unknown as Record<string, unknown>;
  it("a well-formed pod passes as it is", () => {
    assert.equal(podFromEvent(good), good);
  });
  const bad: { name: string; object: Record<string, unknown>; message: RegExp }[] = [
    { name: "spec missing", object: { metadata: { name: "p" } }, message: /spec must be an object/ },
    {
      name: "volumes not a list",
      object: { metadata: { name: "p" }, spec: { volumes: "data" } },
      message: /spec.volumes must be a list/,
    },
    {
      name: "a claim name that is a path",
      object: {
        metadata: { name: "p" },
        spec: { volumes: [{ name: "d", persistentVolumeClaim: { claimName: "../secrets/x" } }] },
      },
      message: /claimName/,
    },
    {
      name: "a volume name that is no DNS label",
      object: { metadata: { name: "p" }, spec: { volumes: [{ name: "A B", ephemeral: {} }] } },
      message: /spec.volumes\[0\].name/,
    },
    {
      name: "nodeName of another type",
      object: { metadata: { name: "p" }, spec: { nodeName: 3 } },
      message: /spec.nodeName must be a string/,
    },
    {
      name: "grace period of another type",
      object: { metadata: { name: "p", deletionGracePeriodSeconds: "0" }, spec: {} },
      message: /deletionGracePeriodSeconds must be a number/,
    },
  ];
  for (const c of bad) {
    it(`refused with 400: ${c.name}`, () => {
      assert.throws(
        () => podFromEvent(c.object),
        (err: unknown) => (err as { status?: number }).status === 400 && c.message.test(String(err)),
      );
    });
  }
});
