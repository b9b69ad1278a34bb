// A StorageClass's `parameters` as the external-provisioner reads them: the
// `csi.storage.k8s.io/` keys are for the sidecar (fsType, secret templates)
// and never reach the driver; everything else is passed through untouched.
import type { PersistentVolumeClaim } from "../kube/types.ts";
import { compareStrings } from "./go-format.ts";

export const csiParameterPrefix = "csi.storage.k8s.io/";
export const prefixedFsTypeKey = `${csiParameterPrefix}fstype`;

export const pvcNameKey = `${csiParameterPrefix}pvc/name`;
export const pvcNamespaceKey = `${csiParameterPrefix}pvc/namespace`;
export const pvNameKey = `${csiParameterPrefix}pv/name`;

export type SecretKind =
  | "provisioner"
  | "controllerPublish"
  | "nodeStage"
  | "nodePublish"
  | "controllerExpand"
  | "nodeExpand"
  | "controllerModify";

/** The secret kinds in the order upstream resolves them (so the first error reported matches). */
export const secretKinds: readonly SecretKind[] = [
  "provisioner",
  "controllerPublish",
  "nodeStage",
  "nodePublish",
  "controllerExpand",
  "nodeExpand",
  "controllerModify",
];

export interface SecretTemplate {
  nameTemplate: string;
  namespaceTemplate: string;
}

export type SecretTemplates = Partial<Record<SecretKind, SecretTemplate>>;

interface SecretParamKeys {
  /** Upstream's name for the kind, used in its error texts. */
  label: string;
  nameKey: string;
  namespaceKey: string;
  /** Pre-prefix keys (csiProvisionerSecretName, ...): still honoured, and never stripped from the driver's parameters. */
  deprecatedNameKey?: string;
  deprecatedNamespaceKey?: string;
}

const defaultSecretKeys: SecretParamKeys = {
  label: "Default",
  nameKey: `${csiParameterPrefix}secret-name`,
  namespaceKey: `${csiParameterPrefix}secret-namespace`,
};

/**
 * A kind's keys follow one pattern: "ControllerPublish" is
 * csi.storage.k8s.io/controller-publish-secret-name (and -namespace), and
 * before the prefix existed csiControllerPublishSecretName (and Namespace).
 */
function keysOf(label: string, deprecated: boolean): SecretParamKeys {
  const kebab = label.replace(/(?<=.)[A-Z]/g, (c) => `-${c}`).toLowerCase();
  return {
    label,
    nameKey: `${csiParameterPrefix}${kebab}-secret-name`,
    namespaceKey: `${csiParameterPrefix}${kebab}-secret-namespace`,
    ...(deprecated
      ? { deprecatedNameKey: `csi${label}SecretName`, deprecatedNamespaceKey: `csi${label}SecretNamespace` }
      : {}),
  };
}

const secretKeys: Record<SecretKind, SecretParamKeys> = {
  provisioner: keysOf("Provisioner", true),
  controllerPublish: keysOf("ControllerPublish", true),
  nodeStage: keysOf("NodeStage", true),
  nodePublish: keysOf("NodePublish", true),
  controllerExpand: keysOf("ControllerExpand", false),
  nodeExpand: keysOf("NodeExpand", false),
  controllerModify: keysOf("ControllerModify", false),
};

/** Every key under the prefix that the sidecar understands; any other one is an error. */
const knownPrefixedKeys: ReadonlySet<string> = new Set([
  prefixedFsTypeKey,
  defaultSecretKeys.nameKey,
  defaultSecretKeys.namespaceKey,
  ...Object.values(secretKeys).flatMap((k) => [k.nameKey, k.namespaceKey]),
]);

export interface ClassParameters {
  /** What CreateVolume gets: the class parameters minus every `csi.storage.k8s.io/` key. */
  parameters: Record<string, string>;
  /** From `csi.storage.k8s.io/fstype` or the deprecated bare `fstype`, else the default; "" when none. */
  fsType: string;
  /** Per kind: its own name/namespace pair, else the default pair; absent when neither is set. */
  secretTemplates: SecretTemplates;
}

export type ClassParametersResult = { ok: true; value: ClassParameters } | { ok: false; error: string };

