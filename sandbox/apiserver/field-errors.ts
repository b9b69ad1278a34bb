// Field errors as k8s.io/apimachinery's util/validation/field builds them:
// a machine-readable type (the Status cause's `reason`), the field path, and
// the body text kube-apiserver prints (`Required value`, `Invalid value: "x": why`).

export type FieldErrorType =
  | "FieldValueRequired"
  | "FieldValueForbidden"
  | "FieldValueInvalid"
  | "FieldValueNotSupported"
  | "FieldValueDuplicate"
  | "FieldValueTooLong"
  | "FieldValueNotFound";

export interface FieldError {
  type: FieldErrorType;
  field: string;
  /** The body without the field: what a Status cause's `message` carries. */
  body: string;
}

const typeText: Record<FieldErrorType, string> = {
  FieldValueRequired: "Required value",
  FieldValueForbidden: "Forbidden",
  FieldValueInvalid: "Invalid value",
  FieldValueNotSupported: "Unsupported value",
  FieldValueDuplicate: "Duplicate value",
  FieldValueTooLong: "Too long",
  FieldValueNotFound: "Not found",
};

/** Go's rendering of a bad value: numbers and booleans bare, strings quoted (%q), null for nothing. */
export function showValue(value: unknown): string {
  if (value === undefined || value === null) return "null";
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  return JSON.stringify(value) ?? String(value);
}

function build(type: FieldErrorType, field: string, value: unknown, detail: string, showsValue: boolean) {
  let body = typeText[type];
  if (showsValue) body += `: ${showValue(value)}`;
  if (detail !== "") body += `: ${detail}`;
  return { type, field, body };
}

export const required = (field: string, detail = ""): FieldError =>
  build("FieldValueRequired", field, undefined, detail, false);

export const forbidden = (field: string, detail: string): FieldError =>
  build("FieldValueForbidden", field, undefined, detail, false);

export const invalid = (field: string, value: unknown, detail: string): FieldError =>
  build("FieldValueInvalid", field, value, detail, true);

export const duplicate = (field: string, value: unknown): FieldError =>
  build("FieldValueDuplicate", field, value, "", true);

export const notFound = (field: string, value: unknown): FieldError =>
  build("FieldValueNotFound", field, value, "", true);

export function notSupported(field: string, value: unknown, supported: readonly string[]): FieldError {
  const detail =
    supported.length > 0 ? `supported values: ${supported.map((v) => JSON.stringify(v)).join(", ")}` : "";
  return build("FieldValueNotSupported", field, value, detail, true);
}

/** Too long never prints the value, only the limit. */
export function tooLong(field: string, maxLength: number): FieldError {
  const detail =
    maxLength >= 0
      ? `may not be more than ${maxLength} ${maxLength === 1 ? "byte" : "bytes"}`
      : "value is too long";
  return build("FieldValueTooLong", field, undefined, detail, false);
}

/** `field: body`, as field.Error.Error() prints one error. */
export function formatFieldError(e: FieldError): string {
  return `${e.field}: ${e.body}`;
}

/**
 * field.ErrorList.ToAggregate() printed: identical messages once, one error
 * bare, several as `[a, b]`.
 */
export function aggregateMessage(errors: readonly FieldError[]): string {
  const texts = [...new Set(errors.map(formatFieldError))];
  return texts.length === 1 ? texts[0]! : `[${texts.join(", ")}]`;
}
