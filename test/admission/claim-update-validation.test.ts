// PVC UPDATE validation as tables: what may change (volumeName once, a class
// once on a claim without one, requests of a Bound claim), the messages when
// something else changes, and the resize rules with the StorageClass lookup
// and its failure policy.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { validateClaimUpdate } from "../../shared/admission/claim-update-validation.ts";
import type { ClusterLookups } from "../../shared/admission/cluster-lookups.ts";
import { defaultAdmissionConfig, type FailurePolicy } from "../../shared/admission/config.ts";
import { formatFieldError } from "../../shared/admission/field-errors.ts";
import { validateClaimsHook } from "../../shared/admission/hooks.ts";
import { parseAdmissionReview } from "../../shared/admission/review.ts";
import type { PersistentVolumeClaim } from "../../shared/kube/types.ts";
import { boundClaim, claim, fakeLookups, review, storageClass } from "./fixtures.ts";

const BETA_CLASS = "volume.beta.kubernetes.io/storage-class";

function changed(
  base: PersistentVolumeClaim,
  edit: (c: PersistentVolumeClaim) => void,
): PersistentVolumeClaim {
  const next = structuredClone(base);
  edit(next);
  return next;
}

interface Case {
  name: string;
  old: PersistentVolumeClaim;
  next: PersistentVolumeClaim;
  /** Formatted field errors; [] = valid. */
  errors: (string | RegExp)[];
}

const pending = claim("data", { spec: { storageClassName: "fast" }, status: { phase: "Pending" } });
const unclassed = claim("data", { status: { phase: "Pending" } });
const bound = boundClaim("data", "1Gi");
/** Asked for 3Gi, the driver failed: status.capacity is still 1Gi. */
const failedExpansion = changed(boundClaim("data", "3Gi"), (c) => {
  c.status = { ...c.status, capacity: { storage: "1Gi" }, allocatedResources: { storage: "3Gi" } };
});

function withAttributesClass(c: PersistentVolumeClaim, name: string): PersistentVolumeClaim {
  return changed(c, (x) => {
    x.spec.volumeAttributesClassName = name;
  });
}

