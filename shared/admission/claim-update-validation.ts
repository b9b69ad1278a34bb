// PVC UPDATE (main resource), as kube-apiserver validates it
// (ValidatePersistentVolumeClaimUpdate) and then the PersistentVolumeClaimResize
// admission plugin checks it:
//
// - spec is immutable except: volumeName set once (the binder binds),
//   storageClassName set once on a claim that had none (the retroactive
//   default class, 1.28+; or the move from the beta annotation to the field),
//   and for a Bound claim its storage request and volumeAttributesClassName;
// - the beta class annotation is immutable; volumeMode is immutable;
// - volumeAttributesClassName, once set, may not become unset or "";
// - storage may be lowered (to back out of a failed expansion) only while it
//   stays above status.capacity: RecoverVolumeExpansionFailure, GA and
//   always on since 1.34;
// - growing needs a Bound claim whose class (unchanged) allows expansion.
//
// Status writes (subresource "status") are not checked here at all.
//
// "Bound" is read from the old object: kube-apiserver resets status on a
// main-resource update to the stored one, so that is the truth.

import { isDeepStrictEqual } from "node:util";
import { claimClass } from "../kube/claim-class.ts";
import { compareQuantities, parseQuantityMilli } from "../kube/quantity.ts";
import type { PersistentVolumeClaim, StorageClass } from "../kube/types.ts";
import { annBetaStorageClass } from "../kube/well-known.ts";
import { message } from "./constants.ts";
import { type FieldError, forbidden, invalid } from "./field-errors.ts";

type Json = Record<string, unknown>;

/** Drops null members (a nil pointer and an absent field are the same thing), recursively. */
function withoutNulls(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutNulls);
  if (typeof value !== "object" || value === null) return value;
  const out: Json = {};
  for (const [k, v] of Object.entries(value)) if (v !== null && v !== undefined) out[k] = withoutNulls(v);
  return out;
}

function isNil(value: unknown): boolean {
  return value === undefined || value === null;
}

function storageOf(spec: Json): string | undefined {
  const resources = spec.resources as { requests?: Record<string, string> } | undefined;
  return resources?.requests?.storage;
}

/** "0" for a missing size, as a zero Quantity upstream; undefined when unparsable. */
function sizeMilli(text: string | undefined): bigint | undefined {
  try {
    return parseQuantityMilli(text ?? "0");
  } catch {
    return undefined;
  }
}

const MAX_SHOWN = 120;
function shown(value: unknown): string {
  const text = value === undefined ? "(unset)" : (JSON.stringify(value) ?? String(value));
  return text.length <= MAX_SHOWN ? text : `${text.slice(0, MAX_SHOWN)}…`;
}

/** Which spec fields differ, old -> new: what upstream's cmp.Diff tells the user, shorter. */
function specDiff(oldSpec: Json, newSpec: Json): string {
  const keys = [...new Set([...Object.keys(oldSpec), ...Object.keys(newSpec)])].sort();
  return keys
    .filter((k) => !isDeepStrictEqual(oldSpec[k], newSpec[k]))
    .map((k) => `spec.${k}: ${shown(oldSpec[k])} -> ${shown(newSpec[k])}`)
    .join("; ");
}

