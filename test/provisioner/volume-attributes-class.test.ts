// biome-ignore-all lint/suspicious/noTemplateCurlyInString: StorageClass secret templates spell ${...} literally
// A claim with a VolumeAttributesClass, provisioned as external-provisioner
// v6 does (pkg/controller/controller.go prepareProvision and Provision): the
// driver must report MODIFY_VOLUME, the class must exist and be this
// driver's, its parameters go as CreateVolume mutable_parameters, the PV
// records the class, and the StorageClass's controller-modify secret goes
// to the PV's annotations (never to the driver's parameters). Tables over
// the pure parts, then the claim rounds from the request to the PV.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Volume } from "../../shared/csi/types.ts";
import type {
  PersistentVolume,
  PersistentVolumeClaim,
  StorageClass,
  VolumeAttributesClass,
} from "../../shared/kube/types.ts";
import { provisioningFinalizer } from "../../shared/kube/well-known.ts";
import { buildPersistentVolume } from "../../shared/provisioner/build-persistent-volume.ts";
import type { ClaimState } from "../../shared/provisioner/claim-state.ts";
import {
  buildCreateVolumeRequest,
  planProvisioning,
  type RequestOutcome,
} from "../../shared/provisioner/create-volume-request.ts";
import { planClaimRound } from "../../shared/provisioner/plan-claim.ts";
import type { Progress, ProvisionerStep } from "../../shared/provisioner/steps.ts";
import {
  type ClassAttributes,
  classAttributes,
  modifyVolumeCapabilityError,
  vacMessage,
} from "../../shared/provisioner/volume-attributes-class.ts";

const driver = "hostpath.csi.k8s.io";
const pvName = "pvc-uid-1";
const now = new Date("2026-01-01T00:00:00Z");
const modifyName = "volume.kubernetes.io/controller-modify-secret-name";
const modifyNamespace = "volume.kubernetes.io/controller-modify-secret-namespace";

function claim(vac?: string | null, finalizers?: string[]): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: {
      name: "data",
      namespace: "team-a",
      uid: "uid-1",
      resourceVersion: "7",
      creationTimestamp: "2025-12-31T23:59:59Z",
      annotations: { "volume.kubernetes.io/storage-provisioner": driver },
      ...(finalizers ? { finalizers } : {}),
    },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: "1Gi" } },
      storageClassName: "fast",
      ...(vac !== undefined ? { volumeAttributesClassName: vac } : {}),
    },
    status: { phase: "Pending" },
  };
}

function storageClass(parameters?: Record<string, string>): StorageClass {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: { name: "fast" },
    provisioner: driver,
    reclaimPolicy: "Delete",
    volumeBindingMode: "Immediate",
    ...(parameters ? { parameters } : {}),
  };
}

function vac(name: string, driverName: string, parameters: Record<string, string>): VolumeAttributesClass {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttributesClass",
    metadata: { name },
    driverName,
    parameters,
  };
}

const gold = vac("gold", driver, { iops: "3000", throughput: "125" });

describe("VolumeAttributesClass: the driver must report MODIFY_VOLUME", () => {
  const rows: { name: string; claim: PersistentVolumeClaim; modifyVolume: boolean; want?: string }[] = [
    { name: "no class, no capability: fine", claim: claim(), modifyVolume: false },
    { name: 'class "" is none: fine without the capability', claim: claim(""), modifyVolume: false },
    { name: "class null is none", claim: claim(null), modifyVolume: false },
    { name: "a class and the capability: fine", claim: claim("gold"), modifyVolume: true },
    {
      name: "a class without the capability: upstream's error",
      claim: claim("gold"),
      modifyVolume: false,
      want: "CSI driver does not support VolumeAttributesClass: controller MODIFY_VOLUME capability is not reported",
    },
  ];
  for (const r of rows) {
    it(r.name, () => assert.equal(modifyVolumeCapabilityError(r.claim, r.modifyVolume), r.want));
  }
});

