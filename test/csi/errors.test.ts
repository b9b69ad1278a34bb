import assert from "node:assert/strict";
import { test } from "node:test";
import { ApiException } from "@kubernetes/client-node";
import type { CsiErrorClass } from "../../shared/csi/errors.ts";
import {
  CsiError,
  classifyCsiError,
  GrpcCode,
  grpcCodeName,
  grpcCodeOf,
  hasGrpcCode,
  isFinalCsiError,
  toCsiError,
} from "../../shared/csi/errors.ts";
import { classifyError } from "../../shared/http/errors.ts";

/** What grpc-js hands a client callback. */
function serviceError(code: number, details = "driver says no") {
  return Object.assign(new Error(`${code} X: ${details}`), { code, details, metadata: {} });
}

// code -> [without a selected node, with one]
const table: [keyof typeof GrpcCode, CsiErrorClass, CsiErrorClass][] = [
  ["CANCELLED", "in-progress", "in-progress"],
  ["UNKNOWN", "final", "final"],
  ["INVALID_ARGUMENT", "infeasible", "infeasible"],
  ["DEADLINE_EXCEEDED", "in-progress", "in-progress"],
  ["NOT_FOUND", "final", "final"],
  ["ALREADY_EXISTS", "final", "final"],
  ["PERMISSION_DENIED", "final", "final"],
  ["RESOURCE_EXHAUSTED", "final", "reschedule"],
  ["FAILED_PRECONDITION", "final", "final"],
  ["ABORTED", "in-progress", "in-progress"],
  ["OUT_OF_RANGE", "final", "final"],
  ["UNIMPLEMENTED", "final", "final"],
  ["INTERNAL", "final", "final"],
  ["UNAVAILABLE", "in-progress", "in-progress"],
  ["DATA_LOSS", "final", "final"],
  ["UNAUTHENTICATED", "final", "final"],
];

for (const [name, plain, withNode] of table) {
  test(`${name}: ${plain} (node selected: ${withNode})`, () => {
    const code = GrpcCode[name];
    for (const err of [serviceError(code), new CsiError("/csi.v1.Controller/CreateVolume", code, "x")]) {
      assert.equal(classifyCsiError(err), plain);
      assert.equal(classifyCsiError(err, { nodeSelected: false }), plain);
      assert.equal(classifyCsiError(err, { nodeSelected: true }), withNode);
      assert.equal(isFinalCsiError(err), plain !== "in-progress");
    }
  });
}

test("errors that are not gRPC statuses may still be running: in-progress", () => {
  const notGrpc: unknown[] = [
    new Error("socket hang up"),
    Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" }),
    // A Kubernetes API error has a numeric code too, but no `details`.
    new ApiException(404, "Not Found", "{}", {}),
    { code: 99, details: "out of range" },
    "boom",
    undefined,
  ];
  for (const err of notGrpc) {
    assert.equal(grpcCodeOf(err), undefined);
    assert.equal(classifyCsiError(err, { nodeSelected: true }), "in-progress");
    assert.equal(isFinalCsiError(err), false);
  }
});

test("CsiError reads like upstream and is classified by the HTTP layer", () => {
  const err = new CsiError(
    "/csi.v1.Controller/DeleteVolume",
    GrpcCode.DEADLINE_EXCEEDED,
    "context deadline exceeded",
  );
  assert.equal(err.message, "rpc error: code = DeadlineExceeded desc = context deadline exceeded");
  assert.equal(err.codeName, "DeadlineExceeded");
  assert.equal(err.name, "CsiError");
  assert.ok(err instanceof Error);
  for (const [code, status] of [
    [GrpcCode.DEADLINE_EXCEEDED, 503],
    [GrpcCode.RESOURCE_EXHAUSTED, 503],
    [GrpcCode.ABORTED, 503],
    [GrpcCode.UNAVAILABLE, 503],
    [GrpcCode.NOT_FOUND, 500],
    [GrpcCode.INVALID_ARGUMENT, 500],
    [GrpcCode.INTERNAL, 500],
  ] as const) {
    assert.equal(classifyError(new CsiError("/m", code, "d")).status, status, grpcCodeName(code));
  }
});

test("toCsiError wraps grpc-js errors and leaves others alone", () => {
  const original = serviceError(GrpcCode.NOT_FOUND, "volume gone");
  const wrapped = toCsiError("/csi.v1.Controller/DeleteVolume", original);
  assert.ok(wrapped instanceof CsiError);
  assert.equal(wrapped.code, GrpcCode.NOT_FOUND);
  assert.equal(wrapped.details, "volume gone");
  assert.equal(wrapped.method, "/csi.v1.Controller/DeleteVolume");
  assert.equal(wrapped.cause, original);
  assert.equal(toCsiError("/m", wrapped), wrapped);
  const plain = new Error("no");
  assert.equal(toCsiError("/m", plain), plain);
  assert.equal(hasGrpcCode(wrapped, GrpcCode.NOT_FOUND), true);
  assert.equal(hasGrpcCode(plain, GrpcCode.NOT_FOUND), false);
});

test("grpcCodeName uses Go's spelling, Unknown for anything else", () => {
  assert.equal(grpcCodeName(0), "OK");
  assert.equal(grpcCodeName(1), "Canceled");
  assert.equal(grpcCodeName(8), "ResourceExhausted");
  assert.equal(grpcCodeName(16), "Unauthenticated");
  assert.equal(grpcCodeName(17), "Unknown");
  assert.equal(grpcCodeName(-1), "Unknown");
  assert.equal(grpcCodeName(undefined), "Unknown");
});