const cases: Case[] = [
  { name: "nothing changed", old: bound, next: structuredClone(bound), errors: [] },
  {
    name: "metadata and status only",
    old: bound,
    next: changed(bound, (c) => {
      c.metadata.labels = { app: "db" };
      c.status = { phase: "Lost" };
    }),
    errors: [],
  },
  {
    name: "volumeName set once (the binder binds)",
    old: pending,
    next: changed(pending, (c) => {
      c.spec.volumeName = "pv-1";
    }),
    errors: [],
  },
  {
    name: "volumeName changed once set",
    old: bound,
    next: changed(bound, (c) => {
      c.spec.volumeName = "pv-other";
    }),
    errors: [
      /^spec: Forbidden: spec is immutable after creation except resources\.requests and volumeAttributesClassName for bound claims\nspec\.volumeName: "pv-data" -> "pv-other"$/,
    ],
  },
  {
    name: "a class given to a claim that had none (retroactive default class)",
    old: unclassed,
    next: changed(unclassed, (c) => {
      c.spec.storageClassName = "fast";
    }),
    errors: [],
  },
  {
    name: "a class changed",
    old: pending,
    next: changed(pending, (c) => {
      c.spec.storageClassName = "slow";
    }),
    errors: [/^spec: Forbidden: spec is immutable.*\nspec\.storageClassName: "fast" -> "slow"$/s],
  },
  {
    name: "a class removed",
    old: pending,
    next: changed(pending, (c) => {
      delete c.spec.storageClassName;
    }),
    errors: [/^spec: Forbidden: .*spec\.storageClassName: "fast" -> \(unset\)$/s],
  },
  {
    name: "beta annotation moved to the field (same class)",
    old: claim("data", { metadata: { annotations: { [BETA_CLASS]: "fast" } } }),
    next: claim("data", {
      metadata: { annotations: { [BETA_CLASS]: "fast" } },
      spec: { storageClassName: "fast" },
    }),
    errors: [],
  },
  {
    name: "a field class that contradicts the beta annotation",
    old: claim("data", { metadata: { annotations: { [BETA_CLASS]: "fast" } } }),
    next: claim("data", {
      metadata: { annotations: { [BETA_CLASS]: "fast" } },
      spec: { storageClassName: "slow" },
    }),
    errors: [/^spec: Forbidden: spec is immutable/],
  },
  {
    name: "the beta annotation changed",
    old: claim("data", { metadata: { annotations: { [BETA_CLASS]: "fast" } } }),
    next: claim("data", { metadata: { annotations: { [BETA_CLASS]: "slow" } } }),
    errors: [
      'metadata.annotations.volume.beta.kubernetes.io/storage-class: Invalid value: "slow": field is immutable',
    ],
  },
  {
    name: "access modes changed",
    old: bound,
    next: changed(bound, (c) => {
      c.spec.accessModes = ["ReadWriteMany"];
    }),
    errors: [/^spec: Forbidden: .*\nspec\.accessModes: \["ReadWriteOnce"\] -> \["ReadWriteMany"\]$/s],
  },
  {
    name: "volumeMode changed",
    old: bound,
    next: changed(bound, (c) => {
      c.spec.volumeMode = "Block";
    }),
    errors: [/^spec: Forbidden: /, 'volumeMode: Invalid value: "Block": field is immutable'],
  },
  {
    name: "a Bound claim grows (size rules are the resize check's)",
    old: bound,
    next: changed(bound, (c) => {
      c.spec.resources = { requests: { storage: "2Gi" } };
    }),
    errors: [],
  },
  {
    name: "a Bound claim shrinks below status.capacity",
    old: boundClaim("data", "2Gi"),
    next: changed(boundClaim("data", "2Gi"), (c) => {
      c.spec.resources = { requests: { storage: "1Gi" } };
    }),
    errors: ["spec.resources.requests.storage: Forbidden: field can not be less than status.capacity"],
  },
  {
    name: "after a failed expansion, the request is lowered but stays above status.capacity (recovery)",
    old: failedExpansion,
    next: changed(failedExpansion, (c) => {
      c.spec.resources = { requests: { storage: "2Gi" } };
    }),
    errors: [],
  },
  {
    name: "after a failed expansion, the request is lowered back to status.capacity exactly",
    old: failedExpansion,
    next: changed(failedExpansion, (c) => {
      c.spec.resources = { requests: { storage: "1024Mi" } };
    }),
    errors: ["spec.resources.requests.storage: Forbidden: field can not be less than status.capacity"],
  },
  {
    name: "a claim without status.capacity counts it as zero: lowering is the spec rule's business",
    old: changed(boundClaim("data", "2Gi"), (c) => {
      delete c.status?.capacity;
    }),
    next: changed(boundClaim("data", "1Gi"), (c) => {
      delete c.status?.capacity;
    }),
    errors: [],
  },
  {
    name: "the same size written differently is no change",
    old: bound,
    next: changed(bound, (c) => {
      c.spec.resources = { requests: { storage: "1024Mi" } };
    }),
    errors: [],
  },
  {
    name: "a Pending claim's requests are immutable",
    old: pending,
    next: changed(pending, (c) => {
      c.spec.resources = { requests: { storage: "500Mi" } };
    }),
    // No capacity yet, so the size rule has nothing to say; spec immutability does.
    errors: [/^spec: Forbidden: .*spec\.resources: /s],
  },
  {
    name: "limits are not requests",
    old: bound,
    next: changed(bound, (c) => {
      c.spec.resources = { requests: { storage: "1Gi" }, limits: { storage: "5Gi" } };
    }),
    errors: [/^spec: Forbidden: .*spec\.resources:/s],
  },
  {
    name: "an unparsable size",
    old: bound,
    next: changed(bound, (c) => {
      c.spec.resources = { requests: { storage: "lots" } };
    }),
    errors: [/^spec\.resources\.requests\[storage\]: Invalid value: "lots": quantities must match/],
  },
  {
    name: "a Bound claim is given a volumeAttributesClassName",
    old: bound,
    next: changed(bound, (c) => {
      c.spec.volumeAttributesClassName = "gold";
    }),
    errors: [],
  },
  {
    name: "a Bound claim moves to another volumeAttributesClassName",
    old: withAttributesClass(bound, "gold"),
    next: withAttributesClass(bound, "silver"),
    errors: [],
  },
  {
    name: "a Pending claim's volumeAttributesClassName is immutable",
    old: withAttributesClass(pending, "gold"),
    next: withAttributesClass(pending, "silver"),
    errors: [/^spec: Forbidden: .*\nspec\.volumeAttributesClassName: "gold" -> "silver"$/s],
  },
  {
    name: "volumeAttributesClassName unset once set",
    old: withAttributesClass(bound, "gold"),
    next: structuredClone(bound),
    errors: [
      /^spec: Forbidden: .*spec\.volumeAttributesClassName: "gold" -> \(unset\)$/s,
      "spec.volumeAttributesClassName: Forbidden: update from non-nil value to nil is forbidden",
    ],
  },
  {
    name: "volumeAttributesClassName set to null once set",
    old: withAttributesClass(bound, "gold"),
    next: changed(bound, (c) => {
      c.spec.volumeAttributesClassName = null;
    }),
    errors: [
      /^spec: Forbidden: /,
      "spec.volumeAttributesClassName: Forbidden: update from non-nil value to nil is forbidden",
    ],
  },
  {
    name: 'volumeAttributesClassName set to "" once set',
    old: withAttributesClass(bound, "gold"),
    next: withAttributesClass(bound, ""),
    errors: [
      "spec.volumeAttributesClassName: Forbidden: update from non-nil value to an empty string is forbidden",
    ],
  },
  {
    name: "null and absent are the same",
    old: changed(pending, (c) => {
      c.spec.selector = null;
    }),
    next: changed(pending, (c) => {
      delete c.spec.selector;
    }),
    errors: [],
  },
];

