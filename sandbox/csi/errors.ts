// gRPC status errors the driver answers with. Handlers throw CsiError with a
// code name; the gRPC binding turns it into the status on the wire, so the
// driver logic never touches grpc-js.
import { status } from "@grpc/grpc-js";

/** Every non-OK gRPC status code, by name. */
export const errorCodeNames = [
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED",
] as const;

export type ErrorCodeName = (typeof errorCodeNames)[number];

export function isErrorCodeName(v: unknown): v is ErrorCodeName {
  return typeof v === "string" && (errorCodeNames as readonly string[]).includes(v);
}

export class CsiError extends Error {
  readonly code: ErrorCodeName;
  constructor(code: ErrorCodeName, message: string) {
    super(message);
    this.name = "CsiError";
    this.code = code;
  }

  /** The numeric gRPC status for the wire. */
  get grpcCode(): status {
    return status[this.code];
  }
}

export const invalidArgument = (message: string): CsiError => new CsiError("INVALID_ARGUMENT", message);
export const notFound = (message: string): CsiError => new CsiError("NOT_FOUND", message);
