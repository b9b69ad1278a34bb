// metav1.Status failures, shaped and worded like kube-apiserver's so that
// client libraries and kubectl classify them exactly as they would upstream.
import type { ResourceType } from "./resources.ts";

export interface StatusDetails {
  name?: string;
  group?: string;
  kind?: string;
  causes?: { reason?: string; message: string; field?: string }[];
  retryAfterSeconds?: number;
}

export class ApiError extends Error {
  readonly code: number;
  readonly reason: string;
  readonly details: StatusDetails | undefined;
  constructor(code: number, reason: string, message: string, details?: StatusDetails) {
    super(message);
    this.code = code;
    this.reason = reason;
    this.details = details;
  }

  toStatus(): Record<string, unknown> {
    return {
      kind: "Status",
      apiVersion: "v1",
      metadata: {},
      status: "Failure",
      message: this.message,
      reason: this.reason,
      ...(this.details ? { details: this.details } : {}),
      code: this.code,
    };
  }
}

function qualified(t: ResourceType): string {
  return t.group === "" ? t.plural : `${t.plural}.${t.group}`;
}

function detailsOf(t: ResourceType, name: string): StatusDetails {
  return { name, ...(t.group ? { group: t.group } : {}), kind: t.plural };
}

export function notFound(t: ResourceType, name: string): ApiError {
  return new ApiError(404, "NotFound", `${qualified(t)} "${name}" not found`, detailsOf(t, name));
}

export function namespaceNotFound(ns: string): ApiError {
  return new ApiError(404, "NotFound", `namespaces "${ns}" not found`, { name: ns, kind: "namespaces" });
}

export function alreadyExists(t: ResourceType, name: string): ApiError {
  return new ApiError(409, "AlreadyExists", `${qualified(t)} "${name}" already exists`, detailsOf(t, name));
}

export function conflict(t: ResourceType, name: string, why?: string): ApiError {
  const reason =
    why ?? "the object has been modified; please apply your changes to the latest version and try again";
  return new ApiError(
    409,
    "Conflict",
    `Operation cannot be fulfilled on ${qualified(t)} "${name}": ${reason}`,
    detailsOf(t, name),
  );
}

export function invalid(
  t: ResourceType,
  name: string,
  causes: { field: string; message: string }[],
): ApiError {
  const text = causes.map((c) => `${c.field}: ${c.message}`).join(", ");
  return new ApiError(422, "Invalid", `${t.kind} "${name}" is invalid: ${text}`, {
    ...detailsOf(t, name),
    kind: t.kind,
    causes: causes.map((c) => ({ reason: "FieldValueInvalid", message: c.message, field: c.field })),
  });
}

export function badRequest(message: string): ApiError {
  return new ApiError(400, "BadRequest", message);
}

export function methodNotAllowed(message: string): ApiError {
  return new ApiError(405, "MethodNotAllowed", message);
}

export function gone(message: string): ApiError {
  return new ApiError(410, "Expired", message);
}