describe("validateClaimUpdate", () => {
  for (const c of cases) {
    test(c.name, () => {
      const errors = validateClaimUpdate(c.next, c.old).map(formatFieldError);
      assert.equal(errors.length, c.errors.length, `errors: ${JSON.stringify(errors)}`);
      c.errors.forEach((want, i) => {
        if (typeof want === "string") assert.equal(errors[i], want);
        else assert.match(errors[i] ?? "", want);
      });
    });
  }
});

function hookWith(lookups: ClusterLookups, policy: FailurePolicy = "Fail") {
  const config = defaultAdmissionConfig();
  config.failurePolicy.validateClaims = policy;
  return validateClaimsHook({ lookups, config });
}

async function reviewUpdate(
  hook: ReturnType<typeof hookWith>,
  next: PersistentVolumeClaim,
  old: PersistentVolumeClaim,
) {
  const r = review("persistentvolumeclaims", "UPDATE", next, old);
  const response = await hook.review(parseAdmissionReview(JSON.stringify(r)));
  assert.equal(response.uid, r.request.uid);
  assert.equal(response.patch, undefined, "a validating hook never patches");
  return response;
}

const grown = (c: PersistentVolumeClaim, size = "2Gi") =>
  changed(c, (x) => {
    x.spec.resources = { requests: { storage: size } };
  });

