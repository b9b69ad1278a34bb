// The four webhooks: one checked AdmissionRequest in, one AdmissionResponse
// out. Each shape-checks the objects it reads, asks the pure rules, does
// the one lookup a rule may need, and applies its failure policy when that
// lookup fails. No hook writes anything, so dryRun requests are answered
// exactly like the others (sideEffects: None).

import { claimClass, claimHasClass } from "../kube/claim-class.ts";
import type { StorageClass } from "../kube/types.ts";
import {
  attacherDriverErrors,
  validateAttachment,
  validateAttachmentUpdate,
} from "./attachment-validation.ts";
import { claimMutationNeedsClasses, mutateClaimOnCreate } from "./claim-mutation.ts";
import { checkClaimExpansion, classAllowsExpansion, validateClaimUpdate } from "./claim-update-validation.ts";
import type { ClusterLookups } from "./cluster-lookups.ts";
import type { AdmissionConfig } from "./config.ts";
import { message } from "./constants.ts";
import { type FieldError, forbiddenMessage, invalidMessage } from "./field-errors.ts";
import { attachmentOf, claimOf, volumeOf } from "./object-shapes.ts";
import {
  type AdmissionRequest,
  type AdmissionResponse,
  AdmissionReviewError,
  admitWithChanges,
  allow,
  type DenialStatus,
  deny,
} from "./review.ts";
import { mutateVolumeOnCreate } from "./volume-mutation.ts";
import { claimWarnings, volumeWarnings } from "./warnings.ts";

export interface AdmissionHook {
  /** The URL path kube-apiserver posts reviews to. */
  path: string;
  /** The resource it reviews; a review for anything else is a webhook configuration mistake (400). */
  serves: { group: string; resource: string };
  review(request: AdmissionRequest): Promise<AdmissionResponse>;
}

export interface AdmissionHookDeps {
  lookups: ClusterLookups;
  config: AdmissionConfig;
}

/** A hook whose every review first checks that the request is for the resource it serves. */
function hookAt(
  path: string,
  serves: AdmissionHook["serves"],
  review: AdmissionHook["review"],
): AdmissionHook {
  return {
    path,
    serves,
    async review(request) {
      const { group, resource } = request.resource;
      if (group !== serves.group || resource !== serves.resource) {
        const wanted = serves.group ? `${serves.resource}.${serves.group}` : serves.resource;
        const got = group ? `${resource}.${group}` : resource;
        throw new AdmissionReviewError(
          `${path} reviews ${wanted}, but this review is for ${got}; check the webhook configuration's rules`,
        );
      }
      return review(request);
    },
  };
}

/** The name for messages: a CREATE with generateName has none yet. */
function nameOf(request: AdmissionRequest, metadata: { name?: string }): string {
  return request.name || metadata.name || "";
}

function invalidStatus(kind: string, name: string, errors: readonly FieldError[]): DenialStatus {
  return { code: 422, reason: "Invalid", message: invalidMessage(kind, name, errors) };
}

function forbiddenStatus(resource: string, name: string, reason: string): DenialStatus {
  return { code: 403, reason: "Forbidden", message: forbiddenMessage(resource, name, reason) };
}

/** A needed lookup failed under failure policy Fail: a transient refusal the client should retry. */
function unavailableStatus(message: string): DenialStatus {
  return { code: 503, reason: "ServiceUnavailable", message: `${message}; retry the request` };
}

function named(resource: string, name: string): string {
  return name === "" ? resource : `${resource} "${name}"`;
}

const claims = { group: "", resource: "persistentvolumeclaims" };
const claimKind = "PersistentVolumeClaim";

export function mutateClaimsHook({ lookups, config }: AdmissionHookDeps): AdmissionHook {
  return hookAt("/mutate/persistentvolumeclaims", claims, async (request) => {
    if (request.operation !== "CREATE" || request.subResource !== "") return allow(request);
    const claim = claimOf(request.object, "request.object");
    const warnings = claimWarnings(claim);
    let classes: StorageClass[] | undefined;
    if (claimMutationNeedsClasses(claim)) {
      let found = await lookups.storageClasses();
      // A claim naming a class the cached list lacks: the class may be newer than the list.
      const wanted = claimHasClass(claim) ? claimClass(claim) : undefined;
      if (found.ok && wanted && !found.value.some((c) => c.metadata.name === wanted))
        found = await lookups.storageClasses({ fresh: true });
      if (found.ok) {
        classes = found.value;
      } else {
        const what = `looking up StorageClasses failed (${found.error})`;
        if (config.failurePolicy.mutateClaims === "Fail") {
          const name = named(claims.resource, nameOf(request, claim.metadata));
          return deny(request, unavailableStatus(`${name} could not be admitted: ${what}`), warnings);
        }
        warnings.push(
          !claimHasClass(claim)
            ? `no default StorageClass was assigned: ${what}; set spec.storageClassName (allowed once while the claim has no class)`
            : `storage-provisioner annotations were not set at creation: ${what}; the binder sets them on its next sync`,
        );
      }
    }
    const mutation = mutateClaimOnCreate({ claim, classes, ourProvisioners: config.provisionerDrivers });
    return admitWithChanges(request, claim, mutation.claim, warnings);
  });
}

