import assert from "node:assert/strict";
import { test } from "node:test";
import { ApiException } from "@kubernetes/client-node";
import {
  apiStatusOf,
  isAlreadyExists,
  isConflict,
  isNamespaceNotFound,
  isNotFound,
  isTransient,
  lostToConcurrentWriter,
  networkErrorCodeOf,
  retryAfterSeconds,
  statusCodeOf,
} from "../../shared/kube/api-errors.ts";

function status(code: number, reason: string, extra: Record<string, unknown> = {}) {
  return {
    kind: "Status",
    apiVersion: "v1",
    status: "Failure",
    message: `${reason}!`,
    reason,
    code,
    ...extra,
  };
}

// client-node passes the raw response text as body for non-2xx answers.
function apiError(code: number, body: unknown, headers: Record<string, string> = {}) {
  return new ApiException<unknown>(code, "Unknown API Status Code!", body, headers);
}

function fetchFailed(cause: unknown): TypeError {
  return new TypeError("fetch failed", { cause });
}

function sysError(code: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`connect ${code}`), { code });
}

test("statusCodeOf reads ApiException codes and ignores string error codes", () => {
  assert.equal(statusCodeOf(apiError(404, JSON.stringify(status(404, "NotFound")))), 404);
  assert.equal(statusCodeOf(apiError(401, undefined)), 401);
  assert.equal(statusCodeOf({ statusCode: 503 }), 503);
  assert.equal(statusCodeOf({ body: status(410, "Expired") }), 410);
  assert.equal(statusCodeOf(sysError("ECONNREFUSED")), undefined);
  assert.equal(statusCodeOf(fetchFailed(sysError("ECONNRESET"))), undefined);
  assert.equal(statusCodeOf(undefined), undefined);
  assert.equal(statusCodeOf("boom"), undefined);
});

test("isNotFound", () => {
  assert.equal(isNotFound(apiError(404, JSON.stringify(status(404, "NotFound")))), true);
  assert.equal(isNotFound(apiError(409, JSON.stringify(status(409, "Conflict")))), false);
});

test("409 Conflict and 409 AlreadyExists are told apart, body as string or object", () => {
  for (const wrap of [JSON.stringify, (v: unknown) => v]) {
    const conflict = apiError(409, wrap(status(409, "Conflict")));
    const exists = apiError(409, wrap(status(409, "AlreadyExists")));
    assert.equal(isConflict(conflict), true);
    assert.equal(isAlreadyExists(conflict), false);
    assert.equal(isConflict(exists), false);
    assert.equal(isAlreadyExists(exists), true);
  }
});

test("a 409 with an unreadable body is a conflict, never AlreadyExists", () => {
  for (const body of [undefined, "", "<html>oops</html>", "{"]) {
    assert.equal(isConflict(apiError(409, body)), true);
    assert.equal(isAlreadyExists(apiError(409, body)), false);
  }
  assert.equal(isConflict(apiError(500, undefined)), false);
});

test("apiStatusOf parses string and object bodies", () => {
  const s = status(429, "TooManyRequests", { details: { retryAfterSeconds: 3 } });
  assert.deepEqual(apiStatusOf(apiError(429, JSON.stringify(s))), {
    code: 429,
    reason: "TooManyRequests",
    message: "TooManyRequests!",
    details: { retryAfterSeconds: 3 },
  });
  assert.equal(apiStatusOf(apiError(500, "not json")), undefined);
});

test("isTransient: retryable HTTP statuses", () => {
  for (const code of [429, 500, 502, 503, 504])
    assert.equal(isTransient(apiError(code, undefined)), true, `${code}`);
  for (const code of [400, 401, 403, 404, 409, 410, 422]) {
    assert.equal(isTransient(apiError(code, undefined)), false, `${code}`);
  }
});

test("isTransient: connection failures, wrapped the way undici fetch wraps them", () => {
  for (const code of [
    "ECONNREFUSED",
    "ECONNRESET",
    "ETIMEDOUT",
    "UND_ERR_CONNECT_TIMEOUT",
    "UND_ERR_SOCKET",
  ]) {
    assert.equal(isTransient(fetchFailed(sysError(code))), true, code);
    assert.equal(isTransient(sysError(code)), true, code);
  }
  // Happy eyeballs: all addresses refused.
  const aggregate = new AggregateError(
    [sysError("ECONNREFUSED"), sysError("ECONNREFUSED")],
    "connect failed",
  );
  assert.equal(isTransient(fetchFailed(aggregate)), true);
  assert.equal(isTransient(new DOMException("timed out", "TimeoutError")), true);
  assert.equal(networkErrorCodeOf(fetchFailed(sysError("ECONNRESET"))), "ECONNRESET");
});

test("isTransient: configuration and programming errors are not", () => {
  assert.equal(isTransient(fetchFailed(sysError("ENOTFOUND"))), false);
  assert.equal(isTransient(fetchFailed(sysError("DEPTH_ZERO_SELF_SIGNED_CERT"))), false);
  assert.equal(isTransient(new TypeError("x is not a function")), false);
  assert.equal(isTransient(undefined), false);
});