describe("VolumeAttributesClass: the class read for the claim", () => {
  const rows: {
    name: string;
    read: VolumeAttributesClass | undefined;
    want: { ok: true; value: ClassAttributes } | { ok: false; error: string };
  }[] = [
    {
      name: "missing: client-go's not-found text",
      read: undefined,
      want: { ok: false, error: 'volumeattributesclasses.storage.k8s.io "gold" not found' },
    },
    {
      name: "another driver's class: upstream's error",
      read: vac("gold", "other.csi.example.com", { iops: "1" }),
      want: {
        ok: false,
        error:
          "VAC gold referenced in PVC is for driver other.csi.example.com which does not match driver name hostpath.csi.k8s.io",
      },
    },
    {
      name: "this driver's class: its parameters as the mutable parameters",
      read: gold,
      want: { ok: true, value: { name: "gold", mutableParameters: { iops: "3000", throughput: "125" } } },
    },
  ];
  for (const r of rows) {
    it(r.name, () => assert.deepEqual(classAttributes("gold", r.read, driver), r.want));
  }

  it("the mutable parameters are a copy: the class read stays as it was", () => {
    const r = classAttributes("gold", gold, driver);
    assert.ok(r.ok);
    r.value.mutableParameters.iops = "1";
    assert.equal(gold.parameters?.iops, "3000");
  });
});

interface RequestCase {
  name: string;
  claim: PersistentVolumeClaim;
  class: StorageClass;
  volumeAttributes?: ClassAttributes;
  wantParameters: Record<string, string>;
  wantMutable?: Record<string, string>;
  wantModifySecret?: { name: string; namespace: string };
}

function request(c: RequestCase) {
  const plan = planProvisioning(c.claim, c.class, pvName, { defaultFsType: "" });
  assert.ok(plan.ok, plan.ok ? "" : plan.error);
  const req = buildCreateVolumeRequest({
    claim: c.claim,
    storageClass: c.class,
    pvName,
    plan: plan.value,
    options: { extraCreateMetadata: false },
    supportsSingleNodeMultiWriter: false,
    secrets: undefined,
    accessibility: undefined,
    contentSource: undefined,
    volumeAttributes: c.volumeAttributes,
  });
  assert.ok(req.ok, req.ok ? "" : req.error);
  return { plan: plan.value, request: req.value };
}

describe("VolumeAttributesClass: the CreateVolume request", () => {
  const rows: RequestCase[] = [
    {
      name: "no class: no mutable_parameters at all",
      claim: claim(),
      class: storageClass({ type: "ssd" }),
      wantParameters: { type: "ssd" },
    },
    {
      name: "a class: its parameters as mutable_parameters, the class parameters untouched",
      claim: claim("gold"),
      class: storageClass({ type: "ssd" }),
      volumeAttributes: { name: "gold", mutableParameters: { iops: "3000" } },
      wantParameters: { type: "ssd" },
      wantMutable: { iops: "3000" },
    },
    {
      name: "controller-modify secret keys are the sidecar's: stripped, resolved from their templates",
      claim: claim("gold"),
      class: storageClass({
        type: "ssd",
        "csi.storage.k8s.io/controller-modify-secret-name": "modify-${pvc.name}",
        "csi.storage.k8s.io/controller-modify-secret-namespace": "${pvc.namespace}",
      }),
      volumeAttributes: { name: "gold", mutableParameters: { iops: "3000" } },
      wantParameters: { type: "ssd" },
      wantMutable: { iops: "3000" },
      wantModifySecret: { name: "modify-data", namespace: "team-a" },
    },
    {
      name: "the default secret pair serves the modify secret too, as upstream's getSecretReference falls back",
      claim: claim(),
      class: storageClass({
        "csi.storage.k8s.io/secret-name": "all-${pv.name}",
        "csi.storage.k8s.io/secret-namespace": "storage",
      }),
      wantParameters: {},
      wantModifySecret: { name: `all-${pvName}`, namespace: "storage" },
    },
  ];
  for (const r of rows) {
    it(r.name, () => {
      const { plan, request: req } = request(r);
      assert.deepEqual(req.parameters, r.wantParameters);
      assert.deepEqual(req.mutableParameters, r.wantMutable);
      assert.equal(Object.hasOwn(req, "mutableParameters"), r.wantMutable !== undefined);
      assert.deepEqual(plan.secretRefs.controllerModify, r.wantModifySecret);
    });
  }

  it("a controller-modify name without its namespace is upstream's error", () => {
    const plan = planProvisioning(
      claim("gold"),
      storageClass({ "csi.storage.k8s.io/controller-modify-secret-name": "m" }),
      pvName,
      { defaultFsType: "" },
    );
    assert.deepEqual(plan, {
      ok: false,
      error:
        "failed to get name and namespace template from params: either name and namespace for ControllerModify secrets specified, Both must be specified",
    });
  });
});

