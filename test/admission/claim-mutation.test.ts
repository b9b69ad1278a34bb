// PVC CREATE mutation, as a table: which class, which annotations, which
// finalizers, from the claim and the cluster's StorageClasses. Then the same
// through the hook: the patch, decoded and applied to the original claim.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { claimMutationNeedsClasses, mutateClaimOnCreate } from "../../shared/admission/claim-mutation.ts";
import { defaultAdmissionConfig } from "../../shared/admission/config.ts";
import { mutateClaimsHook } from "../../shared/admission/hooks.ts";
import { parseAdmissionReview } from "../../shared/admission/review.ts";
import type { PersistentVolumeClaim, StorageClass } from "../../shared/kube/types.ts";
import { claim, fakeLookups, ourDriver, patched, review, storageClass } from "./fixtures.ts";

const GA = "volume.kubernetes.io/storage-provisioner";
const BETA = "volume.beta.kubernetes.io/storage-provisioner";
const PVC_PROTECTION = "kubernetes.io/pvc-protection";
const INTENT = "storage.kube-storage-functions.io/provisioning";
const ours = new Set([ourDriver]);

interface Case {
  name: string;
  claim: PersistentVolumeClaim;
  classes: StorageClass[] | undefined;
  expect: {
    storageClassName?: string | null;
    annotations?: Record<string, string>;
    finalizers: string[];
  };
}

const handedToUs = { [GA]: ourDriver, [BETA]: ourDriver };

const cases: Case[] = [
  {
    name: "no class: the default class, protection, hand-over and our intent",
    claim: claim("a"),
    classes: [storageClass("fast", { isDefault: true }), storageClass("slow")],
    expect: { storageClassName: "fast", annotations: handedToUs, finalizers: [PVC_PROTECTION, INTENT] },
  },
  {
    name: "no class and no default class: protection only",
    claim: claim("a"),
    classes: [storageClass("fast"), storageClass("slow")],
    expect: { finalizers: [PVC_PROTECTION] },
  },
  {
    name: "several defaults: the newest wins",
    claim: claim("a"),
    classes: [
      storageClass("old", { isDefault: true, created: "2024-01-01T00:00:00Z" }),
      storageClass("new", { isDefault: true, created: "2024-06-01T00:00:00Z" }),
    ],
    expect: { storageClassName: "new", annotations: handedToUs, finalizers: [PVC_PROTECTION, INTENT] },
  },
  {
    name: "several defaults of the same age: the first name wins",
    claim: claim("a"),
    classes: [storageClass("zeta", { isDefault: true }), storageClass("alpha", { isDefault: "beta" })],
    expect: { storageClassName: "alpha", annotations: handedToUs, finalizers: [PVC_PROTECTION, INTENT] },
  },
  {
    name: 'storageClassName "" means no class: no default, no hand-over',
    claim: claim("a", { spec: { storageClassName: "" } }),
    classes: [storageClass("fast", { isDefault: true })],
    expect: { storageClassName: "", finalizers: [PVC_PROTECTION] },
  },
  {
    name: "the beta class annotation counts as a class and names the provisioner's class",
    claim: claim("a", { metadata: { annotations: { "volume.beta.kubernetes.io/storage-class": "slow" } } }),
    classes: [
      storageClass("fast", { isDefault: true }),
      storageClass("slow", { provisioner: "other.csi.io" }),
    ],
    expect: {
      annotations: {
        "volume.beta.kubernetes.io/storage-class": "slow",
        [GA]: "other.csi.io",
        [BETA]: "other.csi.io",
      },
      finalizers: [PVC_PROTECTION],
    },
  },
  {
    name: "a named class with someone else's provisioner: hand-over, no intent of ours",
    claim: claim("a", { spec: { storageClassName: "theirs" } }),
    classes: [storageClass("theirs", { provisioner: "ebs.csi.aws.com" })],
    expect: {
      storageClassName: "theirs",
      annotations: { [GA]: "ebs.csi.aws.com", [BETA]: "ebs.csi.aws.com" },
      finalizers: [PVC_PROTECTION],
    },
  },
  {
    name: "WaitForFirstConsumer: no hand-over until the scheduler picks a node",
    claim: claim("a", { spec: { storageClassName: "late" } }),
    classes: [storageClass("late", { bindingMode: "WaitForFirstConsumer" })],
    expect: { storageClassName: "late", finalizers: [PVC_PROTECTION] },
  },
  {
    name: "a class that does not exist: nothing class-dependent",
    claim: claim("a", { spec: { storageClassName: "missing" } }),
    classes: [storageClass("fast", { isDefault: true })],
    expect: { storageClassName: "missing", finalizers: [PVC_PROTECTION] },
  },
  {
    name: "an in-tree provisioner name (no-provisioner): never handed over",
    claim: claim("a", { spec: { storageClassName: "local" } }),
    classes: [storageClass("local", { provisioner: "kubernetes.io/no-provisioner" })],
    expect: { storageClassName: "local", finalizers: [PVC_PROTECTION] },
  },
  {
    name: "a pre-bound claim is bound, not provisioned",
    claim: claim("a", { spec: { storageClassName: "fast", volumeName: "pv-1" } }),
    classes: [storageClass("fast")],
    expect: { storageClassName: "fast", finalizers: [PVC_PROTECTION] },
  },
  {
    name: "StorageClasses unknown (lookup failed): protection only",
    claim: claim("a"),
    classes: undefined,
    expect: { finalizers: [PVC_PROTECTION] },
  },
  {
    name: "finalizers already there are kept, in order, and not repeated",
    claim: claim("a", {
      metadata: { finalizers: ["example.com/keep", PVC_PROTECTION] },
      spec: { storageClassName: "fast" },
    }),
    classes: [storageClass("fast")],
    expect: {
      storageClassName: "fast",
      annotations: handedToUs,
      finalizers: ["example.com/keep", PVC_PROTECTION, INTENT],
    },
  },
  {
    name: "a provisioner annotation already set is not overwritten, and then the intent is not ours to add",
    claim: claim("a", {
      metadata: { annotations: { [GA]: "someone.else" } },
      spec: { storageClassName: "fast" },
    }),
    classes: [storageClass("fast")],
    expect: {
      storageClassName: "fast",
      annotations: { [GA]: "someone.else", [BETA]: ourDriver },
      finalizers: [PVC_PROTECTION],
    },
  },
];

