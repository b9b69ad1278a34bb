// biome-ignore-all lint/suspicious/noTemplateCurlyInString: StorageClass secret templates spell ${...} literally
// The CreateVolume request from a claim and its class, checked against what
// external-provisioner's prepareProvision builds (pkg/controller/controller.go).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type {
  CreateVolumeRequest,
  CsiAccessMode,
  TopologyRequirement,
  VolumeContentSource,
} from "../../shared/csi/types.ts";
import type { PersistentVolumeClaim, StorageClass } from "../../shared/kube/types.ts";
import {
  buildCreateVolumeRequest,
  planProvisioning,
  type Result,
} from "../../shared/provisioner/create-volume-request.ts";

const pvName = "pvc-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b";

interface ClaimSpec {
  accessModes?: string[];
  volumeMode?: string;
  storage?: string;
  annotations?: Record<string, string>;
}

function claim(spec: ClaimSpec = {}): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: {
      name: "data",
      namespace: "team-a",
      uid: "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b",
      ...(spec.annotations ? { annotations: spec.annotations } : {}),
    },
    spec: {
      accessModes: spec.accessModes ?? ["ReadWriteOnce"],
      resources: { requests: { storage: spec.storage ?? "1Gi" } },
      storageClassName: "fast",
      ...(spec.volumeMode ? { volumeMode: spec.volumeMode } : {}),
    },
  };
}

function storageClass(parameters?: Record<string, string>, mountOptions?: string[]): StorageClass {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: { name: "fast" },
    provisioner: "hostpath.csi.k8s.io",
    ...(parameters ? { parameters } : {}),
    ...(mountOptions ? { mountOptions } : {}),
  };
}

interface Input {
  claim?: PersistentVolumeClaim;
  class?: StorageClass;
  defaultFsType?: string;
  extraCreateMetadata?: boolean;
  supportsSingleNodeMultiWriter?: boolean;
  secrets?: Record<string, string>;
  accessibility?: TopologyRequirement;
  contentSource?: VolumeContentSource;
}

/** planProvisioning then buildCreateVolumeRequest, as the runtime runs them. */
function request(input: Input = {}): Result<CreateVolumeRequest> {
  const c = input.claim ?? claim();
  const sc = input.class ?? storageClass();
  const plan = planProvisioning(c, sc, pvName, { defaultFsType: input.defaultFsType ?? "" });
  if (!plan.ok) return plan;
  return buildCreateVolumeRequest({
    claim: c,
    storageClass: sc,
    pvName,
    plan: plan.value,
    options: { extraCreateMetadata: input.extraCreateMetadata ?? false },
    supportsSingleNodeMultiWriter: input.supportsSingleNodeMultiWriter ?? false,
    secrets: input.secrets,
    accessibility: input.accessibility,
    contentSource: input.contentSource,
  });
}

function mount(mode: CsiAccessMode, fsType = "", mountFlags: string[] = []) {
  return { mount: { fsType, mountFlags }, accessMode: { mode } };
}

interface Case {
  name: string;
  input: Input;
  want: Result<CreateVolumeRequest>;
}