export interface ClassParametersOptions {
  /** --default-fstype: used when the class names no fsType. */
  defaultFsType?: string;
}

export function parseClassParameters(
  classParameters: Readonly<Record<string, string>> | undefined,
  options: ClassParametersOptions = {},
): ClassParametersResult {
  const params = classParameters ?? {};

  // Upstream matches the bare key case-insensitively ("fsType", "FSType"), the prefixed one exactly.
  let fsType = "";
  let fsTypesFound = 0;
  for (const [key, value] of Object.entries(params)) {
    if (key.toLowerCase() === "fstype" || key === prefixedFsTypeKey) {
      fsType = value;
      fsTypesFound++;
    }
  }
  if (fsTypesFound > 1) {
    return {
      ok: false,
      error: `fstype specified in parameters with both "fstype" and "${prefixedFsTypeKey}" keys`,
    };
  }
  if (fsType === "" && options.defaultFsType) fsType = options.defaultFsType;

  const secretTemplates: SecretTemplates = {};
  for (const kind of secretKinds) {
    const own = secretTemplateFor(secretKeys[kind], params);
    if (!own.ok)
      return { ok: false, error: `failed to get name and namespace template from params: ${own.error}` };
    let template = own.template;
    if (!template) {
      // Only when the kind names no secret of its own does the default pair apply.
      const fallback = secretTemplateFor(defaultSecretKeys, params);
      if (!fallback.ok) {
        return {
          ok: false,
          error: `failed to get default name and namespace template from params: ${fallback.error}`,
        };
      }
      template = fallback.template;
    }
    if (template) secretTemplates[kind] = template;
  }

  const parameters: Record<string, string> = {};
  // Sorted so that, of several unknown keys, the same one is always reported (Go's map order is random).
  for (const key of Object.keys(params).sort(compareStrings)) {
    if (key.startsWith(csiParameterPrefix)) {
      if (!knownPrefixedKeys.has(key)) {
        return {
          ok: false,
          error: `failed to strip CSI Parameters of prefixed keys: found unknown parameter key "${key}" with reserved namespace ${csiParameterPrefix}`,
        };
      }
    } else {
      parameters[key] = params[key] ?? "";
    }
  }

  return { ok: true, value: { parameters, fsType, secretTemplates } };
}

type TemplateLookup = { ok: true; template: SecretTemplate | undefined } | { ok: false; error: string };

/** Upstream's verifyAndGetSecretNameAndNamespaceTemplate: both keys or neither, each at most once, neither empty. */
function secretTemplateFor(keys: SecretParamKeys, params: Readonly<Record<string, string>>): TemplateLookup {
  let nameTemplate = "";
  let namespaceTemplate = "";
  let names = 0;
  let namespaces = 0;
  for (const key of [keys.deprecatedNameKey, keys.nameKey]) {
    if (key !== undefined && Object.hasOwn(params, key)) {
      nameTemplate = params[key] ?? "";
      names++;
    }
  }
  for (const key of [keys.deprecatedNamespaceKey, keys.namespaceKey]) {
    if (key !== undefined && Object.hasOwn(params, key)) {
      namespaceTemplate = params[key] ?? "";
      namespaces++;
    }
  }
  if (names > 1 || namespaces > 1) {
    return {
      ok: false,
      error: `${keys.label} secrets specified in parameters with both "csi" and "${csiParameterPrefix}" keys`,
    };
  }
  if (names !== namespaces) {
    return {
      ok: false,
      error: `either name and namespace for ${keys.label} secrets specified, Both must be specified`,
    };
  }
  if (names === 0) return { ok: true, template: undefined };
  if (nameTemplate === "" || namespaceTemplate === "") {
    return {
      ok: false,
      error: `${keys.label} secrets specified in parameters but value of either namespace or name is empty`,
    };
  }
  return { ok: true, template: { nameTemplate, namespaceTemplate } };
}

/** --extra-create-metadata: the claim and PV names the driver may want, as extra CreateVolume parameters. */
export function extraCreateMetadata(claim: PersistentVolumeClaim, pvName: string): Record<string, string> {
  return {
    [pvcNameKey]: claim.metadata.name,
    [pvcNamespaceKey]: claim.metadata.namespace ?? "",
    [pvNameKey]: pvName,
  };
}
