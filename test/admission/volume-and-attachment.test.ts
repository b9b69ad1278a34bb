// PV CREATE mutation (pv-protection) and VolumeAttachment validation
// (attacher, exactly one source, nodeName, read-only spec, the attacher's
// CSIDriver exists, and the lookup's failure policy), as tables.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  validateAttachment,
  validateAttachmentUpdate,
} from "../../shared/admission/attachment-validation.ts";
import type { ClusterLookups } from "../../shared/admission/cluster-lookups.ts";
import { defaultAdmissionConfig, type FailurePolicy } from "../../shared/admission/config.ts";
import { formatFieldError } from "../../shared/admission/field-errors.ts";
import { mutateVolumesHook, validateAttachmentsHook } from "../../shared/admission/hooks.ts";
import { parseAdmissionReview } from "../../shared/admission/review.ts";
import { mutateVolumeOnCreate } from "../../shared/admission/volume-mutation.ts";
import type { VolumeAttachment } from "../../shared/kube/types.ts";
import { attachment, csiDriver, fakeLookups, ourDriver, patched, review, volume } from "./fixtures.ts";

describe("PV mutate", () => {
  const cases = [
    { name: "a new volume gets pv-protection", finalizers: undefined, want: ["kubernetes.io/pv-protection"] },
    {
      name: "other finalizers are kept, in order",
      finalizers: ["external-provisioner.volume.kubernetes.io/finalizer"],
      want: ["external-provisioner.volume.kubernetes.io/finalizer", "kubernetes.io/pv-protection"],
    },
    {
      name: "already protected: unchanged",
      finalizers: ["kubernetes.io/pv-protection"],
      want: ["kubernetes.io/pv-protection"],
    },
  ];
  for (const c of cases) {
    test(c.name, async () => {
      const original = volume("pv-1", c.finalizers);
      assert.deepEqual(mutateVolumeOnCreate(original).metadata.finalizers, c.want);
      const r = review("persistentvolumes", "CREATE", original);
      const response = await mutateVolumesHook().review(parseAdmissionReview(JSON.stringify(r)));
      assert.equal(response.allowed, true);
      assert.equal(response.uid, r.request.uid);
      const out = patched(original, response);
      assert.deepEqual(out, { ...original, metadata: { ...original.metadata, finalizers: c.want } });
      if (c.finalizers?.includes("kubernetes.io/pv-protection")) assert.equal(response.patch, undefined);
    });
  }

  test("UPDATE, DELETE and status writes pass untouched", async () => {
    for (const r of [
      review("persistentvolumes", "UPDATE", volume("pv-1"), volume("pv-1")),
      review("persistentvolumes", "DELETE", null, volume("pv-1")),
      review("persistentvolumes", "CREATE", volume("pv-1"), null, { subResource: "status" }),
    ]) {
      const response = await mutateVolumesHook().review(parseAdmissionReview(JSON.stringify(r)));
      assert.deepEqual(response, { uid: r.request.uid, allowed: true });
    }
  });

  test("upstream's warnings: beta class annotation, Recycle", async () => {
    const original = volume("pv-1");
    original.metadata.annotations = { "volume.beta.kubernetes.io/storage-class": "fast" };
    original.spec.persistentVolumeReclaimPolicy = "Recycle";
    const r = review("persistentvolumes", "CREATE", original);
    const response = await mutateVolumesHook().review(parseAdmissionReview(JSON.stringify(r)));
    assert.deepEqual(response.warnings, [
      'metadata.annotations[volume.beta.kubernetes.io/storage-class]: deprecated since v1.8; use "storageClassName" attribute instead',
      "spec.persistentVolumeReclaimPolicy: The Recycle reclaim policy is deprecated. Instead, the recommended approach is to use dynamic provisioning.",
    ]);
  });
});

describe("validateAttachment", () => {
  const cases: { name: string; va: VolumeAttachment; errors: string[] }[] = [
    { name: "valid", va: attachment("va-1"), errors: [] },
    {
      name: "inline spec instead of a PV name",
      va: attachment("va-1", {
        source: { inlineVolumeSpec: { csi: { driver: ourDriver, volumeHandle: "h" } } },
      }),
      errors: [],
    },
    {
      name: "no attacher",
      va: attachment("va-1", { attacher: "" }),
      errors: ["spec.attacher: Required value"],
    },
    { name: "no node", va: attachment("va-1", { nodeName: "" }), errors: ["spec.nodeName: Required value"] },
    {
      name: "no source",
      va: attachment("va-1", { source: {} }),
      errors: [
        "spec.source: Required value: must specify exactly one of inlineVolumeSpec and persistentVolumeName",
      ],
    },
    {
      name: "both sources",
      va: attachment("va-1", { source: { persistentVolumeName: "pv-1", inlineVolumeSpec: {} } }),
      errors: [
        "spec.source: Forbidden: must specify exactly one of inlineVolumeSpec and persistentVolumeName",
      ],
    },
    {
      name: "empty PV name",
      va: attachment("va-1", { source: { persistentVolumeName: "" } }),
      errors: [
        "spec.source.persistentVolumeName: Required value: must specify non empty persistentVolumeName",
      ],
    },
    {
      name: "everything missing",
      va: {
        apiVersion: "storage.k8s.io/v1",
        kind: "VolumeAttachment",
        metadata: { name: "x" },
        spec: {},
      } as unknown as VolumeAttachment,
      errors: [
        "spec.attacher: Required value",
        "spec.source: Required value: must specify exactly one of inlineVolumeSpec and persistentVolumeName",
        "spec.nodeName: Required value",
      ],
    },
  ];
  for (const c of cases) {
    test(c.name, () => {
      assert.deepEqual(validateAttachment(c.va).map(formatFieldError), c.errors);
    });
  }

  test("spec is read-only after creation; metadata and status are not", () => {
    const old = attachment("va-1");
    const moved = attachment("va-1", { nodeName: "node-2" });
    assert.deepEqual(validateAttachmentUpdate(moved, old).map(formatFieldError), [
      `spec: Invalid value: {"attacher":"${ourDriver}","nodeName":"node-2","source":{"persistentVolumeName":"pv-1"}}: field is immutable`,
    ]);
    const finalized = structuredClone(old);
    finalized.metadata.finalizers = ["external-attacher/x"];
    finalized.status = { attached: true };
    assert.deepEqual(validateAttachmentUpdate(finalized, old), []);
  });
});