describe("mutateClaimOnCreate", () => {
  for (const c of cases) {
    test(c.name, () => {
      const before = structuredClone(c.claim);
      const { claim: out } = mutateClaimOnCreate({
        claim: c.claim,
        classes: c.classes,
        ourProvisioners: ours,
      });
      assert.deepEqual(c.claim, before, "the input claim is not modified");
      assert.equal(out.spec.storageClassName, c.expect.storageClassName);
      assert.deepEqual(out.metadata.annotations, c.expect.annotations);
      assert.deepEqual(out.metadata.finalizers, c.expect.finalizers);
      // Everything else is as it was.
      assert.deepEqual(out.spec.resources, c.claim.spec.resources);
      assert.deepEqual(out.spec.accessModes, c.claim.spec.accessModes);
      // Reinvocation (reinvocationPolicy IfNeeded) changes nothing.
      const again = mutateClaimOnCreate({ claim: out, classes: c.classes, ourProvisioners: ours });
      assert.deepEqual(again.claim, out);
      assert.deepEqual(again.applied, []);
    });
  }

  test("without PROVISIONER_DRIVERS no intent finalizer is ever added", () => {
    const { claim: out } = mutateClaimOnCreate({
      claim: claim("a", { spec: { storageClassName: "fast" } }),
      classes: [storageClass("fast")],
      ourProvisioners: new Set(),
    });
    assert.deepEqual(out.metadata.finalizers, [PVC_PROTECTION]);
    assert.deepEqual(out.metadata.annotations, handedToUs);
  });

  test("classes are needed unless the claim asked for no class", () => {
    assert.equal(claimMutationNeedsClasses(claim("a")), true);
    assert.equal(claimMutationNeedsClasses(claim("a", { spec: { storageClassName: "fast" } })), true);
    assert.equal(claimMutationNeedsClasses(claim("a", { spec: { storageClassName: "" } })), false);
  });
});

describe("PVC mutate hook: the patch applied to the original claim", () => {
  const config = { ...defaultAdmissionConfig(), provisionerDrivers: ours };

  for (const c of cases.filter((x) => x.classes !== undefined)) {
    test(c.name, async () => {
      const lookups = fakeLookups({ classes: { ok: true, value: c.classes ?? [] } });
      const hook = mutateClaimsHook({ lookups, config });
      const request = parseAdmissionReview(
        JSON.stringify(review("persistentvolumeclaims", "CREATE", c.claim)),
      );
      const response = await hook.review(request);
      assert.equal(response.uid, request.uid);
      assert.equal(response.allowed, true);
      const out = patched(c.claim, response);
      const expected = mutateClaimOnCreate({
        claim: c.claim,
        classes: c.classes,
        ourProvisioners: ours,
      }).claim;
      assert.deepEqual(out, expected);
    });
  }

  test('a claim with storageClassName "" needs no lookup', async () => {
    const lookups = fakeLookups({});
    const hook = mutateClaimsHook({ lookups, config });
    const original = claim("a", { spec: { storageClassName: "" } });
    const response = await hook.review(
      parseAdmissionReview(JSON.stringify(review("persistentvolumeclaims", "CREATE", original))),
    );
    assert.equal(lookups.calls.classes, 0);
    assert.deepEqual(patched(original, response).metadata.finalizers, [PVC_PROTECTION]);
  });

  test("UPDATE, DELETE and subresource writes pass untouched, without lookups", async () => {
    const lookups = fakeLookups({});
    const hook = mutateClaimsHook({ lookups, config });
    for (const r of [
      review("persistentvolumeclaims", "UPDATE", claim("a"), claim("a")),
      review("persistentvolumeclaims", "DELETE", null, claim("a")),
      review("persistentvolumeclaims", "CREATE", claim("a"), null, { subResource: "status" }),
    ]) {
      const response = await hook.review(parseAdmissionReview(JSON.stringify(r)));
      assert.deepEqual(response, { uid: r.request.uid, allowed: true });
    }
    assert.equal(lookups.calls.classes, 0);
  });

  test("upstream's warnings: the beta class annotation and fractional bytes", async () => {
    const hook = mutateClaimsHook({ lookups: fakeLookups({}), config });
    const original = claim("a", {
      metadata: { annotations: { "volume.beta.kubernetes.io/storage-class": "" } },
      spec: { resources: { requests: { storage: "1500m" } } },
    });
    const response = await hook.review(
      parseAdmissionReview(JSON.stringify(review("persistentvolumeclaims", "CREATE", original))),
    );
    assert.deepEqual(response.warnings, [
      'metadata.annotations[volume.beta.kubernetes.io/storage-class]: deprecated since v1.8; use "storageClassName" attribute instead',
      'spec.resources.requests[storage]: fractional byte value "1500m" is invalid, must be an integer',
    ]);
  });
});
