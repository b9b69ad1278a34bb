// kube-apiserver's rules for claims and volumes that the resizer and the
// modify controller depend on (pkg/apis/core/validation, k8s 1.34+ where
// RecoverVolumeExpansionFailure and VolumeAttributesClass are GA and on):
//
// - claim spec is immutable except volumeName (set once), a class for a
//   claim that had none, and for a Bound claim its storage request and its
//   volumeAttributesClassName;
// - the request may go down only while it stays above status.capacity (to
//   recover from a failed expansion); growing is the resize admission
//   plugin's business (claim-resize.ts);
// - volumeAttributesClassName may not go from set to unset or "";
// - status writes: allocatedResources and allocatedResourceStatuses hold the
//   key "storage" only, with the five resize statuses;
// - a volume's volumeAttributesClassName is non-empty, needs spec.csi, and
//   once set stays set.
import { isDeepStrictEqual } from "node:util";
import { isValidQuantity, parseQuantityMilli } from "../../shared/kube/quantity.ts";
import { type FieldError, forbidden, invalid, notSupported, required } from "./field-errors.ts";
import { dns1123SubdomainErrors, qualifiedNameErrors } from "./name-rules.ts";
import { quantityFormat } from "./storage-rules.ts";
import type { KubeObject } from "./store.ts";

type Obj = Record<string, unknown>;

function obj(v: unknown): Obj {
  return v && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : {};
}

function isNil(v: unknown): boolean {
  return v === undefined || v === null;
}

/** Drops null members recursively: a nil pointer and an absent field are the same to Go's comparison. */
function withoutNulls(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutNulls);
  if (typeof value !== "object" || value === null) return value;
  const out: Obj = {};
  for (const [k, v] of Object.entries(value)) if (!isNil(v)) out[k] = withoutNulls(v);
  return out;
}

/** to[key] = from[key], without leaving an `undefined` key behind (deep equality counts those). */
function copyField(from: Obj, to: Obj, key: string): void {
  if (from[key] === undefined) delete to[key];
  else to[key] = from[key];
}

/** A quantity in milli-units, a missing one as zero (Go's zero Quantity); undefined when it does not parse. */
function milli(value: unknown): bigint | undefined {
  if (isNil(value)) return 0n;
  if (typeof value !== "string" || !isValidQuantity(value)) return undefined;
  return parseQuantityMilli(value);
}

function requestedStorage(spec: Obj): unknown {
  return obj(obj(spec.resources).requests).storage;
}

const vacPath = "spec.volumeAttributesClassName";

/** A claim's class of volume attributes, on create and update: "" means none, anything else a class name. */
export function claimSpecRules(o: KubeObject): FieldError[] {
  const name = obj(o.spec).volumeAttributesClassName;
  if (typeof name !== "string" || name === "") return [];
  return dns1123SubdomainErrors(name).map((m) => invalid(vacPath, name, m));
}

export function validateClaimUpdate(next: KubeObject, old: KubeObject): FieldError[] {
  const errs: FieldError[] = [];
  const newSpec = obj(withoutNulls(next.spec));
  const oldSpec = obj(withoutNulls(old.spec));
  if (!oldSpec.volumeName) copyField(newSpec, oldSpec, "volumeName");
  // A claim with no class at all may be given one (retroactive default class, 1.28+).
  if (isNil(oldSpec.storageClassName)) copyField(newSpec, oldSpec, "storageClassName");
  // The status here is the stored one: a main-resource write cannot change it.
  const bound = obj(next.status).phase === "Bound";
  if (bound && newSpec.resources !== undefined && obj(newSpec.resources).requests !== undefined) {
    const requests = obj(obj(newSpec.resources).requests);
    const oldStorage = requestedStorage(oldSpec);
    if (oldStorage === undefined) delete requests.storage;
    else requests.storage = oldStorage;
  }
  if (bound && !isNil(newSpec.volumeAttributesClassName))
    copyField(oldSpec, newSpec, "volumeAttributesClassName");
  if (!isDeepStrictEqual(newSpec, oldSpec)) {
    errs.push(
      forbidden(
        "spec",
        "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
      ),
    );
  }

  const newSize = milli(requestedStorage(obj(next.spec)));
  const oldSize = milli(requestedStorage(obj(old.spec)));
  const statusSize = milli(obj(obj(old.status).capacity).storage) ?? 0n;
  // Lowering is how a user backs out of a failed expansion; it may not reach what the volume already has.
  if (newSize !== undefined && oldSize !== undefined && newSize < oldSize && newSize <= statusSize) {
    errs.push(forbidden("spec.resources.requests.storage", "field can not be less than status.capacity"));
  }

  const newMode = obj(next.spec).volumeMode;
  const oldMode = obj(old.spec).volumeMode;
  // Upstream's path for this one lacks the "spec." prefix.
  if ((newMode ?? null) !== (oldMode ?? null))
    errs.push(invalid("volumeMode", newMode, "field is immutable"));

  const newVac = obj(next.spec).volumeAttributesClassName;
  const oldVac = obj(old.spec).volumeAttributesClassName;
  if (!isNil(oldVac) && (newVac ?? null) !== oldVac) {
    if (isNil(newVac)) errs.push(forbidden(vacPath, "update from non-nil value to nil is forbidden"));
    else if (newVac === "")
      errs.push(forbidden(vacPath, "update from non-nil value to an empty string is forbidden"));
  }
  return errs.concat(claimSpecRules(next));
}

