// kube-apiserver's validation of the storage.k8s.io kinds the capacity and
// modify work reads: VolumeAttributesClass (driverName and parameters, both
// immutable), CSIStorageCapacity (storageClassName and nodeTopology
// immutable, quantities) and CSIDriver's immutable fields. Messages and
// paths as pkg/apis/storage/validation spells them.
import { isDeepStrictEqual } from "node:util";
import { isValidQuantity, parseQuantityMilli } from "../../shared/kube/quantity.ts";
import { type FieldError, forbidden, invalid, required, tooLong } from "./field-errors.ts";
import { dns1123SubdomainErrors, qualifiedNameErrors } from "./name-rules.ts";
import type { KubeObject } from "./store.ts";

type Obj = Record<string, unknown>;

function obj(v: unknown): Obj {
  return v && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : {};
}

export const quantityFormat =
  "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";

const maxParameterBytes = 256 * 1024;
const maxParameterCount = 512;

/** validateProvisioner: required, then a qualified name (checked lowercased, as upstream). */
function driverNameErrors(field: string, value: unknown): FieldError[] {
  if (value === undefined || value === null || value === "") return [required(field)];
  if (typeof value !== "string") return [invalid(field, value, "must be a string")];
  const lower = value.toLowerCase();
  return qualifiedNameErrors(lower).map((m) => invalid(field, lower, m));
}

/** validateParameters with allowEmpty false (a VolumeAttributesClass needs one pair at least). */
function parameterErrors(value: unknown): FieldError[] {
  if (value !== undefined && value !== null && (typeof value !== "object" || Array.isArray(value))) {
    return [invalid("parameters", value, "must be a map of strings")];
  }
  const params = obj(value);
  const entries = Object.entries(params);
  if (entries.length > maxParameterCount) return [tooLong("parameters", maxParameterCount)];
  const errs: FieldError[] = [];
  let size = 0;
  for (const [k, v] of entries) {
    if (k.length < 1) errs.push(invalid("parameters", k, "field can not be empty."));
    if (typeof v !== "string") errs.push(invalid(`parameters[${k}]`, v, "must be a string"));
    size += Buffer.byteLength(k) + Buffer.byteLength(typeof v === "string" ? v : "");
  }
  if (size > maxParameterBytes) errs.push(tooLong("parameters", maxParameterBytes));
  if (entries.length === 0) errs.push(required("parameters", "must contain at least one key/value pair"));
  return errs;
}

export function validateVolumeAttributesClass(o: KubeObject): FieldError[] {
  return [...driverNameErrors("driverName", o.driverName), ...parameterErrors(o.parameters)];
}

/** An absent map and an empty one are the same stored object (omitempty). */
function sameMap(a: unknown, b: unknown): boolean {
  return isDeepStrictEqual(obj(a), obj(b));
}

export function validateVolumeAttributesClassUpdate(next: KubeObject, old: KubeObject): FieldError[] {
  const errs: FieldError[] = [];
  if ((next.driverName ?? "") !== (old.driverName ?? "")) {
    errs.push(forbidden("driverName", "updates to driverName are forbidden."));
  }
  if (!sameMap(next.parameters, old.parameters)) {
    errs.push(forbidden("parameters", "updates to parameters are forbidden."));
  }
  return errs.concat(validateVolumeAttributesClass(next));
}

const labelValuePattern = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const labelValueRule =
  "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

function labelValueErrors(value: string): string[] {
  const errs: string[] = [];
  if (value.length > 63) errs.push("must be no more than 63 characters");
  if (!labelValuePattern.test(value)) errs.push(labelValueRule);
  return errs;
}

