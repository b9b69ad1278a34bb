// metav1.Status failures, shaped and worded like kube-apiserver's so that
// client libraries and kubectl classify them exactly as they would upstream.
import { aggregateMessage, type FieldError } from "./field-errors.ts";
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

/** StatusDetails in Go's field order; empty name and group are omitted as Go's omitempty does. */
function detailsOf(t: ResourceType, name: string, kind: string = t.plural): StatusDetails {
  return { ...(name ? { name } : {}), ...(t.group ? { group: t.group } : {}), kind };
}

/** schema.GroupKind.String(): `Kind` for core, `Kind.group` otherwise. */
function qualifiedKind(t: ResourceType): string {
  return t.group === "" ? t.kind : `${t.kind}.${t.group}`;
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

/**
 * errors.NewInvalid: 422 naming the Kind (not the resource), one cause per
 * field error with its type as the reason.
 */
export function invalid(t: ResourceType, name: string, errors: readonly FieldError[]): ApiError {
  return new ApiError(
    422,
    "Invalid",
    `${qualifiedKind(t)} ${JSON.stringify(name)} is invalid: ${aggregateMessage(errors)}`,
    {
      ...detailsOf(t, name, t.kind),
      causes: errors.map((e) => ({ reason: e.type, message: e.body, field: e.field })),
    },
  );
}

/**
 * A DeleteOptions precondition that does not hold. kube-apiserver checks these
 * in rest.BeforeDelete, which builds its Conflict from the object's Kind where
 * every other Conflict names the resource: details.kind and the message say
 * "PersistentVolumeClaim", not "persistentvolumeclaims".
 */
export function deletePreconditionConflict(t: ResourceType, name: string, why: string): ApiError {
  return new ApiError(
    409,
    "Conflict",
    `Operation cannot be fulfilled on ${qualifiedKind(t)} ${JSON.stringify(name)}: ${why}`,
    detailsOf(t, name, t.kind),
  );
}

/** admission.NewForbidden: 403 naming the resource, as a validating admission plugin refuses. */
export function forbidden(t: ResourceType, name: string, why: string): ApiError {
  const subject = name ? `${qualified(t)} ${JSON.stringify(name)}` : qualified(t);
  return new ApiError(403, "Forbidden", `${subject} is forbidden: ${why}`, detailsOf(t, name));
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