export function validateClaimsHook({ lookups, config }: AdmissionHookDeps): AdmissionHook {
  return hookAt("/validate/persistentvolumeclaims", claims, async (request) => {
    if (request.operation !== "UPDATE" || request.subResource !== "") return allow(request);
    const next = claimOf(request.object, "request.object");
    const old = claimOf(request.oldObject, "request.oldObject");
    const name = nameOf(request, next.metadata);
    const warnings = claimWarnings(next);
    // Growing a claim that is not Bound also breaks "spec is immutable", but
    // the resize rule's message says what is actually wrong: say that first.
    const expansion = checkClaimExpansion(next, old);
    if (expansion.verdict === "forbidden" && expansion.reason === message.onlyBoundCanExpand)
      return deny(request, forbiddenStatus(claims.resource, name, expansion.reason), warnings);
    const errors = validateClaimUpdate(next, old);
    if (errors.length > 0) return deny(request, invalidStatus(claimKind, name, errors), warnings);
    if (expansion.verdict === "not-an-expansion") return allow(request, warnings);
    if (expansion.verdict === "forbidden")
      return deny(request, forbiddenStatus(claims.resource, name, expansion.reason), warnings);

    const found = await lookups.storageClasses();
    if (!found.ok) {
      const what = `cannot tell whether StorageClass "${expansion.className}" allows volume expansion: looking up StorageClasses failed (${found.error})`;
      if (config.failurePolicy.validateClaims === "Fail")
        return deny(request, unavailableStatus(`${named(claims.resource, name)}: ${what}`), warnings);
      return allow(request, [...warnings, `volume expansion admitted unchecked: ${what}`]);
    }
    const byName = (list: StorageClass[]) => list.find((c) => c.metadata.name === expansion.className);
    let cls = byName(found.value);
    if (classAllowsExpansion(cls)) return allow(request, warnings);
    // A refusal is never decided on a cached list: the class may be new, or changed, since.
    const fresh = await lookups.storageClasses({ fresh: true });
    if (fresh.ok) cls = byName(fresh.value);
    if (classAllowsExpansion(cls)) return allow(request, warnings);
    return deny(
      request,
      forbiddenStatus(claims.resource, name, resizeRefusal(expansion.className, cls)),
      warnings,
    );
  });
}

/** Upstream's message, plus which class and what about it: something a person can fix. */
function resizeRefusal(className: string, cls: StorageClass | undefined): string {
  const why = cls === undefined ? "does not exist" : "does not set allowVolumeExpansion: true";
  return `${message.classMustAllowResize} (StorageClass "${className}" ${why})`;
}

export function mutateVolumesHook(): AdmissionHook {
  return hookAt(
    "/mutate/persistentvolumes",
    { group: "", resource: "persistentvolumes" },
    async (request) => {
      if (request.operation !== "CREATE" || request.subResource !== "") return allow(request);
      const volume = volumeOf(request.object, "request.object");
      return admitWithChanges(request, volume, mutateVolumeOnCreate(volume), volumeWarnings(volume));
    },
  );
}

const attachments = { group: "storage.k8s.io", resource: "volumeattachments" };
const attachmentKind = "VolumeAttachment.storage.k8s.io";

export function validateAttachmentsHook({ lookups, config }: AdmissionHookDeps): AdmissionHook {
  return hookAt("/validate/volumeattachments", attachments, async (request) => {
    if (request.subResource !== "") return allow(request);
    if (request.operation === "UPDATE") {
      const next = attachmentOf(request.object, "request.object");
      const old = attachmentOf(request.oldObject, "request.oldObject");
      const errors = validateAttachmentUpdate(next, old);
      return errors.length === 0
        ? allow(request)
        : deny(request, invalidStatus(attachmentKind, nameOf(request, next.metadata), errors));
    }
    if (request.operation !== "CREATE") return allow(request);

    const attachment = attachmentOf(request.object, "request.object");
    const name = nameOf(request, attachment.metadata);
    const errors = validateAttachment(attachment);
    if (errors.length > 0) return deny(request, invalidStatus(attachmentKind, name, errors));

    const attacher = attachment.spec.attacher;
    const found = await lookups.csiDriver(attacher);
    if (!found.ok) {
      const what = `cannot check spec.attacher: looking up CSIDriver "${attacher}" failed (${found.error})`;
      if (config.failurePolicy.validateAttachments === "Fail")
        return deny(
          request,
          unavailableStatus(`${named(`${attachments.resource}.${attachments.group}`, name)}: ${what}`),
        );
      return allow(request, [`VolumeAttachment admitted unchecked: ${what}`]);
    }
    const driverErrors = attacherDriverErrors(attacher, found.value !== undefined);
    if (driverErrors.length > 0) return deny(request, invalidStatus(attachmentKind, name, driverErrors));
    return allow(request);
  });
}

/** Every hook the admission function serves. */
export function createAdmissionHooks(deps: AdmissionHookDeps): AdmissionHook[] {
  return [
    mutateClaimsHook(deps),
    validateClaimsHook(deps),
    mutateVolumesHook(),
    validateAttachmentsHook(deps),
  ];
}
