// gRPC status errors the driver answers with. Handlers throw CsiError with a
// code name; the gRPC binding puts its number on the wire, so the driver
// logic never touches grpc-js.
import { GrpcCode, type GrpcCodeNumber } from "../../shared/csi/errors.ts";

/** A non-OK gRPC status code, by name. */
export type ErrorCodeName = Exclude<keyof typeof GrpcCode, "OK">;

/** Every non-OK gRPC status code, by name, in code order. */
export const errorCodeNames = Object.keys(GrpcCode).filter((name) => name !== "OK") as ErrorCodeName[];

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
  get grpcCode(): GrpcCodeNumber {
    return GrpcCode[this.code];
  }
}

export const invalidArgument = (message: string): CsiError => new CsiError("INVALID_ARGUMENT", message);
export const notFound = (message: string): CsiError => new CsiError("NOT_FOUND", message);
