// Assembling the CreateVolume request from the pieces the external-
// provisioner uses, in two pure steps around the reads they need:
// planProvisioning (class parameters, secret references) tells the runtime
// which Secret to read; buildCreateVolumeRequest puts everything together.
import type { CreateVolumeRequest, TopologyRequirement, VolumeContentSource } from "../csi/types.ts";
import { parseQuantityBytes } from "../kube/quantity.ts";
import type { PersistentVolumeClaim, StorageClass } from "../kube/types.ts";
import {
  type ClassParameters,
  extraCreateMetadata,
  parseClassParameters,
  type SecretKind,
} from "./class-parameters.ts";
import type { ProvisionerOptions } from "./options.ts";
import { resolveSecretReferences, type SecretRef } from "./secret-templates.ts";
import type { ClassAttributes } from "./volume-attributes-class.ts";
import { volumeCapabilitiesForClaim } from "./volume-capabilities.ts";

interface ProvisioningPlan {
  classParameters: ClassParameters;
  secretRefs: Partial<Record<SecretKind, SecretRef>>;
}

/** What the runtime made of a claim's CreateVolume request, decided on by the claim plan. */
export type RequestOutcome =
  | {
      kind: "ready";
      request: CreateVolumeRequest;
      plan: ProvisioningPlan;
      selectedNode: string | undefined;
      /** The VolumeAttributesClass whose parameters the request carries; the PV records it. */
      volumeAttributesClassName?: string;
    }
  /** Cannot build the request: a final error (reported, retried with backoff). */
  | { kind: "error"; error: string }
  /** The selected node is gone: the scheduler must choose again. */
  | { kind: "reschedule"; error: string }
  /** An external populator fills this claim: not ours. */
  | { kind: "populator"; reason: string; event: { reason: string; message: string } };

export type Result<T> = { ok: true; value: T } | { ok: false; error: string };

export function planProvisioning(
  claim: PersistentVolumeClaim,
  storageClass: StorageClass,
  pvName: string,
  options: Pick<ProvisionerOptions, "defaultFsType">,
): Result<ProvisioningPlan> {
  const parsed = parseClassParameters(storageClass.parameters, { defaultFsType: options.defaultFsType });
  if (!parsed.ok) return parsed;
  const refs = resolveSecretReferences(parsed.value.secretTemplates, {
    pvName,
    claim: {
      name: claim.metadata.name,
      ...(claim.metadata.namespace !== undefined ? { namespace: claim.metadata.namespace } : {}),
      ...(claim.metadata.annotations ? { annotations: claim.metadata.annotations } : {}),
    },
  });
  if (!refs.ok) return refs;
  return { ok: true, value: { classParameters: parsed.value, secretRefs: refs.value } };
}

interface RequestInput {
  claim: PersistentVolumeClaim;
  storageClass: StorageClass;
  pvName: string;
  plan: ProvisioningPlan;
  options: Pick<ProvisionerOptions, "extraCreateMetadata">;
  supportsSingleNodeMultiWriter: boolean;
  /** The provisioner Secret's data, decoded; undefined when the class names none. */
  secrets: Record<string, string> | undefined;
  accessibility: TopologyRequirement | undefined;
  contentSource: VolumeContentSource | undefined;
  /** The claim's VolumeAttributesClass, judged; undefined when the claim names none. */
  volumeAttributes?: ClassAttributes | undefined;
}

export function buildCreateVolumeRequest(input: RequestInput): Result<CreateVolumeRequest> {
  const { claim, plan } = input;
  let requiredBytes: bigint;
  try {
    requiredBytes = parseQuantityBytes(claim.spec.resources?.requests?.storage ?? "");
  } catch {
    return { ok: false, error: `claim ${claim.metadata.name}: cannot parse requested storage` };
  }
  const capabilities = volumeCapabilitiesForClaim(claim, input.storageClass, plan.classParameters.fsType, {
    supportsSingleNodeMultiWriter: input.supportsSingleNodeMultiWriter,
  });
  if (!capabilities.ok) return capabilities;
  const parameters = {
    ...plan.classParameters.parameters,
    ...(input.options.extraCreateMetadata ? extraCreateMetadata(claim, input.pvName) : {}),
  };
  return {
    ok: true,
    value: {
      name: input.pvName,
      capacityRange: { requiredBytes },
      volumeCapabilities: capabilities.value,
      parameters,
      ...(input.secrets ? { secrets: input.secrets } : {}),
      ...(input.contentSource ? { volumeContentSource: input.contentSource } : {}),
      ...(input.accessibility ? { accessibilityRequirements: input.accessibility } : {}),
      ...(input.volumeAttributes
        ? { mutableParameters: { ...input.volumeAttributes.mutableParameters } }
        : {}),
    },
  };
}