test("retryAfterSeconds: header (seconds or date) then Status details", () => {
  assert.equal(retryAfterSeconds(apiError(429, undefined, { "retry-after": "7" })), 7);
  const now = new Date("2025-01-01T00:00:00Z");
  assert.equal(
    retryAfterSeconds(apiError(503, undefined, { "retry-after": "Wed, 01 Jan 2025 00:00:30 GMT" }), now),
    30,
  );
  const body = JSON.stringify(status(429, "TooManyRequests", { details: { retryAfterSeconds: 2 } }));
  assert.equal(retryAfterSeconds(apiError(429, body)), 2);
  assert.equal(retryAfterSeconds(apiError(429, body, { "retry-after": "5" })), 5);
  assert.equal(retryAfterSeconds(apiError(503, undefined)), undefined);
  assert.equal(retryAfterSeconds(fetchFailed(sysError("ECONNREFUSED"))), undefined);
});

// The same classifications against what client-node really throws over real HTTP.
test("classifies real client-node failures: HTTP Status answers, refused and reset connections", async (t) => {
  const { createServer } = await import("node:http");
  const { createServer: createTcpServer } = await import("node:net");
  const { CoreV1Api, KubeConfig } = await import("@kubernetes/client-node");

  const listen = (server: import("node:net").Server) =>
    new Promise<number>((resolve) => {
      server.listen(0, "127.0.0.1", () => resolve((server.address() as import("node:net").AddressInfo).port));
    });
  const clientFor = (port: number) => {
    const kc = new KubeConfig();
    // client-node only allows plain http together with skipTLSVerify.
    kc.loadFromClusterAndUser(
      { name: "c", server: `http://127.0.0.1:${port}`, skipTLSVerify: true },
      { name: "u" },
    );
    return kc.makeApiClient(CoreV1Api);
  };
  const read = (port: number) =>
    clientFor(port).readNamespacedPersistentVolumeClaim({ name: "x", namespace: "ns" });

  let next: [number, unknown, Record<string, string>] = [409, status(409, "Conflict"), {}];
  const http = createServer((_req, res) => {
    const [code, body, headers] = next;
    res.writeHead(code, { "content-type": "application/json", ...headers });
    res.end(JSON.stringify(body));
  });
  const httpPort = await listen(http);
  t.after(() => http.close());

  const caught = async (port: number) => {
    try {
      await read(port);
    } catch (err) {
      return err;
    }
    assert.fail("expected the read to fail");
  };

  next = [409, status(409, "Conflict"), {}];
  const conflict = await caught(httpPort);
  assert.equal(statusCodeOf(conflict), 409);
  assert.equal(isConflict(conflict), true);
  assert.equal(isAlreadyExists(conflict), false);

  next = [409, status(409, "AlreadyExists"), {}];
  assert.equal(isAlreadyExists(await caught(httpPort)), true);

  next = [404, status(404, "NotFound"), {}];
  assert.equal(isNotFound(await caught(httpPort)), true);

  next = [429, status(429, "TooManyRequests", { details: { retryAfterSeconds: 1 } }), { "Retry-After": "4" }];
  const throttled = await caught(httpPort);
  assert.equal(isTransient(throttled), true);
  assert.equal(retryAfterSeconds(throttled), 4);

  // A port nobody listens on: connection refused.
  const closed = createTcpServer();
  const closedPort = await listen(closed);
  await new Promise<void>((resolve) => closed.close(() => resolve()));
  const refused = await caught(closedPort);
  assert.equal(statusCodeOf(refused), undefined);
  assert.equal(isTransient(refused), true, String(networkErrorCodeOf(refused)));

  // A server that drops every connection without answering.
  const rude = createTcpServer((socket) => socket.destroy());
  const rudePort = await listen(rude);
  t.after(() => rude.close());
  const reset = await caught(rudePort);
  assert.equal(isTransient(reset), true, String(networkErrorCodeOf(reset)));
});

test("a 404 for a missing namespace is no lost race; a 404 for the object itself and a 409 Conflict are", () => {
  const missingNamespace = apiError(
    404,
    JSON.stringify(status(404, "NotFound", { details: { name: "gone", kind: "namespaces" } })),
  );
  const objectGone = apiError(
    404,
    JSON.stringify(status(404, "NotFound", { details: { name: "pv-1", kind: "persistentvolumes" } })),
  );
  assert.equal(isNamespaceNotFound(missingNamespace), true);
  assert.equal(lostToConcurrentWriter(missingNamespace), false);
  assert.equal(isNamespaceNotFound(objectGone), false);
  assert.equal(lostToConcurrentWriter(objectGone), true);
  assert.equal(lostToConcurrentWriter(apiError(404, "")), true, "a bare 404 still counts as the object gone");
  assert.equal(lostToConcurrentWriter(apiError(409, JSON.stringify(status(409, "Conflict")))), true);
});