const cases: Case[] = [
  {
    name: "minimal claim: name, required bytes only, one mount capability, empty parameters",
    input: {},
    want: {
      ok: true,
      value: {
        name: pvName,
        capacityRange: { requiredBytes: 1073741824n },
        volumeCapabilities: [mount("SINGLE_NODE_WRITER")],
        parameters: {},
      },
    },
  },
  {
    name: "1.5Gi is rounded to bytes",
    input: { claim: claim({ storage: "1.5Gi" }) },
    want: {
      ok: true,
      value: {
        name: pvName,
        capacityRange: { requiredBytes: 1610612736n },
        volumeCapabilities: [mount("SINGLE_NODE_WRITER")],
        parameters: {},
      },
    },
  },
  {
    name: "500M is decimal",
    input: { claim: claim({ storage: "500M" }) },
    want: {
      ok: true,
      value: {
        name: pvName,
        capacityRange: { requiredBytes: 500000000n },
        volumeCapabilities: [mount("SINGLE_NODE_WRITER")],
        parameters: {},
      },
    },
  },
  {
    name: "one capability per access mode, each with the class fsType and mountOptions",
    input: {
      claim: claim({ accessModes: ["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany"] }),
      class: storageClass({ "csi.storage.k8s.io/fstype": "xfs" }, ["noatime", "discard"]),
    },
    want: {
      ok: true,
      value: {
        name: pvName,
        capacityRange: { requiredBytes: 1073741824n },
        volumeCapabilities: [
          mount("SINGLE_NODE_WRITER", "xfs", ["noatime", "discard"]),
          mount("MULTI_NODE_READER_ONLY", "xfs", ["noatime", "discard"]),
          mount("MULTI_NODE_MULTI_WRITER", "xfs", ["noatime", "discard"]),
        ],
        parameters: {},
      },
    },
  },
  {
    name: "Block: block capabilities, no fsType or mount flags",
    input: {
      claim: claim({ accessModes: ["ReadWriteOnce", "ReadWriteMany"], volumeMode: "Block" }),
      class: storageClass({ "csi.storage.k8s.io/fstype": "ext4" }, ["noatime"]),
    },
    want: {
      ok: true,
      value: {
        name: pvName,
        capacityRange: { requiredBytes: 1073741824n },
        volumeCapabilities: [
          { block: {}, accessMode: { mode: "SINGLE_NODE_WRITER" } },
          { block: {}, accessMode: { mode: "MULTI_NODE_MULTI_WRITER" } },
        ],
        parameters: {},
      },
    },
  },
  {
    name: "deprecated fsType key is honoured and passed through (not under the prefix)",
    input: { class: storageClass({ fsType: "ext3" }) },
    want: {
      ok: true,
      value: {
        name: pvName,
        capacityRange: { requiredBytes: 1073741824n },
        volumeCapabilities: [mount("SINGLE_NODE_WRITER", "ext3")],
        parameters: { fsType: "ext3" },
      },
    },
  },
  {
    name: "--default-fstype when the class names none",
    input: { defaultFsType: "ext4" },
    want: {
      ok: true,
      value: {
        name: pvName,
        capacityRange: { requiredBytes: 1073741824n },
        volumeCapabilities: [mount("SINGLE_NODE_WRITER", "ext4")],
        parameters: {},
      },
    },
  },
  {
    name: "the class fsType beats --default-fstype",
    input: { defaultFsType: "ext4", class: storageClass({ "csi.storage.k8s.io/fstype": "xfs" }) },
    want: {
      ok: true,
      value: {
        name: pvName,
        capacityRange: { requiredBytes: 1073741824n },
        volumeCapabilities: [mount("SINGLE_NODE_WRITER", "xfs")],
        parameters: {},
      },
    },
  },
  {
    name: "fstype both as deprecated and prefixed key is an error",
    input: { class: storageClass({ fstype: "ext4", "csi.storage.k8s.io/fstype": "xfs" }) },
    want: {
      ok: false,
      error: 'fstype specified in parameters with both "fstype" and "csi.storage.k8s.io/fstype" keys',
    },
  },
  {
    name: "parameters: every csi.storage.k8s.io/ key stripped, others (incl. deprecated csi* secret keys) kept",
    input: {
      class: storageClass({
        tier: "gold",
        replicas: "3",
        "csi.storage.k8s.io/fstype": "ext4",
        "csi.storage.k8s.io/secret-name": "default-creds",
        "csi.storage.k8s.io/secret-namespace": "kube-system",
        "csi.storage.k8s.io/node-expand-secret-name": "expand",
        "csi.storage.k8s.io/node-expand-secret-namespace": "kube-system",
        csiProvisionerSecretName: "prov",
        csiProvisionerSecretNamespace: "kube-system",
      }),
    },
    want: {
      ok: true,
      value: {
        name: pvName,
        capacityRange: { requiredBytes: 1073741824n },
        volumeCapabilities: [mount("SINGLE_NODE_WRITER", "ext4")],
        parameters: {
          tier: "gold",
          replicas: "3",
          csiProvisionerSecretName: "prov",
          csiProvisionerSecretNamespace: "kube-system",
        },
      },
    },
  },
  {
    name: "an unknown key under the reserved prefix is an error",
    input: { class: storageClass({ tier: "gold", "csi.storage.k8s.io/tier": "gold" }) },
    want: {
      ok: false,
      error:
        'failed to strip CSI Parameters of prefixed keys: found unknown parameter key "csi.storage.k8s.io/tier" with reserved namespace csi.storage.k8s.io/',
    },
  },
  {
    name: "--extra-create-metadata adds pvc name/namespace and pv name",
    input: { extraCreateMetadata: true, class: storageClass({ tier: "gold" }) },
    want: {
      ok: true,
      value: {
        name: pvName,
        capacityRange: { requiredBytes: 1073741824n },
        volumeCapabilities: [mount("SINGLE_NODE_WRITER")],
        parameters: {
          tier: "gold",
          "csi.storage.k8s.io/pvc/name": "data",
          "csi.storage.k8s.io/pvc/namespace": "team-a",
          "csi.storage.k8s.io/pv/name": pvName,
        },
      },
    },
  },
  {
    name: "without --extra-create-metadata the class parameters alone",
    input: { extraCreateMetadata: false, class: storageClass({ tier: "gold" }) },
    want: {
      ok: true,
      value: {
        name: pvName,
        capacityRange: { requiredBytes: 1073741824n },
        volumeCapabilities: [mount("SINGLE_NODE_WRITER")],
        parameters: { tier: "gold" },
      },
    },
  },
  {
    name: "the provisioner Secret's data become secrets",
    input: { secrets: { username: "admin", password: "s3cret" } },
    want: {
      ok: true,
      value: {
        name: pvName,
        capacityRange: { requiredBytes: 1073741824n },
        volumeCapabilities: [mount("SINGLE_NODE_WRITER")],
        parameters: {},
        secrets: { username: "admin", password: "s3cret" },
      },
    },
  },
  {
    name: "content source (snapshot) and accessibility requirements are passed through",
    input: {
      contentSource: { snapshot: { snapshotId: "snap-1" }, type: "snapshot" },
      accessibility: {
        requisite: [{ segments: { zone: "a" } }, { segments: { zone: "b" } }],
        preferred: [{ segments: { zone: "b" } }, { segments: { zone: "a" } }],
      },
    },
    want: {
      ok: true,
      value: {
        name: pvName,
        capacityRange: { requiredBytes: 1073741824n },
        volumeCapabilities: [mount("SINGLE_NODE_WRITER")],
        parameters: {},
        volumeContentSource: { snapshot: { snapshotId: "snap-1" }, type: "snapshot" },
        accessibilityRequirements: {
          requisite: [{ segments: { zone: "a" } }, { segments: { zone: "b" } }],
          preferred: [{ segments: { zone: "b" } }, { segments: { zone: "a" } }],
        },
      },
    },
  },
  {
    name: "content source (clone) is passed through",
    input: { contentSource: { volume: { volumeId: "vol-src" }, type: "volume" } },
    want: {
      ok: true,
      value: {
        name: pvName,
        capacityRange: { requiredBytes: 1073741824n },
        volumeCapabilities: [mount("SINGLE_NODE_WRITER")],
        parameters: {},
        volumeContentSource: { volume: { volumeId: "vol-src" }, type: "volume" },
      },
    },
  },
  {
    name: "without SINGLE_NODE_MULTI_WRITER: RWO and RWOP both SINGLE_NODE_WRITER",
    input: {
      claim: claim({ accessModes: ["ReadWriteOnce", "ReadWriteOncePod"] }),
      supportsSingleNodeMultiWriter: false,
    },
    want: {
      ok: true,
      value: {
        name: pvName,
        capacityRange: { requiredBytes: 1073741824n },
        volumeCapabilities: [mount("SINGLE_NODE_WRITER"), mount("SINGLE_NODE_WRITER")],
        parameters: {},
      },
    },
  },
  {
    name: "with SINGLE_NODE_MULTI_WRITER: RWO → SINGLE_NODE_MULTI_WRITER, RWOP → SINGLE_NODE_SINGLE_WRITER",
    input: {
      claim: claim({ accessModes: ["ReadWriteOnce", "ReadWriteOncePod", "ReadOnlyMany", "ReadWriteMany"] }),
      supportsSingleNodeMultiWriter: true,
    },
    want: {
      ok: true,
      value: {
        name: pvName,
        capacityRange: { requiredBytes: 1073741824n },
        volumeCapabilities: [
          mount("SINGLE_NODE_MULTI_WRITER"),
          mount("SINGLE_NODE_SINGLE_WRITER"),
          mount("MULTI_NODE_READER_ONLY"),
          mount("MULTI_NODE_MULTI_WRITER"),
        ],
        parameters: {},
      },
    },
  },
  {
    name: "an unknown access mode is an error",
    input: { claim: claim({ accessModes: ["ReadWriteSometimes"] }) },
    want: { ok: false, error: "unsupported AccessMode combination: [ReadWriteSometimes]" },
  },
];

