// gRPC errors from CSI calls, and what a controller should do about them.
//
// The classification follows the external-provisioner's reading of the gRPC
// and CSI status codes:
//
//   in-progress  Canceled, DeadlineExceeded, Unavailable, Aborted, and any
//                error that is not a gRPC status at all: the driver may still
//                be working on the call (or a previous one for the same
//                volume). Retry the very same request, even if the claim has
//                gone meanwhile, or a created volume may leak.
//   reschedule   ResourceExhausted when the caller may give the scheduler a
//                different node (topology-aware driver and a selected node):
//                drop the selected-node annotation and let it pick again.
//   infeasible   InvalidArgument: the request itself is wrong; retry slowly.
//   final        everything else (and ResourceExhausted without a selected
//                node): the call failed and is certainly not running.
//
// Errors thrown by CsiClient are CsiError instances carrying the numeric
// gRPC `code`, `details` and `metadata`, the fields shared/http/errors.ts
// inspects to answer 503 (retry) for DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED,
// ABORTED and UNAVAILABLE. They deliberately have no `status` field: the HTTP
// layer would read a 4xx `status` as the sender's bad input.

import { Metadata } from "@grpc/grpc-js";
import { isRecord } from "../is-record.ts";

import { GrpcCode, type GrpcCodeName, type GrpcCodeNumber, grpcCodeName } from "./grpc-codes.ts";

export { GrpcCode, type GrpcCodeName, type GrpcCodeNumber, grpcCodeName } from "./grpc-codes.ts";

/**
 * The gRPC status code of a grpc-js ServiceError or CsiError, else undefined.
 * A numeric `code` alone is not enough: Kubernetes ApiExceptions carry HTTP
 * codes there, Node system errors carry strings. gRPC errors also carry a
 * string `details`.
 */
export function grpcCodeOf(err: unknown): number | undefined {
  if (!isRecord(err)) return undefined;
  const { code, details } = err;
  return typeof code === "number" &&
    Number.isInteger(code) &&
    code >= 0 &&
    code <= 16 &&
    typeof details === "string"
    ? code
    : undefined;
}

export function hasGrpcCode(err: unknown, code: GrpcCodeNumber): boolean {
  return grpcCodeOf(err) === code;
}

/** A failed CSI call. `message` reads like upstream's: "rpc error: code = NotFound desc = ...". */
export class CsiError extends Error {
  override name = "CsiError";
  /** Numeric gRPC status code. */
  readonly code: number;
  readonly codeName: GrpcCodeName;
  /** The status message from the driver (or from grpc-js for transport failures). */
  readonly details: string;
  readonly metadata: Metadata;
  /** Full gRPC method, e.g. /csi.v1.Controller/CreateVolume. */
  readonly method: string;
  constructor(
    method: string,
    code: number,
    details: string,
    options: { metadata?: Metadata; cause?: unknown } = {},
  ) {
    const codeName = grpcCodeName(code);
    super(`rpc error: code = ${codeName} desc = ${details}`, { cause: options.cause });
    this.code = code;
    this.codeName = codeName;
    this.details = details;
    this.metadata = options.metadata ?? new Metadata();
    this.method = method;
  }
}

/** Wraps a grpc-js ServiceError from `method` into a CsiError; anything else is returned unchanged. */
export function toCsiError(method: string, err: unknown): unknown {
  if (err instanceof CsiError) return err;
  const code = grpcCodeOf(err);
  if (code === undefined || !isRecord(err)) return err;
  const metadata = err.metadata instanceof Metadata ? err.metadata : undefined;
  return new CsiError(method, code, String(err.details), { metadata, cause: err });
}

export type CsiErrorClass = "in-progress" | "reschedule" | "infeasible" | "final";

export interface ClassifyOptions {
  /**
   * The caller could let the scheduler choose another node: the driver has
   * VOLUME_ACCESSIBILITY_CONSTRAINTS and the claim has a selected node.
   */
  nodeSelected?: boolean;
}

export function classifyCsiError(err: unknown, options: ClassifyOptions = {}): CsiErrorClass {
  const code = grpcCodeOf(err);
  switch (code) {
    case undefined:
      // Failed before or outside the gRPC call: we cannot know whether an
      // earlier attempt is still running, so assume it might be.
      return "in-progress";
    case GrpcCode.CANCELLED:
    case GrpcCode.DEADLINE_EXCEEDED:
    case GrpcCode.UNAVAILABLE:
    case GrpcCode.ABORTED:
      return "in-progress";
    case GrpcCode.RESOURCE_EXHAUSTED:
      // CSI: "unable to provision in accessible_topology"; another node may do.
      return options.nodeSelected === true ? "reschedule" : "final";
    case GrpcCode.INVALID_ARGUMENT:
      return "infeasible";
    default:
      return "final";
  }
}

/**
 * True when the driver is certainly no longer working on the call, so its
 * outcome is known: a failure that will not turn into a success on its own.
 */
export function isFinalCsiError(err: unknown, options: ClassifyOptions = {}): boolean {
  return classifyCsiError(err, options) !== "in-progress";
}
