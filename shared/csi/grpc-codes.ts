// gRPC status codes as numbers and by Go's names, with no gRPC library
// loaded: pure decisions (the resizer's) classify CSI failures with them.

/** gRPC status codes (google.golang.org/grpc/codes), by their canonical names. */
export const GrpcCode = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
} as const;

export type GrpcCodeNumber = (typeof GrpcCode)[keyof typeof GrpcCode];

// Go's codes.Code.String() spelling: what upstream puts in the
// grpc_status_code metric label and in "rpc error: code = ... desc = ...".
const CODE_NAMES = [
  "OK",
  "Canceled",
  "Unknown",
  "InvalidArgument",
  "DeadlineExceeded",
  "NotFound",
  "AlreadyExists",
  "PermissionDenied",
  "ResourceExhausted",
  "FailedPrecondition",
  "Aborted",
  "OutOfRange",
  "Unimplemented",
  "Internal",
  "Unavailable",
  "DataLoss",
  "Unauthenticated",
] as const;

export type GrpcCodeName = (typeof CODE_NAMES)[number];

/** "DeadlineExceeded" for 4; "Unknown" for anything that is not a gRPC code. */
export function grpcCodeName(code: number | undefined): GrpcCodeName {
  return (code !== undefined && CODE_NAMES[code]) || "Unknown";
}

/** The code Go's name stands for ("DeadlineExceeded" → 4), or undefined. */
export function grpcCodeByName(name: string | undefined): number | undefined {
  const n = (CODE_NAMES as readonly string[]).indexOf(name ?? "");
  return n < 0 ? undefined : n;
}