describe("buildCreateVolumeRequest (after planProvisioning)", () => {
  for (const c of cases) {
    it(c.name, () => {
      assert.deepEqual(request(c.input), c.want);
    });
  }

  it("leaves limit_bytes unset", () => {
    const r = request();
    assert.ok(r.ok);
    assert.equal(Object.hasOwn(r.value.capacityRange ?? {}, "limitBytes"), false);
  });

  it("does not modify the class parameters", () => {
    const params = { tier: "gold", "csi.storage.k8s.io/fstype": "ext4" };
    const r = request({ class: storageClass(params), extraCreateMetadata: true });
    assert.ok(r.ok);
    assert.deepEqual(params, { tier: "gold", "csi.storage.k8s.io/fstype": "ext4" });
  });
});

// ---- secret references ------------------------------------------------------

interface SecretCase {
  name: string;
  parameters: Record<string, string>;
  annotations?: Record<string, string>;
  want: Result<Record<string, { name: string; namespace: string }>>;
}

const prefix = "csi.storage.k8s.io/";

const secretCases: SecretCase[] = [
  {
    name: "no secret parameters: no references",
    parameters: { tier: "gold" },
    want: { ok: true, value: {} },
  },
  {
    name: "provisioner secret from ${pvc.name} and ${pvc.namespace}",
    parameters: {
      [`${prefix}provisioner-secret-name`]: "${pvc.name}-creds",
      [`${prefix}provisioner-secret-namespace`]: "${pvc.namespace}",
    },
    want: { ok: true, value: { provisioner: { name: "data-creds", namespace: "team-a" } } },
  },
  {
    name: "provisioner secret from ${pvc.annotations['k']}, namespace from ${pv.name}",
    parameters: {
      [`${prefix}provisioner-secret-name`]: "${pvc.annotations['team.example.com/secret']}",
      [`${prefix}provisioner-secret-namespace`]: "${pv.name}",
    },
    annotations: { "team.example.com/secret": "vault-creds" },
    want: { ok: true, value: { provisioner: { name: "vault-creds", namespace: pvName } } },
  },
  {
    name: "name from ${pv.name}, literal namespace",
    parameters: {
      [`${prefix}provisioner-secret-name`]: "${pv.name}",
      [`${prefix}provisioner-secret-namespace`]: "kube-system",
    },
    want: { ok: true, value: { provisioner: { name: pvName, namespace: "kube-system" } } },
  },
  {
    name: "each kind its own pair",
    parameters: {
      [`${prefix}provisioner-secret-name`]: "prov",
      [`${prefix}provisioner-secret-namespace`]: "ns-prov",
      [`${prefix}controller-publish-secret-name`]: "cp",
      [`${prefix}controller-publish-secret-namespace`]: "ns-cp",
      [`${prefix}node-stage-secret-name`]: "ns",
      [`${prefix}node-stage-secret-namespace`]: "ns-ns",
      [`${prefix}node-publish-secret-name`]: "np-${pvc.name}",
      [`${prefix}node-publish-secret-namespace`]: "${pvc.namespace}",
      [`${prefix}controller-expand-secret-name`]: "ce",
      [`${prefix}controller-expand-secret-namespace`]: "ns-ce",
      [`${prefix}node-expand-secret-name`]: "ne",
      [`${prefix}node-expand-secret-namespace`]: "ns-ne",
    },
    want: {
      ok: true,
      value: {
        provisioner: { name: "prov", namespace: "ns-prov" },
        controllerPublish: { name: "cp", namespace: "ns-cp" },
        nodeStage: { name: "ns", namespace: "ns-ns" },
        nodePublish: { name: "np-data", namespace: "team-a" },
        controllerExpand: { name: "ce", namespace: "ns-ce" },
        nodeExpand: { name: "ne", namespace: "ns-ne" },
      },
    },
  },
  {
    name: "the default pair fills every kind without its own",
    parameters: {
      [`${prefix}secret-name`]: "${pvc.name}-default",
      [`${prefix}secret-namespace`]: "${pvc.namespace}",
      [`${prefix}node-stage-secret-name`]: "stage",
      [`${prefix}node-stage-secret-namespace`]: "kube-system",
    },
    want: {
      ok: true,
      value: {
        provisioner: { name: "data-default", namespace: "team-a" },
        controllerPublish: { name: "data-default", namespace: "team-a" },
        nodeStage: { name: "stage", namespace: "kube-system" },
        nodePublish: { name: "data-default", namespace: "team-a" },
        controllerExpand: { name: "data-default", namespace: "team-a" },
        nodeExpand: { name: "data-default", namespace: "team-a" },
        controllerModify: { name: "data-default", namespace: "team-a" },
      },
    },
  },
  {
    name: "only the name is an error",
    parameters: { [`${prefix}provisioner-secret-name`]: "prov" },
    want: {
      ok: false,
      error:
        "failed to get name and namespace template from params: either name and namespace for Provisioner secrets specified, Both must be specified",
    },
  },
  {
    name: "only the namespace is an error",
    parameters: { [`${prefix}node-publish-secret-namespace`]: "kube-system" },
    want: {
      ok: false,
      error:
        "failed to get name and namespace template from params: either name and namespace for NodePublish secrets specified, Both must be specified",
    },
  },
  {
    name: "${pvc.name} is not allowed in the namespace",
    parameters: {
      [`${prefix}provisioner-secret-name`]: "prov",
      [`${prefix}provisioner-secret-namespace`]: "${pvc.name}",
    },
    want: { ok: false, error: 'error resolving value "${pvc.name}": invalid tokens: ["pvc.name"]' },
  },
  {
    name: "an annotation the claim lacks is an invalid token",
    parameters: {
      [`${prefix}provisioner-secret-name`]: "${pvc.annotations['missing']}",
      [`${prefix}provisioner-secret-namespace`]: "kube-system",
    },
    want: {
      ok: false,
      error: `error resolving value "\${pvc.annotations['missing']}": invalid tokens: ["pvc.annotations['missing']"]`,
    },
  },
  {
    name: "a resolved name that is not DNS-1123 is an error",
    parameters: {
      [`${prefix}provisioner-secret-name`]: "${pvc.annotations['k']}",
      [`${prefix}provisioner-secret-namespace`]: "kube-system",
    },
    annotations: { k: "Not_Valid" },
    want: {
      ok: false,
      error: `"\${pvc.annotations['k']}" resolved to "Not_Valid" which is not a valid secret name`,
    },
  },
];

describe("planProvisioning: secret references", () => {
  for (const c of secretCases) {
    it(c.name, () => {
      const plan = planProvisioning(
        claim(c.annotations ? { annotations: c.annotations } : {}),
        storageClass(c.parameters),
        pvName,
        { defaultFsType: "" },
      );
      assert.deepEqual(plan.ok ? { ok: true, value: plan.value.secretRefs } : plan, c.want);
    });
  }

  it("carries the parsed class parameters for the request", () => {
    const plan = planProvisioning(
      claim(),
      storageClass({ tier: "gold", "csi.storage.k8s.io/fstype": "xfs" }),
      pvName,
      {
        defaultFsType: "ext4",
      },
    );
    assert.ok(plan.ok);
    assert.equal(plan.value.classParameters.fsType, "xfs");
    assert.deepEqual(plan.value.classParameters.parameters, { tier: "gold" });
  });
});
