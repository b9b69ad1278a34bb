// Properties of the protection decisions over random claims and pods
// (fast-check): a claim is freed only on a live list, never while a scheduled
// pod of its namespace names it, more pods never free it, a write changes
// nothing but the finalizer, and deciding again on the written object settles.
import assert from "node:assert/strict";
import { it } from "node:test";
import { isDeepStrictEqual } from "node:util";
import fc from "fast-check";
import type { PersistentVolume, PersistentVolumeClaim, Pod } from "../../shared/kube/types.ts";
import { pvcProtectionFinalizer, pvProtectionFinalizer } from "../../shared/kube/well-known.ts";
import { decideClaim } from "../../shared/protection/decide-claim.ts";
import { decideVolume } from "../../shared/protection/decide-volume.ts";

const other = "example.com/other";
const finalizersArb = fc.subarray([pvcProtectionFinalizer, other, pvcProtectionFinalizer]);

const claimArb = fc
  .record({
    name: fc.constantFrom("data", "web-0-cache"),
    deleting: fc.boolean(),
    finalizers: finalizersArb,
    owner: fc.option(fc.record({ uid: fc.constantFrom("uid-web-0", "uid-old"), controller: fc.boolean() }), {
      nil: undefined,
    }),
  })
  .map(
    ({ name, deleting, finalizers, owner }): PersistentVolumeClaim => ({
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: {
        name,
        namespace: "ns",
        resourceVersion: "11",
        finalizers,
        ...(deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}),
        ...(owner ? { ownerReferences: [{ kind: "Pod", name: "web-0", ...owner }] } : {}),
      },
      spec: { accessModes: ["ReadWriteOnce"] },
    }),
  );

const podArb = fc
  .record({
    name: fc.constantFrom("web-0", "job", "other"),
    namespace: fc.constantFrom("ns", "ns", "elsewhere"),
    scheduled: fc.boolean(),
    phase: fc.constantFrom("Pending", "Running", "Succeeded", "Failed"),
    grace: fc.constantFrom(undefined, 0, 30),
    claimRef: fc.option(fc.constantFrom("data", "web-0-cache", "unrelated"), { nil: undefined }),
    ephemeral: fc.option(fc.constantFrom("cache", "scratch"), { nil: undefined }),
  })
  .map(
    (p): Pod => ({
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name: p.name,
        namespace: p.namespace,
        uid: `uid-${p.name}`,
        ...(p.grace === undefined
          ? {}
          : { deletionTimestamp: "2026-01-01T00:00:30Z", deletionGracePeriodSeconds: p.grace }),
      },
      spec: {
        ...(p.scheduled ? { nodeName: "node-a" } : {}),
        volumes: [
          ...(p.claimRef ? [{ name: "d", persistentVolumeClaim: { claimName: p.claimRef } }] : []),
          ...(p.ephemeral ? [{ name: p.ephemeral, ephemeral: { volumeClaimTemplate: {} } }] : []),
        ],
      },
      status: { phase: p.phase },
    }),
  );

/** A scheduled pod of the claim's namespace naming it directly: whatever else is true, it holds the claim. */
function namesDirectly(pod: Pod, claim: PersistentVolumeClaim): boolean {
  return (
    Boolean(pod.spec.nodeName) &&
    pod.metadata.namespace === claim.metadata.namespace &&
    (pod.spec.volumes ?? []).some((v) => v.persistentVolumeClaim?.claimName === claim.metadata.name)
  );
}

function withoutFinalizers<T extends { metadata: { finalizers?: string[] } }>(o: T): T {
  return { ...o, metadata: { ...o.metadata, finalizers: [] } };
}

const runs = { numRuns: 400 };

it("a claim is freed only on a live list that no scheduled pod naming it is in, and more pods never free it", () => {
  fc.assert(
    fc.property(
      claimArb,
      fc.array(podArb, { maxLength: 4 }),
      fc.array(podArb, { maxLength: 4 }),
      fc.array(podArb, { minLength: 1, maxLength: 3 }),
      (claim, cachedPods, livePods, extraPods) => {
        const step = decideClaim({ claim, cachedPods, livePods });
        const withoutLive = decideClaim({ claim, cachedPods });
        assert.notEqual(withoutLive.op, "remove-finalizer", "never removed on pods at hand alone");
        const more = decideClaim({ claim, cachedPods, livePods: [...livePods, ...extraPods] });
        if (more.op === "remove-finalizer")
          assert.equal(step.op, "remove-finalizer", "fewer pods free it too");
        if (step.op === "keep") assert.equal(more.op, "keep", "a kept claim stays kept with more pods");
        if (step.op !== "remove-finalizer") return;
        for (const pod of [...cachedPods, ...livePods]) assert.ok(!namesDirectly(pod, claim));
      },
    ),
    runs,
  );
});

it("a write changes only the pvc-protection finalizer, and deciding on what was written does nothing more", () => {
  fc.assert(
    fc.property(claimArb, fc.array(podArb, { maxLength: 4 }), (claim, livePods) => {
      const step = decideClaim({ claim, livePods });
      if (step.op !== "add-finalizer" && step.op !== "remove-finalizer") return;
      const written = step.claim;
      assert.deepEqual(withoutFinalizers(written), withoutFinalizers(claim), "nothing but finalizers");
      assert.equal(
        written.metadata.resourceVersion,
        claim.metadata.resourceVersion,
        "conditional on the read",
      );
      const otherFinalizers = (f: string[] | undefined) =>
        (f ?? []).filter((x) => x !== pvcProtectionFinalizer);
      assert.deepEqual(
        otherFinalizers(written.metadata.finalizers),
        otherFinalizers(claim.metadata.finalizers),
      );
      assert.equal(
        written.metadata.finalizers?.includes(pvcProtectionFinalizer),
        step.op === "add-finalizer",
      );
      const again = decideClaim({ claim: written, livePods });
      assert.equal(again.op, "none", JSON.stringify(again));
    }),
    runs,
  );
});

it("a PV keeps pv-protection while Bound and settles after one write", () => {
  const volumeArb = fc
    .record({
      phase: fc.option(fc.constantFrom("Pending", "Available", "Bound", "Released", "Failed"), {
        nil: undefined,
      }),
      deleting: fc.boolean(),
      finalizers: fc.subarray([pvProtectionFinalizer, other]),
    })
    .map(
      ({ phase, deleting, finalizers }): PersistentVolume => ({
        apiVersion: "v1",
        kind: "PersistentVolume",
        metadata: {
          name: "pv",
          resourceVersion: "5",
          finalizers,
          ...(deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}),
        },
        spec: {},
        ...(phase ? { status: { phase } } : {}),
      }),
    );
  fc.assert(
    fc.property(volumeArb, (volume) => {
      const step = decideVolume(volume);
      if (volume.status?.phase === "Bound") assert.notEqual(step.op, "remove-finalizer");
      if (step.op !== "add-finalizer" && step.op !== "remove-finalizer") return;
      assert.ok(isDeepStrictEqual(withoutFinalizers(step.volume), withoutFinalizers(volume)));
      assert.equal(decideVolume(step.volume).op, "none");
    }),
    runs,
  );
});