describe("PVC validate hook", () => {
  test("field errors are a 422 Invalid in the API server's words", async () => {
    const response = await reviewUpdate(
      hookWith(fakeLookups({})),
      grown(boundClaim("data", "2Gi"), "1Gi"),
      boundClaim("data", "2Gi"),
    );
    assert.equal(response.allowed, false);
    assert.deepEqual(response.status, {
      code: 422,
      reason: "Invalid",
      message:
        'PersistentVolumeClaim "data" is invalid: spec.resources.requests.storage: Forbidden: field can not be less than status.capacity',
    });
  });

  test("several errors are listed in brackets", async () => {
    const next = changed(bound, (c) => {
      c.spec.volumeMode = "Block";
    });
    const response = await reviewUpdate(hookWith(fakeLookups({})), next, bound);
    assert.match(
      response.status?.message ?? "",
      /^PersistentVolumeClaim "data" is invalid: \[spec: Forbidden: .*, volumeMode: Invalid value: "Block": field is immutable\]$/s,
    );
  });

  const expansions: {
    name: string;
    old: PersistentVolumeClaim;
    next: PersistentVolumeClaim;
    classes: ReturnType<typeof storageClass>[];
    allowed: boolean;
    status?: { code: number; reason: string; message: string | RegExp };
    lookups: number;
  }[] = [
    {
      name: "Bound, class allows expansion: allowed",
      old: bound,
      next: grown(bound),
      classes: [storageClass("fast", { allowVolumeExpansion: true })],
      allowed: true,
      lookups: 1,
    },
    {
      name: "Bound, class does not allow expansion",
      old: bound,
      next: grown(bound),
      classes: [storageClass("fast", { allowVolumeExpansion: false })],
      allowed: false,
      status: {
        code: 403,
        reason: "Forbidden",
        message:
          'persistentvolumeclaims "data" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize (StorageClass "fast" does not set allowVolumeExpansion: true)',
      },
      lookups: 2 /* the cached list, then a fresh one before refusing */,
    },
    {
      name: "Bound, class gone",
      old: bound,
      next: grown(bound),
      classes: [],
      allowed: false,
      status: {
        code: 403,
        reason: "Forbidden",
        message: /must support resize \(StorageClass "fast" does not exist\)$/,
      },
      lookups: 2 /* the cached list, then a fresh one before refusing */,
    },
    {
      name: "Bound without a class",
      old: boundClaim("data", "1Gi", ""),
      next: grown(boundClaim("data", "1Gi", "")),
      classes: [],
      allowed: false,
      status: {
        code: 403,
        reason: "Forbidden",
        message:
          'persistentvolumeclaims "data" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize',
      },
      lookups: 0,
    },
    {
      name: "Pending: only bound claims can be expanded",
      old: pending,
      next: grown(pending),
      classes: [storageClass("fast", { allowVolumeExpansion: true })],
      allowed: false,
      status: {
        code: 403,
        reason: "Forbidden",
        message:
          'persistentvolumeclaims "data" is forbidden: Only bound persistent volume claims can be expanded',
      },
      lookups: 0,
    },
    {
      name: "not an expansion: no lookup",
      old: bound,
      next: changed(bound, (c) => {
        c.metadata.labels = { a: "b" };
      }),
      classes: [],
      allowed: true,
      lookups: 0,
    },
  ];
  for (const c of expansions) {
    test(c.name, async () => {
      const lookups = fakeLookups({ classes: { ok: true, value: c.classes } });
      const response = await reviewUpdate(hookWith(lookups), c.next, c.old);
      assert.equal(response.allowed, c.allowed);
      if (c.status) {
        assert.equal(response.status?.code, c.status.code);
        assert.equal(response.status?.reason, c.status.reason);
        if (typeof c.status.message === "string") assert.equal(response.status?.message, c.status.message);
        else assert.match(response.status?.message ?? "", c.status.message);
      } else {
        assert.equal(response.status, undefined);
      }
      assert.equal(lookups.calls.classes, c.lookups);
    });
  }

  test("lookup failure, policy Fail: a 503 denial that says to retry", async () => {
    const lookups = fakeLookups({ classes: { ok: false, error: "GET /apis/...: 503 ServiceUnavailable" } });
    const response = await reviewUpdate(hookWith(lookups, "Fail"), grown(bound), bound);
    assert.equal(response.allowed, false);
    assert.equal(response.status?.code, 503);
    assert.equal(response.status?.reason, "ServiceUnavailable");
    assert.match(
      response.status?.message ?? "",
      /^persistentvolumeclaims "data": cannot tell whether StorageClass "fast" allows volume expansion: looking up StorageClasses failed \(GET .*503 ServiceUnavailable\); retry the request$/,
    );
  });

  test("lookup failure, policy Ignore: allowed with a warning", async () => {
    const lookups = fakeLookups({ classes: { ok: false, error: "boom" } });
    const response = await reviewUpdate(hookWith(lookups, "Ignore"), grown(bound), bound);
    assert.equal(response.allowed, true);
    assert.deepEqual(response.warnings, [
      'volume expansion admitted unchecked: cannot tell whether StorageClass "fast" allows volume expansion: looking up StorageClasses failed (boom)',
    ]);
  });

  test("status writes, CREATE and DELETE pass without checks", async () => {
    const hook = hookWith(fakeLookups({}));
    for (const r of [
      review("persistentvolumeclaims", "UPDATE", grown(pending), pending, { subResource: "status" }),
      review("persistentvolumeclaims", "CREATE", claim("x")),
      review("persistentvolumeclaims", "DELETE", null, claim("x")),
    ]) {
      const response = await hook.review(parseAdmissionReview(JSON.stringify(r)));
      assert.deepEqual(response, { uid: r.request.uid, allowed: true });
    }
  });

  test("dryRun is answered the same", async () => {
    const hook = hookWith(fakeLookups({}));
    const r = review("persistentvolumeclaims", "UPDATE", grown(pending), pending, { dryRun: true });
    const response = await hook.review(parseAdmissionReview(JSON.stringify(r)));
    assert.equal(response.allowed, false);
    assert.match(response.status?.message ?? "", /Only bound persistent volume claims can be expanded/);
  });
});