describe("VolumeAttributesClass: the PV", () => {
  const created: Volume = {
    volumeId: "vol-1",
    capacityBytes: 1n << 30n,
    volumeContext: {},
    accessibleTopology: [],
  };
  function pv(o: {
    volumeAttributesClassName?: string;
    modify?: { name: string; namespace: string };
  }): PersistentVolume {
    const r = buildPersistentVolume({
      claim: claim(o.volumeAttributesClassName),
      storageClass: storageClass(),
      pvName,
      driverName: driver,
      identity: "id-1",
      fsType: "",
      volume: created,
      secretRefs: o.modify ? { controllerModify: o.modify } : {},
      ...(o.volumeAttributesClassName !== undefined
        ? { volumeAttributesClassName: o.volumeAttributesClassName }
        : {}),
    });
    assert.ok(r.ok);
    return r.value;
  }
  const rows: {
    name: string;
    in: Parameters<typeof pv>[0];
    wantClass: string | undefined;
    wantAnnotations: Record<string, string>;
  }[] = [
    { name: "no class: the field stays unset", in: {}, wantClass: undefined, wantAnnotations: {} },
    {
      name: '"" is no class: unset (a PV\'s class is never "")',
      in: { volumeAttributesClassName: "" },
      wantClass: undefined,
      wantAnnotations: {},
    },
    {
      name: "a class: recorded",
      in: { volumeAttributesClassName: "gold" },
      wantClass: "gold",
      wantAnnotations: {},
    },
    {
      name: "a modify secret: both annotations, whatever the claim's class",
      in: { modify: { name: "m", namespace: "ns-m" } },
      wantClass: undefined,
      wantAnnotations: { [modifyName]: "m", [modifyNamespace]: "ns-m" },
    },
  ];
  for (const r of rows) {
    it(r.name, () => {
      const v = pv(r.in);
      assert.equal(v.spec.volumeAttributesClassName, r.wantClass);
      assert.equal(Object.hasOwn(v.spec, "volumeAttributesClassName"), r.wantClass !== undefined);
      const a = v.metadata.annotations ?? {};
      const got = Object.fromEntries(
        Object.entries(a).filter(([k]) => k === modifyName || k === modifyNamespace),
      );
      assert.deepEqual(got, r.wantAnnotations);
      // The modify secret is the resizer's business: it never becomes a secret ref in spec.csi.
      assert.deepEqual(
        Object.keys(v.spec.csi ?? {}).filter((k) => k.toLowerCase().includes("modify")),
        [],
      );
    });
  }
});

