// Field errors and denial messages spelled the way kube-apiserver spells them
// (k8s.io/apimachinery util/validation/field and api/errors), so a denial
// from this webhook reads like the API server's own validation to kubectl
// users: `PersistentVolumeClaim "data" is invalid: spec: Forbidden: ...`.

export type FieldErrorType = "Required" | "Forbidden" | "Invalid" | "NotFound";

export interface FieldError {
  type: FieldErrorType;
  /** "spec.resources.requests.storage" */
  field: string;
  /** The offending value, for Invalid and NotFound. */
  value?: unknown;
  detail?: string;
}

export const required = (field: string, detail?: string): FieldError => ({
  type: "Required",
  field,
  ...(detail ? { detail } : {}),
});
export const forbidden = (field: string, detail: string): FieldError => ({
  type: "Forbidden",
  field,
  detail,
});
export const invalid = (field: string, value: unknown, detail: string): FieldError => ({
  type: "Invalid",
  field,
  value,
  detail,
});
export const notFound = (field: string, value: unknown, detail?: string): FieldError => ({
  type: "NotFound",
  field,
  value,
  ...(detail ? { detail } : {}),
});

const MAX_VALUE_CHARS = 200;

/** Go's %q for strings, plain numbers and booleans, JSON for the rest; long values are cut. */
function showValue(value: unknown): string {
  let text: string;
  if (typeof value === "number" || typeof value === "boolean") text = String(value);
  else if (value === undefined || value === null) text = "null";
  else text = JSON.stringify(value) ?? String(value);
  return text.length <= MAX_VALUE_CHARS ? text : `${text.slice(0, MAX_VALUE_CHARS)}…`;
}

const typeText: Record<FieldErrorType, string> = {
  Required: "Required value",
  Forbidden: "Forbidden",
  Invalid: "Invalid value",
  NotFound: "Not found",
};

/** `spec.nodeName: Required value`, `spec: Invalid value: {...}: field is immutable`. */
export function formatFieldError(e: FieldError): string {
  const parts = [`${e.field}: ${typeText[e.type]}`];
  if (e.type === "Invalid" || e.type === "NotFound") parts.push(showValue(e.value));
  if (e.detail) parts.push(e.detail);
  return parts.join(": ");
}

/** errors.NewInvalid: one error as is, several in brackets. `kind` is "Kind" or "Kind.group". */
export function invalidMessage(kind: string, name: string, errors: readonly FieldError[]): string {
  const texts = errors.map(formatFieldError);
  const joined = texts.length === 1 ? texts[0] : `[${texts.join(", ")}]`;
  return `${kind} "${name}" is invalid: ${joined}`;
}

/** errors.NewForbidden as admission plugins use it: `persistentvolumeclaims "data" is forbidden: ...`. */
export function forbiddenMessage(resource: string, name: string, reason: string): string {
  return name === ""
    ? `${resource} is forbidden: ${reason}`
    : `${resource} "${name}" is forbidden: ${reason}`;
}