/** metav1 validation.ValidateLabelSelector, with its paths and messages. */
export function labelSelectorErrors(selector: unknown, path: string): FieldError[] {
  if (selector === undefined || selector === null) return [];
  if (typeof selector !== "object" || Array.isArray(selector)) {
    return [invalid(path, selector, "must be a label selector")];
  }
  const s = selector as Obj;
  const errs: FieldError[] = [];
  for (const [k, v] of Object.entries(obj(s.matchLabels))) {
    errs.push(...qualifiedNameErrors(k).map((m) => invalid(`${path}.matchLabels`, k, m)));
    const value = typeof v === "string" ? v : String(v);
    errs.push(...labelValueErrors(value).map((m) => invalid(`${path}.matchLabels`, value, m)));
  }
  const expressions = s.matchExpressions;
  if (expressions === undefined || expressions === null) return errs;
  if (!Array.isArray(expressions))
    return [...errs, invalid(`${path}.matchExpressions`, expressions, "must be a list")];
  expressions.forEach((e, i) => {
    const at = `${path}.matchExpressions[${i}]`;
    const r = obj(e);
    const values = Array.isArray(r.values) ? r.values : [];
    switch (r.operator) {
      case "In":
      case "NotIn":
        if (values.length === 0) {
          errs.push(required(`${at}.values`, "must be specified when `operator` is 'In' or 'NotIn'"));
        }
        break;
      case "Exists":
      case "DoesNotExist":
        if (values.length > 0) {
          errs.push(
            forbidden(`${at}.values`, "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"),
          );
        }
        break;
      default:
        errs.push(invalid(`${at}.operator`, r.operator, "not a valid selector operator"));
    }
    const key = typeof r.key === "string" ? r.key : "";
    errs.push(...qualifiedNameErrors(key).map((m) => invalid(`${at}.key`, key, m)));
    values.forEach((v, j) => {
      const value = typeof v === "string" ? v : String(v);
      errs.push(...labelValueErrors(value).map((m) => invalid(`${at}.values[${j}]`, value, m)));
    });
  });
  return errs;
}

function quantityErrors(field: string, value: unknown, nonNegative: boolean): FieldError[] {
  if (value === undefined || value === null) return [];
  if (typeof value !== "string" || !isValidQuantity(value)) return [invalid(field, value, quantityFormat)];
  if (nonNegative && parseQuantityMilli(value) < 0n) {
    return [invalid(field, value, "must be greater than or equal to 0")];
  }
  return [];
}

export function validateCsiStorageCapacity(o: KubeObject): FieldError[] {
  const className = typeof o.storageClassName === "string" ? o.storageClassName : "";
  return [
    ...labelSelectorErrors(o.nodeTopology, "nodeTopology"),
    ...dns1123SubdomainErrors(className).map((m) => invalid("storageClassName", className, m)),
    ...quantityErrors("capacity", o.capacity, true),
    // Upstream checks only capacity's sign; maximumVolumeSize must still parse.
    ...quantityErrors("maximumVolumeSize", o.maximumVolumeSize, false),
  ];
}

/** The inputs of the driver's GetCapacity call may not change. */
export function validateCsiStorageCapacityUpdate(next: KubeObject, old: KubeObject): FieldError[] {
  const errs = validateCsiStorageCapacity(next);
  if (!isDeepStrictEqual(next.nodeTopology ?? null, old.nodeTopology ?? null)) {
    errs.push(invalid("nodeTopology", next.nodeTopology, "field is immutable"));
  }
  if (next.storageClassName !== old.storageClassName) {
    errs.push(invalid("storageClassName", next.storageClassName, "field is immutable"));
  }
  return errs;
}

/** ValidateCSIDriverUpdate: attachRequired (at upstream's path "attachedRequired") and volumeLifecycleModes. */
export function validateCsiDriverUpdate(next: KubeObject, old: KubeObject): FieldError[] {
  const errs: FieldError[] = [];
  const n = obj(next.spec);
  const o = obj(old.spec);
  if (!isDeepStrictEqual(n.attachRequired, o.attachRequired)) {
    errs.push(invalid("spec.attachedRequired", n.attachRequired, "field is immutable"));
  }
  if (!isDeepStrictEqual(n.volumeLifecycleModes, o.volumeLifecycleModes)) {
    errs.push(invalid("spec.volumeLifecycleModes", n.volumeLifecycleModes, "field is immutable"));
  }
  return errs;
}