describe("VolumeAttributesClass: the claim rounds", () => {
  const withIntent = claim("gold", [provisioningFinalizer]);

  function ready(c: PersistentVolumeClaim, cls: StorageClass, attrs?: ClassAttributes): RequestOutcome {
    const { plan, request: req } = request({
      name: "",
      claim: c,
      class: cls,
      ...(attrs ? { volumeAttributes: attrs } : {}),
      wantParameters: {},
    });
    return {
      kind: "ready",
      request: req,
      plan,
      selectedNode: undefined,
      ...(attrs ? { volumeAttributesClassName: attrs.name } : {}),
    };
  }

  function state(request: RequestOutcome, progress: Progress = {}, cls = storageClass()): ClaimState {
    return {
      claim: withIntent,
      pvName: { ok: true, value: pvName },
      storageClass: cls,
      existingVolume: undefined,
      now,
      driverName: driver,
      identity: "id-1",
      progress,
      request,
    };
  }

  const failures = [
    vacMessage.modifyVolumeNotSupported,
    vacMessage.notFound("gold"),
    vacMessage.otherDriver("gold", "other.csi.example.com", driver),
  ];
  for (const error of failures) {
    it(`fails with a Warning, backs off and drops the intent: ${error}`, () => {
      const round = planClaimRound(state({ kind: "error", error }));
      assert.ok(!("needs" in round));
      const events = round.steps.filter((s) => s.op === "event");
      assert.deepEqual(
        events.map((e) => (e.op === "event" ? [e.type, e.reason, e.message] : [])),
        [["Warning", "ProvisioningFailed", `failed to provision volume with StorageClass "fast": ${error}`]],
      );
      const write = round.steps.find((s) => s.op === "write-claim");
      assert.ok(write?.op === "write-claim");
      assert.equal(write.claim.metadata.finalizers?.includes(provisioningFinalizer) ?? false, false);
      assert.equal(
        write.claim.metadata.annotations?.["storage.kube-storage-functions.io/provisioning-failures"],
        "1",
      );
      // Retried: the next try is due after the backoff, not never.
      assert.equal(
        write.claim.metadata.annotations?.["storage.kube-storage-functions.io/provisioning-retry-after"],
        "2026-01-01T00:00:01Z",
      );
      assert.ok(!round.steps.some((s) => s.op === "create-volume"));
    });
  }

  it("ready: CreateVolume carries the class's parameters as mutable_parameters", () => {
    const attrs = { name: "gold", mutableParameters: { iops: "3000" } };
    const round = planClaimRound(state(ready(withIntent, storageClass(), attrs), { announced: true }));
    assert.ok(!("needs" in round));
    const create = round.steps.find(
      (s): s is Extract<ProvisionerStep, { op: "create-volume" }> => s.op === "create-volume",
    );
    assert.ok(create);
    assert.deepEqual(create.request.mutableParameters, { iops: "3000" });
  });

  it("created: the PV records the class and the modify secret", () => {
    const attrs = { name: "gold", mutableParameters: { iops: "3000" } };
    const cls = storageClass({
      "csi.storage.k8s.io/controller-modify-secret-name": "modify-creds",
      "csi.storage.k8s.io/controller-modify-secret-namespace": "storage",
    });
    const created: Volume = {
      volumeId: "vol-1",
      capacityBytes: 1n << 30n,
      volumeContext: {},
      accessibleTopology: [],
    };
    const round = planClaimRound(state(ready(withIntent, cls, attrs), { announced: true, created }, cls));
    assert.ok(!("needs" in round));
    const save = round.steps.find(
      (s): s is Extract<ProvisionerStep, { op: "create-pv" }> => s.op === "create-pv",
    );
    assert.ok(save);
    assert.equal(save.volume.spec.volumeAttributesClassName, "gold");
    assert.equal(save.volume.metadata.annotations?.[modifyName], "modify-creds");
    assert.equal(save.volume.metadata.annotations?.[modifyNamespace], "storage");
  });

  it("created without a class: the PV has none", () => {
    const plain = claim(undefined, [provisioningFinalizer]);
    const created: Volume = {
      volumeId: "vol-1",
      capacityBytes: 1n << 30n,
      volumeContext: {},
      accessibleTopology: [],
    };
    const s = { ...state(ready(plain, storageClass()), { announced: true, created }), claim: plain };
    const round = planClaimRound(s);
    assert.ok(!("needs" in round));
    const save = round.steps.find(
      (x): x is Extract<ProvisionerStep, { op: "create-pv" }> => x.op === "create-pv",
    );
    assert.ok(save);
    assert.equal(Object.hasOwn(save.volume.spec, "volumeAttributesClassName"), false);
  });
});
