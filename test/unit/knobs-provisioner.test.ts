// The provisioner's knobs, from the environment (provisionerOptionsFromEnv,
// what main.ts hands the controller) through the claim state the loader
// builds to the plan: RETRY_INTERVAL_START/MAX_SECONDS change the retry-after
// written on a failed claim; CONTROLLER_PUBLISH_READONLY marks the PV of a
// ReadOnlyMany-only claim spec.csi.readOnly, as external-provisioner's
// --controller-publish-readonly (one requested capability, MULTI_NODE_READER_ONLY).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { provisionerOptionsFromEnv } from "../../functions/provisioner/main.ts";
import type { Volume } from "../../shared/csi/types.ts";
import type { PersistentVolumeClaim, StorageClass } from "../../shared/kube/types.ts";
import { provisioningFinalizer } from "../../shared/kube/well-known.ts";
import type { ClaimState } from "../../shared/provisioner/claim-state.ts";
import {
  buildCreateVolumeRequest,
  planProvisioning,
} from "../../shared/provisioner/create-volume-request.ts";
import type { ProvisionerOptions } from "../../shared/provisioner/options.ts";
import { planClaimRound } from "../../shared/provisioner/plan-claim.ts";
import type { CsiFailure, ProvisionerStep } from "../../shared/provisioner/steps.ts";

const driver = "hostpath.csi.k8s.io";
const now = new Date("2026-01-01T00:00:00Z");
const pvName = "pvc-uid-1";
const failuresKey = "storage.kube-storage-functions.io/provisioning-failures";
const retryAfterKey = "storage.kube-storage-functions.io/provisioning-retry-after";

function claim(accessModes: string[], annotations: Record<string, string> = {}): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: {
      name: "data",
      namespace: "ns",
      uid: "uid-1",
      resourceVersion: "7",
      creationTimestamp: "2025-12-31T23:59:00Z",
      annotations: { "volume.kubernetes.io/storage-provisioner": driver, ...annotations },
      finalizers: [provisioningFinalizer],
    },
    spec: { accessModes, resources: { requests: { storage: "1Gi" } }, storageClassName: "fast" },
    status: { phase: "Pending" },
  };
}

const storageClass: StorageClass = {
  apiVersion: "storage.k8s.io/v1",
  kind: "StorageClass",
  metadata: { name: "fast" },
  provisioner: driver,
  reclaimPolicy: "Delete",
  volumeBindingMode: "Immediate",
};

const created: Volume = {
  volumeId: "vol-1",
  capacityBytes: 1n << 30n,
  volumeContext: {},
  accessibleTopology: [],
};

/** The claim state load-state.ts builds, with the options main.ts read from `env`. */
function stateFrom(env: Record<string, string>, c: PersistentVolumeClaim, progress: ClaimState["progress"]) {
  const options: ProvisionerOptions = provisionerOptionsFromEnv(driver, env);
  const plan = planProvisioning(c, storageClass, pvName, { defaultFsType: "ext4" });
  assert.ok(plan.ok);
  const request = buildCreateVolumeRequest({
    claim: c,
    storageClass,
    pvName,
    plan: plan.value,
    options: { extraCreateMetadata: false },
    supportsSingleNodeMultiWriter: false,
    secrets: undefined,
    accessibility: undefined,
    contentSource: undefined,
  });
  assert.ok(request.ok);
  const state: ClaimState = {
    claim: c,
    pvName: { ok: true, value: pvName },
    storageClass,
    existingVolume: undefined,
    now,
    driverName: driver,
    identity: options.identity,
    retryInterval: options.retryInterval,
    controllerPublishReadOnly: options.controllerPublishReadOnly,
    progress: { announced: true, ...progress },
    startedAt: 100,
    request: { kind: "ready", request: request.value, plan: plan.value, selectedNode: undefined },
  };
  return state;
}

function finalFailure(): CsiFailure {
  const text = "rpc error: code = Internal desc = boom";
  return { errorClass: "final", alreadyExists: false, text, error: new Error(text) };
}

function infeasible(): CsiFailure {
  const text = "rpc error: code = InvalidArgument desc = no";
  return { errorClass: "infeasible", alreadyExists: false, text, error: new Error(text) };
}

/** The retry-after and failure count the round writes on the claim. */
function backoffWritten(state: ClaimState): { failures: string | undefined; retryAfter: string | undefined } {
  const round = planClaimRound(state);
  assert.ok(!("needs" in round));
  const write = round.steps.find((s: ProvisionerStep) => s.op === "write-claim");
  assert.ok(write && write.op === "write-claim", JSON.stringify(round.steps.map((s) => s.op)));
  const a = write.claim.metadata.annotations ?? {};
  return { failures: a[failuresKey], retryAfter: a[retryAfterKey] };
}

