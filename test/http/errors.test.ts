import assert from "node:assert/strict";
import { test } from "node:test";
import { ApiException } from "@kubernetes/client-node";
import {
  BadRequestError,
  classifyError,
  DEFAULT_RETRY_AFTER_SECONDS,
  MAX_RETRY_AFTER_SECONDS,
  RetryLaterError,
} from "../../shared/http/errors.ts";
import { ConflictRetriesExhaustedError } from "../../shared/kube/optimistic-update.ts";

function apiError(code: number, reason: string, headers: Record<string, string> = {}) {
  return new ApiException<unknown>(
    code,
    "Unknown API Status Code!",
    JSON.stringify({ kind: "Status", code, reason }),
    headers,
  );
}

function fetchFailed(code: string): TypeError {
  return new TypeError("fetch failed", { cause: Object.assign(new Error(code), { code }) });
}

function grpcError(code: number, details: string) {
  return Object.assign(new Error(`${code} ${details}`), { code, details, metadata: {} });
}

test("errors with a 4xx status are bad input, answered with their message", () => {
  const envelope = Object.assign(new Error("missing ce-type"), { name: "EnvelopeError", status: 400 });
  assert.deepEqual(classifyError(envelope), {
    class: "bad_request",
    status: 400,
    body: { error: "missing ce-type" },
  });
  const tooLarge = Object.assign(new Error("request entity too large"), {
    status: 413,
    type: "entity.too.large",
  });
  assert.equal(classifyError(tooLarge).status, 413);
  assert.equal(classifyError(new BadRequestError("nope", 422)).status, 422);
  assert.equal(classifyError(new BadRequestError("clamped", 503)).status, 400);
});

test("transient Kubernetes API trouble is 503 with Retry-After", () => {
  for (const [err, seconds] of [
    [apiError(503, "ServiceUnavailable", { "retry-after": "7" }), 7],
    [apiError(429, "TooManyRequests"), DEFAULT_RETRY_AFTER_SECONDS],
    [apiError(500, "InternalError"), DEFAULT_RETRY_AFTER_SECONDS],
    [apiError(504, "Timeout"), DEFAULT_RETRY_AFTER_SECONDS],
    [apiError(429, "TooManyRequests", { "retry-after": "3600" }), MAX_RETRY_AFTER_SECONDS],
    [fetchFailed("ECONNREFUSED"), DEFAULT_RETRY_AFTER_SECONDS],
    [fetchFailed("UND_ERR_SOCKET"), DEFAULT_RETRY_AFTER_SECONDS],
  ] as const) {
    const answer = classifyError(err);
    assert.equal(answer.class, "transient", String(err));
    assert.equal(answer.status, 503);
    assert.equal(answer.retryAfterSeconds, seconds);
  }
});

test("resourceVersion conflicts that outlived the retries are 503", () => {
  const exhausted = new ConflictRetriesExhaustedError(5, apiError(409, "Conflict"));
  assert.equal(classifyError(exhausted).status, 503);
  assert.equal(classifyError(apiError(409, "Conflict")).status, 503);
  // AlreadyExists is not a race the sender can win by retrying.
  assert.equal(classifyError(apiError(409, "AlreadyExists")).status, 500);
});

test("RetryLaterError is 503 with its own reason and seconds", () => {
  assert.deepEqual(classifyError(new RetryLaterError("claim not yet bound", 5)), {
    class: "transient",
    status: 503,
    body: { error: "claim not yet bound" },
    retryAfterSeconds: 5,
  });
  assert.equal(classifyError(new RetryLaterError("soon")).retryAfterSeconds, DEFAULT_RETRY_AFTER_SECONDS);
  assert.equal(classifyError(new RetryLaterError("fractions round up", 1.2)).retryAfterSeconds, 2);
});

test("transient CSI gRPC codes are 503, others 500", () => {
  for (const code of [4, 8, 10, 14])
    assert.equal(classifyError(grpcError(code, "busy")).status, 503, String(code));
  for (const code of [2, 3, 5, 9, 13])
    assert.equal(classifyError(grpcError(code, "no")).status, 500, String(code));
});

test("API errors with 4xx codes are our problem, not the sender's: 500", () => {
  for (const code of [400, 401, 403, 404, 422]) {
    const answer = classifyError(apiError(code, "Whatever"));
    assert.equal(answer.status, 500, String(code));
    assert.deepEqual(answer.body, { error: "internal error" });
  }
});

test("anything else is a bare 500", () => {
  for (const err of [
    new Error("secret detail"),
    "a string",
    undefined,
    null,
    { status: 503 },
    { status: "400" },
    42,
  ]) {
    const answer = classifyError(err);
    assert.equal(answer.status, 500);
    assert.deepEqual(answer.body, { error: "internal error" });
    assert.equal(answer.retryAfterSeconds, undefined);
  }
});
