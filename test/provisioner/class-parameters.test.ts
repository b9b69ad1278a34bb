// biome-ignore-all lint/suspicious/noTemplateCurlyInString: StorageClass secret templates spell ${...} literally
// StorageClass parameters as the external-provisioner splits them: driver
// parameters, fsType, and per-kind secret templates with the default pair.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { PersistentVolumeClaim } from "../../shared/kube/types.ts";
import {
  type ClassParametersResult,
  extraCreateMetadata,
  parseClassParameters,
} from "../../shared/provisioner/class-parameters.ts";

const p = "csi.storage.k8s.io/";

interface Case {
  name: string;
  params: Record<string, string> | undefined;
  defaultFsType?: string;
  want: ClassParametersResult;
}

const ok = (value: Extract<ClassParametersResult, { ok: true }>["value"]): ClassParametersResult => ({
  ok: true,
  value,
});
const fail = (error: string): ClassParametersResult => ({ ok: false, error });

const cases: Case[] = [
  { name: "no parameters", params: undefined, want: ok({ parameters: {}, fsType: "", secretTemplates: {} }) },
  {
    name: "driver parameters pass through, known prefixed keys are stripped",
    params: { type: "ssd", replicas: "3", [`${p}fstype`]: "xfs" },
    want: ok({ parameters: { type: "ssd", replicas: "3" }, fsType: "xfs", secretTemplates: {} }),
  },
  {
    name: "deprecated bare fstype is used and still passed to the driver",
    params: { fstype: "ext3" },
    want: ok({ parameters: { fstype: "ext3" }, fsType: "ext3", secretTemplates: {} }),
  },
  {
    name: "bare fsType matches case-insensitively",
    params: { FSType: "ext4" },
    want: ok({ parameters: { FSType: "ext4" }, fsType: "ext4", secretTemplates: {} }),
  },
  {
    name: "bare and prefixed fstype together",
    params: { fstype: "ext4", [`${p}fstype`]: "xfs" },
    want: fail(`fstype specified in parameters with both "fstype" and "${p}fstype" keys`),
  },
  {
    name: "default fstype when the class names none",
    params: {},
    defaultFsType: "ext4",
    want: ok({ parameters: {}, fsType: "ext4", secretTemplates: {} }),
  },
  {
    name: "class fstype wins over the default",
    params: { [`${p}fstype`]: "xfs" },
    defaultFsType: "ext4",
    want: ok({ parameters: {}, fsType: "xfs", secretTemplates: {} }),
  },
  {
    name: "unknown key under the reserved prefix",
    params: { [`${p}bogus`]: "x", a: "b" },
    want: fail(
      `failed to strip CSI Parameters of prefixed keys: found unknown parameter key "${p}bogus" with reserved namespace ${p}`,
    ),
  },
  {
    name: "the default pair applies to every kind",
    params: { [`${p}secret-name`]: "s", [`${p}secret-namespace`]: "ns" },
    want: ok({
      parameters: {},
      fsType: "",
      secretTemplates: {
        provisioner: { nameTemplate: "s", namespaceTemplate: "ns" },
        controllerPublish: { nameTemplate: "s", namespaceTemplate: "ns" },
        nodeStage: { nameTemplate: "s", namespaceTemplate: "ns" },
        nodePublish: { nameTemplate: "s", namespaceTemplate: "ns" },
        controllerExpand: { nameTemplate: "s", namespaceTemplate: "ns" },
        nodeExpand: { nameTemplate: "s", namespaceTemplate: "ns" },
        controllerModify: { nameTemplate: "s", namespaceTemplate: "ns" },
      },
    }),
  },
  {
    name: "a kind's own pair overrides the default for that kind only",
    params: {
      [`${p}secret-name`]: "s",
      [`${p}secret-namespace`]: "ns",
      [`${p}node-publish-secret-name`]: "np-${pvc.name}",
      [`${p}node-publish-secret-namespace`]: "${pvc.namespace}",
    },
    want: ok({
      parameters: {},
      fsType: "",
      secretTemplates: {
        provisioner: { nameTemplate: "s", namespaceTemplate: "ns" },
        controllerPublish: { nameTemplate: "s", namespaceTemplate: "ns" },
        nodeStage: { nameTemplate: "s", namespaceTemplate: "ns" },
        nodePublish: { nameTemplate: "np-${pvc.name}", namespaceTemplate: "${pvc.namespace}" },
        controllerExpand: { nameTemplate: "s", namespaceTemplate: "ns" },
        nodeExpand: { nameTemplate: "s", namespaceTemplate: "ns" },
        controllerModify: { nameTemplate: "s", namespaceTemplate: "ns" },
      },
    }),
  },
  {
    name: "every per-kind key is recognised",
    params: Object.fromEntries(
      [
        "provisioner",
        "controller-publish",
        "node-stage",
        "node-publish",
        "controller-expand",
        "node-expand",
        "controller-modify",
      ].flatMap((k) => [
        [`${p}${k}-secret-name`, `${k}-name`],
        [`${p}${k}-secret-namespace`, `${k}-ns`],
      ]),
    ),
    want: ok({
      parameters: {},
      fsType: "",
      secretTemplates: {
        provisioner: { nameTemplate: "provisioner-name", namespaceTemplate: "provisioner-ns" },
        controllerPublish: {
          nameTemplate: "controller-publish-name",
          namespaceTemplate: "controller-publish-ns",
        },
        nodeStage: { nameTemplate: "node-stage-name", namespaceTemplate: "node-stage-ns" },
        nodePublish: { nameTemplate: "node-publish-name", namespaceTemplate: "node-publish-ns" },
        controllerExpand: {
          nameTemplate: "controller-expand-name",
          namespaceTemplate: "controller-expand-ns",
        },
        nodeExpand: { nameTemplate: "node-expand-name", namespaceTemplate: "node-expand-ns" },
        controllerModify: {
          nameTemplate: "controller-modify-name",
          namespaceTemplate: "controller-modify-ns",
        },
      },
    }),
  },
  {
    name: "deprecated provisioner keys are honoured and not stripped",
    params: { csiProvisionerSecretName: "old", csiProvisionerSecretNamespace: "old-ns" },
    want: ok({
      parameters: { csiProvisionerSecretName: "old", csiProvisionerSecretNamespace: "old-ns" },
      fsType: "",
      secretTemplates: { provisioner: { nameTemplate: "old", namespaceTemplate: "old-ns" } },
    }),
  },
  {
    name: "deprecated and prefixed name for the same kind",
    params: {
      csiNodeStageSecretName: "a",
      [`${p}node-stage-secret-name`]: "b",
      [`${p}node-stage-secret-namespace`]: "ns",
    },
    want: fail(
      `failed to get name and namespace template from params: NodeStage secrets specified in parameters with both "csi" and "${p}" keys`,
    ),
  },
  {
    name: "name without namespace",
    params: { [`${p}node-publish-secret-name`]: "s" },
    want: fail(
      "failed to get name and namespace template from params: either name and namespace for NodePublish secrets specified, Both must be specified",
    ),
  },
  {
    name: "namespace without name",
    params: { [`${p}controller-expand-secret-namespace`]: "ns" },
    want: fail(
      "failed to get name and namespace template from params: either name and namespace for ControllerExpand secrets specified, Both must be specified",
    ),
  },
  {
    name: "empty value",
    params: { [`${p}provisioner-secret-name`]: "", [`${p}provisioner-secret-namespace`]: "ns" },
    want: fail(
      "failed to get name and namespace template from params: Provisioner secrets specified in parameters but value of either namespace or name is empty",
    ),
  },
  {
    name: "default pair with only a name",
    params: { [`${p}secret-name`]: "s" },
    want: fail(
      "failed to get default name and namespace template from params: either name and namespace for Default secrets specified, Both must be specified",
    ),
  },
  {
    name: "a broken default pair is not consulted when every kind has its own",
    params: {
      [`${p}secret-name`]: "s",
      ...Object.fromEntries(
        [
          "provisioner",
          "controller-publish",
          "node-stage",
          "node-publish",
          "controller-expand",
          "node-expand",
          "controller-modify",
        ].flatMap((k) => [
          [`${p}${k}-secret-name`, "n"],
          [`${p}${k}-secret-namespace`, "ns"],
        ]),
      ),
    },
    want: ok({
      parameters: {},
      fsType: "",
      secretTemplates: {
        provisioner: { nameTemplate: "n", namespaceTemplate: "ns" },
        controllerPublish: { nameTemplate: "n", namespaceTemplate: "ns" },
        nodeStage: { nameTemplate: "n", namespaceTemplate: "ns" },
        nodePublish: { nameTemplate: "n", namespaceTemplate: "ns" },
        controllerExpand: { nameTemplate: "n", namespaceTemplate: "ns" },
        nodeExpand: { nameTemplate: "n", namespaceTemplate: "ns" },
        controllerModify: { nameTemplate: "n", namespaceTemplate: "ns" },
      },
    }),
  },
  {
    name: "fstype error is reported before secret errors",
    params: { fstype: "a", [`${p}fstype`]: "b", [`${p}secret-name`]: "s" },
    want: fail(`fstype specified in parameters with both "fstype" and "${p}fstype" keys`),
  },
];

describe("parseClassParameters", () => {
  for (const c of cases) {
    it(c.name, () => {
      const options = c.defaultFsType === undefined ? {} : { defaultFsType: c.defaultFsType };
      assert.deepEqual(parseClassParameters(c.params, options), c.want);
    });
  }
});

describe("extraCreateMetadata", () => {
  it("names the claim and the PV", () => {
    const claim: PersistentVolumeClaim = {
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: { name: "data", namespace: "team-a", uid: "u1" },
      spec: {},
    };
    assert.deepEqual(extraCreateMetadata(claim, "pvc-u1"), {
      "csi.storage.k8s.io/pvc/name": "data",
      "csi.storage.k8s.io/pvc/namespace": "team-a",
      "csi.storage.k8s.io/pv/name": "pvc-u1",
    });
  });
});