const resizeStatuses = [
  "ControllerResizeInProgress",
  "ControllerResizeInfeasible",
  "NodeResizeInProgress",
  "NodeResizeInfeasible",
  "NodeResizePending",
];

/** Unprefixed or kubernetes.io-prefixed names are Kubernetes' own (helper.IsNativeResource). */
function isNativeResource(name: string): boolean {
  return !name.includes("/") || name.includes("kubernetes.io/");
}

/** validatePersistentVolumeClaimResourceKey: a qualified name, and of the native ones only "storage". */
function resourceKeyErrors(key: string, path: string): FieldError[] {
  const errs = qualifiedNameErrors(key).map((m) => invalid(path, key, m));
  if (errs.length > 0) return errs;
  if (isNativeResource(key) && key !== "storage") return [notSupported(path, key, ["storage"])];
  return [];
}

/** validateBasicResource: a quantity that parses and is not negative. */
function basicResourceErrors(path: string, value: unknown): FieldError[] {
  const m = milli(value);
  if (m === undefined) return [invalid(path, value, quantityFormat)];
  // Upstream shows quantity.Value(), whole units rounded up.
  if (m < 0n) return [invalid(path, Number(-(-m / 1000n)), "must be a valid resource quantity")];
  return [];
}

/** ValidatePersistentVolumeClaimStatusUpdate, for what a status write may carry. */
export function validateClaimStatus(next: KubeObject): FieldError[] {
  const status = obj(next.status);
  const errs: FieldError[] = [];
  for (const [r, q] of Object.entries(obj(status.capacity)).sort()) {
    errs.push(...basicResourceErrors(`status.capacity[${r}]`, q));
  }
  // Upstream's path is singular here.
  const statusPath = "status.allocatedResourceStatus";
  for (const [k, v] of Object.entries(obj(status.allocatedResourceStatuses)).sort()) {
    errs.push(...resourceKeyErrors(k, statusPath));
    // Upstream names the key, not the value, as the unsupported one.
    if (!resizeStatuses.includes(String(v))) errs.push(notSupported(statusPath, k, resizeStatuses));
  }
  const allocPath = "status.allocatedResources";
  for (const [r, q] of Object.entries(obj(status.allocatedResources)).sort()) {
    const keyErrs = resourceKeyErrors(r, allocPath);
    if (keyErrs.length > 0) {
      errs.push(...keyErrs);
      continue;
    }
    errs.push(...basicResourceErrors(`${allocPath}[${r}]`, q));
  }
  return errs;
}

/** ValidatePersistentVolumeSpec's volumeAttributesClassName rules, on create and update. */
export function volumeSpecRules(o: KubeObject): FieldError[] {
  const spec = obj(o.spec);
  const name = spec.volumeAttributesClassName;
  if (isNil(name)) return [];
  const errs: FieldError[] = [];
  if (name === "") errs.push(required(vacPath, "an empty string is disallowed"));
  else {
    const text = String(name);
    errs.push(...dns1123SubdomainErrors(text).map((m) => invalid(vacPath, text, m)));
  }
  if (isNil(spec.csi))
    errs.push(required("spec.csi", "has to be specified when using volumeAttributesClassName"));
  return errs;
}

/** A volume's class of attributes may change (the resizer moves it) but never go back to unset. */
export function volumeAttributesClassUpdateRules(next: KubeObject, old: KubeObject): FieldError[] {
  const newVac = obj(next.spec).volumeAttributesClassName;
  const oldVac = obj(old.spec).volumeAttributesClassName;
  if (!isNil(oldVac) && isNil(newVac)) {
    return [forbidden(vacPath, "update from non-nil value to nil is forbidden")];
  }
  return [];
}