function vaHook(lookups: ClusterLookups, policy: FailurePolicy = "Fail") {
  const config = defaultAdmissionConfig();
  config.failurePolicy.validateAttachments = policy;
  return validateAttachmentsHook({ lookups, config });
}

describe("VolumeAttachment validate hook", () => {
  test("CREATE with an existing CSIDriver: allowed", async () => {
    const lookups = fakeLookups({ drivers: { ok: true, value: { [ourDriver]: csiDriver(ourDriver) } } });
    const r = review("volumeattachments", "CREATE", attachment("va-1"));
    const response = await vaHook(lookups).review(parseAdmissionReview(JSON.stringify(r)));
    assert.deepEqual(response, { uid: r.request.uid, allowed: true });
    assert.deepEqual(lookups.calls.drivers, [ourDriver]);
  });

  test("CREATE naming a CSIDriver that does not exist: 422 that says what to do", async () => {
    const lookups = fakeLookups({ drivers: { ok: true, value: {} } });
    const r = review("volumeattachments", "CREATE", attachment("va-1", { attacher: "typo.csi.io" }));
    const response = await vaHook(lookups).review(parseAdmissionReview(JSON.stringify(r)));
    assert.equal(response.allowed, false);
    assert.deepEqual(response.status, {
      code: 422,
      reason: "Invalid",
      message:
        'VolumeAttachment.storage.k8s.io "va-1" is invalid: spec.attacher: Not found: "typo.csi.io": no CSIDriver named "typo.csi.io" exists; install the CSI driver (its CSIDriver object) or correct spec.attacher',
    });
  });

  test("CREATE with field errors: denied before any lookup", async () => {
    const lookups = fakeLookups({});
    const r = review("volumeattachments", "CREATE", attachment("va-1", { nodeName: "" }));
    const response = await vaHook(lookups).review(parseAdmissionReview(JSON.stringify(r)));
    assert.equal(
      response.status?.message,
      'VolumeAttachment.storage.k8s.io "va-1" is invalid: spec.nodeName: Required value',
    );
    assert.deepEqual(lookups.calls.drivers, []);
  });

  test("lookup failure, policy Fail (default): 503 denial", async () => {
    const lookups = fakeLookups({
      drivers: { ok: false, error: "looking up csidrivers: no answer within 2000 ms" },
    });
    const r = review("volumeattachments", "CREATE", attachment("va-1"));
    const response = await vaHook(lookups).review(parseAdmissionReview(JSON.stringify(r)));
    assert.equal(response.allowed, false);
    assert.equal(response.status?.code, 503);
    assert.equal(
      response.status?.message,
      `volumeattachments.storage.k8s.io "va-1": cannot check spec.attacher: looking up CSIDriver "${ourDriver}" failed (looking up csidrivers: no answer within 2000 ms); retry the request`,
    );
  });

  test("lookup failure, policy Ignore: allowed with a warning", async () => {
    const lookups = fakeLookups({ drivers: { ok: false, error: "boom" } });
    const r = review("volumeattachments", "CREATE", attachment("va-1"));
    const response = await vaHook(lookups, "Ignore").review(parseAdmissionReview(JSON.stringify(r)));
    assert.equal(response.allowed, true);
    assert.deepEqual(response.warnings, [
      `VolumeAttachment admitted unchecked: cannot check spec.attacher: looking up CSIDriver "${ourDriver}" failed (boom)`,
    ]);
  });

  test("UPDATE: spec changes denied, finalizer/status changes allowed, no lookups", async () => {
    const lookups = fakeLookups({});
    const old = attachment("va-1");
    const moved = await vaHook(lookups).review(
      parseAdmissionReview(
        JSON.stringify(review("volumeattachments", "UPDATE", attachment("va-1", { nodeName: "n2" }), old)),
      ),
    );
    assert.equal(moved.allowed, false);
    assert.match(
      moved.status?.message ?? "",
      /^VolumeAttachment\.storage\.k8s\.io "va-1" is invalid: spec: Invalid value: .*: field is immutable$/,
    );
    const finalized = { ...old, metadata: { ...old.metadata, finalizers: ["external-attacher/x"] } };
    const ok = await vaHook(lookups).review(
      parseAdmissionReview(JSON.stringify(review("volumeattachments", "UPDATE", finalized, old))),
    );
    assert.equal(ok.allowed, true);
    assert.deepEqual(lookups.calls.drivers, []);
  });

  test("status writes and DELETE pass", async () => {
    const lookups = fakeLookups({});
    for (const r of [
      review("volumeattachments", "UPDATE", attachment("va-1", { nodeName: "" }), attachment("va-1"), {
        subResource: "status",
      }),
      review("volumeattachments", "DELETE", null, attachment("va-1")),
    ]) {
      const response = await vaHook(lookups).review(parseAdmissionReview(JSON.stringify(r)));
      assert.deepEqual(response, { uid: r.request.uid, allowed: true });
    }
  });
});