export function validateClaimUpdate(next: PersistentVolumeClaim, old: PersistentVolumeClaim): FieldError[] {
  const errors: FieldError[] = [];
  const newSpec = withoutNulls(next.spec) as Json;
  const oldSpec = withoutNulls(old.spec) as Json;
  const newAnnotation = next.metadata.annotations?.[annBetaStorageClass];
  const oldAnnotation = old.metadata.annotations?.[annBetaStorageClass];

  // volumeName changes are allowed once.
  if (!old.spec.volumeName) {
    if (newSpec.volumeName === undefined) delete oldSpec.volumeName;
    else oldSpec.volumeName = newSpec.volumeName;
  }

  const newClass = next.spec.storageClassName;
  const oldClass = old.spec.storageClassName;
  const upgradeFromAnnotation =
    oldAnnotation !== undefined &&
    isNil(oldClass) &&
    !isNil(newClass) &&
    newClass === oldAnnotation &&
    (newAnnotation === undefined || newAnnotation === oldAnnotation);
  if (upgradeFromAnnotation) {
    delete newSpec.storageClassName;
  } else {
    if ((newAnnotation ?? "") !== (oldAnnotation ?? "")) {
      errors.push(
        invalid(`metadata.annotations.${annBetaStorageClass}`, newAnnotation ?? "", message.fieldImmutable),
      );
    }
    // A class given to a claim that had none (and no conflicting beta annotation).
    if (!isNil(newClass) && isNil(oldClass) && (oldAnnotation === undefined || newClass === oldAnnotation)) {
      delete newSpec.storageClassName;
    }
  }

  // A Bound claim may change its storage request (the size rules follow).
  if (old.status?.phase === "Bound" && newSpec.resources !== undefined) {
    const requests = (newSpec.resources as Json).requests as Json | undefined;
    if (requests !== undefined) {
      const oldStorage = storageOf(oldSpec);
      if (oldStorage === undefined) delete requests.storage;
      else requests.storage = oldStorage;
    }
  }
  // A Bound claim may also move to another class of volume attributes (its unset rule follows).
  if (old.status?.phase === "Bound" && newSpec.volumeAttributesClassName !== undefined) {
    if (oldSpec.volumeAttributesClassName === undefined) delete newSpec.volumeAttributesClassName;
    else newSpec.volumeAttributesClassName = oldSpec.volumeAttributesClassName;
  }

  if (!isDeepStrictEqual(newSpec, oldSpec)) {
    errors.push(forbidden("spec", `${message.claimSpecImmutable}\n${specDiff(oldSpec, newSpec)}`));
  }

  const newStorage = next.spec.resources?.requests?.storage;
  const newSize = sizeMilli(newStorage);
  const oldSize = sizeMilli(old.spec.resources?.requests?.storage);
  const capacity = sizeMilli(old.status?.capacity?.storage) ?? 0n;
  if (newSize === undefined) {
    errors.push(
      invalid(
        "spec.resources.requests[storage]",
        newStorage,
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
      ),
    );
  } else if (oldSize !== undefined && newSize < oldSize && newSize <= capacity) {
    errors.push(forbidden("spec.resources.requests.storage", message.belowCapacity));
  }

  // Upstream's path for this one lacks the "spec." prefix.
  if ((next.spec.volumeMode ?? null) !== (old.spec.volumeMode ?? null)) {
    errors.push(invalid("volumeMode", next.spec.volumeMode ?? null, message.fieldImmutable));
  }

  const newAttributesClass = next.spec.volumeAttributesClassName;
  const oldAttributesClass = old.spec.volumeAttributesClassName;
  if (!isNil(oldAttributesClass) && newAttributesClass !== oldAttributesClass) {
    if (isNil(newAttributesClass))
      errors.push(forbidden("spec.volumeAttributesClassName", message.attributesClassToNil));
    else if (newAttributesClass === "")
      errors.push(forbidden("spec.volumeAttributesClassName", message.attributesClassToEmpty));
  }
  return errors;
}

export type ExpansionCheck =
  /** Not a size increase: nothing for the resize rule to say. */
  | { verdict: "not-an-expansion" }
  | { verdict: "forbidden"; reason: string }
  /** Allowed if this class (looked up) has allowVolumeExpansion: true. */
  | { verdict: "needs-class"; className: string };

/** PersistentVolumeClaimResize, up to the StorageClass lookup. */
export function checkClaimExpansion(next: PersistentVolumeClaim, old: PersistentVolumeClaim): ExpansionCheck {
  const newSize = next.spec.resources?.requests?.storage ?? "0";
  const oldSize = old.spec.resources?.requests?.storage ?? "0";
  let larger: boolean;
  try {
    larger = compareQuantities(newSize, oldSize) > 0;
  } catch {
    return { verdict: "not-an-expansion" }; // an unparsable size is a validation error already
  }
  if (!larger) return { verdict: "not-an-expansion" };
  if (old.status?.phase !== "Bound") return { verdict: "forbidden", reason: message.onlyBoundCanExpand };
  const className = claimClass(next);
  if (className === "" || className !== claimClass(old))
    return { verdict: "forbidden", reason: message.classMustAllowResize };
  return { verdict: "needs-class", className };
}

/** The looked-up class (undefined: it does not exist) allows the expansion. */
export function classAllowsExpansion(cls: StorageClass | undefined): boolean {
  return cls?.allowVolumeExpansion === true;
}