describe("RETRY_INTERVAL_START_SECONDS / RETRY_INTERVAL_MAX_SECONDS on the provisioner", () => {
  const rows: {
    name: string;
    env: Record<string, string>;
    before?: string;
    failure?: CsiFailure;
    want: string;
  }[] = [
    { name: "upstream's default: 1 s after the first failure", env: {}, want: "2026-01-01T00:00:01Z" },
    {
      name: "start 7: 7 s after the first failure",
      env: { RETRY_INTERVAL_START_SECONDS: "7", RETRY_INTERVAL_MAX_SECONDS: "60" },
      want: "2026-01-01T00:00:07Z",
    },
    {
      name: "start 7, third failure: 28 s",
      env: { RETRY_INTERVAL_START_SECONDS: "7", RETRY_INTERVAL_MAX_SECONDS: "60" },
      before: "2",
      want: "2026-01-01T00:00:28Z",
    },
    {
      name: "start 7, max 20, third failure: capped at 20 s",
      env: { RETRY_INTERVAL_START_SECONDS: "7", RETRY_INTERVAL_MAX_SECONDS: "20" },
      before: "2",
      want: "2026-01-01T00:00:20Z",
    },
    {
      name: "an infeasible claim waits the max: 45 s",
      env: { RETRY_INTERVAL_MAX_SECONDS: "45" },
      failure: infeasible(),
      want: "2026-01-01T00:00:45Z",
    },
  ];
  for (const row of rows) {
    test(row.name, () => {
      const c = claim(["ReadWriteOnce"], row.before ? { [failuresKey]: row.before } : {});
      const written = backoffWritten(stateFrom(row.env, c, { createFailed: row.failure ?? finalFailure() }));
      assert.equal(written.retryAfter, row.want);
      assert.equal(written.failures, String(Number(row.before ?? "0") + 1));
    });
  }

  test("bad values stop the start with the variable named", () => {
    const cases: [Record<string, string>, RegExp][] = [
      [
        { RETRY_INTERVAL_START_SECONDS: "0" },
        /^RETRY_INTERVAL_START_SECONDS must be an integer from 1 to 86400/,
      ],
      [{ RETRY_INTERVAL_START_SECONDS: "1s" }, /^RETRY_INTERVAL_START_SECONDS must be an integer/],
      [{ RETRY_INTERVAL_MAX_SECONDS: "5m" }, /^RETRY_INTERVAL_MAX_SECONDS must be an integer/],
      [
        { RETRY_INTERVAL_START_SECONDS: "30", RETRY_INTERVAL_MAX_SECONDS: "10" },
        /^RETRY_INTERVAL_MAX_SECONDS \(10\) must not be less than RETRY_INTERVAL_START_SECONDS \(30\)$/,
      ],
    ];
    for (const [env, message] of cases)
      assert.throws(() => provisionerOptionsFromEnv(driver, env), { message }, JSON.stringify(env));
  });
});

describe("CONTROLLER_PUBLISH_READONLY", () => {
  /** spec.csi.readOnly of the PV the round creates. */
  function readOnlyOf(env: Record<string, string>, accessModes: string[]): boolean | undefined {
    const round = planClaimRound(stateFrom(env, claim(accessModes), { created }));
    assert.ok(!("needs" in round));
    const create = round.steps.find((s: ProvisionerStep) => s.op === "create-pv");
    assert.ok(create && create.op === "create-pv", JSON.stringify(round.steps.map((s) => s.op)));
    return create.volume.spec.csi?.readOnly;
  }

  const rows: { env: Record<string, string>; modes: string[]; want: boolean | undefined }[] = [
    { env: {}, modes: ["ReadOnlyMany"], want: undefined },
    { env: { CONTROLLER_PUBLISH_READONLY: "true" }, modes: ["ReadOnlyMany"], want: true },
    { env: { CONTROLLER_PUBLISH_READONLY: "true" }, modes: ["ReadWriteOnce"], want: undefined },
    { env: { CONTROLLER_PUBLISH_READONLY: "true" }, modes: ["ReadWriteMany"], want: undefined },
    // Two modes ask for two capabilities: upstream marks readonly only for one, ROX.
    {
      env: { CONTROLLER_PUBLISH_READONLY: "true" },
      modes: ["ReadOnlyMany", "ReadWriteMany"],
      want: undefined,
    },
    { env: { CONTROLLER_PUBLISH_READONLY: "false" }, modes: ["ReadOnlyMany"], want: undefined },
  ];
  for (const row of rows) {
    test(`${JSON.stringify(row.env)} ${row.modes.join("+")}: readOnly ${row.want}`, () => {
      assert.equal(readOnlyOf(row.env, row.modes), row.want);
    });
  }

  test("anything but true/false/1/0 stops the start", () => {
    assert.throws(() => provisionerOptionsFromEnv(driver, { CONTROLLER_PUBLISH_READONLY: "yes" }), {
      message: 'CONTROLLER_PUBLISH_READONLY must be true or false, got "yes"',
    });
  });
});
