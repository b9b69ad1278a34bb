// The sandbox API server calls admission webhooks the way kube-apiserver
// does: a real HTTPS webhook server (certificate from shared/tls, verified
// against the caBundle), stored Mutating/ValidatingWebhookConfigurations, and
// writes over the sandbox's REST API.
import assert from "node:assert/strict";
import type { IncomingMessage, ServerResponse } from "node:http";
import { createServer, type Server } from "node:https";
import type { AddressInfo } from "node:net";
import { after, before, beforeEach, describe, test } from "node:test";
import { generateCertificates } from "../../shared/tls/certificates.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";

type Review = Record<string, unknown> & {
  uid: string;
  operation: string;
  object: Record<string, unknown> | null;
  oldObject: Record<string, unknown> | null;
  dryRun: boolean;
  subResource?: string;
  name?: string;
  namespace?: string;
  userInfo: { username: string; groups?: string[] };
};
/** The response fields (uid is added), or `{raw}` for a whole body of the test's choosing. */
type Answer = Record<string, unknown>;
type Handler = (request: Review) => Answer | Promise<Answer>;

const certs = generateCertificates({
  service: "hooks",
  namespace: "webhooks",
  extraDnsNames: ["localhost", "127.0.0.1"],
});
const caBundle = Buffer.from(certs.caCert).toString("base64");

let sandbox: TestSandbox;
let hookServer: Server;
let hookBase: string;
const handlers = new Map<string, Handler>();
const seen: { path: string; request: Review }[] = [];

function patch(ops: object[]): Answer {
  return {
    allowed: true,
    patchType: "JSONPatch",
    patch: Buffer.from(JSON.stringify(ops)).toString("base64"),
  };
}

async function serveHook(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const review = JSON.parse(Buffer.concat(chunks).toString("utf8")) as { request: Review };
  const path = (req.url ?? "/").split("?")[0] ?? "/";
  seen.push({ path, request: review.request });
  const handler = handlers.get(path) ?? (() => ({ allowed: true }));
  const answer = await handler(review.request);
  const body =
    "raw" in answer
      ? answer.raw
      : {
          apiVersion: "admission.k8s.io/v1",
          kind: "AdmissionReview",
          response: { uid: review.request.uid, ...answer },
        };
  res.writeHead(200, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

interface HookOptions {
  path: string;
  operations?: string[];
  resources?: string[];
  failurePolicy?: "Fail" | "Ignore";
  sideEffects?: string;
  timeoutSeconds?: number;
  namespaceSelector?: object;
  objectSelector?: object;
  clientConfig?: object;
}

function webhook(name: string, o: HookOptions): Record<string, unknown> {
  return {
    name,
    clientConfig: o.clientConfig ?? { url: `${hookBase}${o.path}`, caBundle },
    rules: [
      {
        operations: o.operations ?? ["CREATE"],
        apiGroups: [""],
        apiVersions: ["v1"],
        resources: o.resources ?? ["persistentvolumeclaims"],
      },
    ],
    sideEffects: o.sideEffects ?? "None",
    admissionReviewVersions: ["v1"],
    ...(o.failurePolicy ? { failurePolicy: o.failurePolicy } : {}),
    ...(o.timeoutSeconds ? { timeoutSeconds: o.timeoutSeconds } : {}),
    ...(o.namespaceSelector ? { namespaceSelector: o.namespaceSelector } : {}),
    ...(o.objectSelector ? { objectSelector: o.objectSelector } : {}),
  };
}

function configuration(kind: "Mutating" | "Validating", name: string, webhooks: object[]): object {
  return {
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: `${kind}WebhookConfiguration`,
    metadata: { name },
    webhooks,
  };
}

interface Answered {
  status: number;
  body: Record<string, unknown>;
  headers: Headers;
}

async function api(
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Answered> {
  const res = await fetch(`${sandbox.url}${path}`, {
    method,
    headers: { "content-type": "application/json", ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  return {
    status: res.status,
    body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
    headers: res.headers,
  };
}

function claim(
  name: string,
  labels: Record<string, string> = {},
  extra: Record<string, unknown> = {},
): object {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, labels },
    spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } }, ...extra },
  };
}

const claims = "/api/v1/namespaces/default/persistentvolumeclaims";
const labelsOf = (o: Record<string, unknown>): Record<string, string> =>
  ((o.metadata as { labels?: Record<string, string> }).labels ?? {}) as Record<string, string>;

before(async () => {
  sandbox = await startTestSandbox();
  hookServer = createServer({ cert: certs.cert, key: certs.key }, (req, res) => {
    serveHook(req, res).catch(() => res.destroy());
  });
  await new Promise<void>((resolve) => hookServer.listen(0, "127.0.0.1", resolve));
  hookBase = `https://127.0.0.1:${(hookServer.address() as AddressInfo).port}`;
});

after(async () => {
  hookServer.closeAllConnections();
  await new Promise<void>((resolve) => hookServer.close(() => resolve()));
  await sandbox.close();
});

beforeEach(async () => {
  await sandbox.admin.reset();
  handlers.clear();
  seen.length = 0;
});

describe("mutating webhooks", () => {
  test("patches are applied in configuration-name order, then the registry validates, then validating webhooks see the result", async () => {
    handlers.set("/first", () =>
      patch([
        { op: "add", path: "/metadata/labels/first", value: "yes" },
        // The claim arrives without accessModes: the registry would reject it without this patch.
        { op: "add", path: "/spec/accessModes", value: ["ReadWriteOnce"] },
      ]),
    );
    handlers.set("/second", (request) =>
      patch([
        {
          op: "add",
          path: "/metadata/labels/second-saw-first",
          value: labelsOf(request.object!).first ?? "no",
        },
      ]),
    );
    await sandbox.admin.seed([
      configuration("Mutating", "b-config", [webhook("second.example.com", { path: "/second" })]),
      configuration("Mutating", "a-config", [webhook("first.example.com", { path: "/first" })]),
      configuration("Validating", "check", [webhook("check.example.com", { path: "/check" })]),
    ]);
    const created = await api("POST", claims, {
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: { name: "mutated", labels: {} },
      spec: { resources: { requests: { storage: "1Gi" } } },
    });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.deepEqual(labelsOf(created.body), { first: "yes", "second-saw-first": "yes" });
    const stored = await api("GET", `${claims}/mutated`);
    assert.deepEqual(labelsOf(stored.body), { first: "yes", "second-saw-first": "yes" });
    assert.deepEqual(
      seen.map((s) => s.path),
      ["/first", "/second", "/check"],
    );
    const first = seen[0]!.request;
    assert.equal(first.operation, "CREATE");
    assert.deepEqual(first.kind, { group: "", version: "v1", kind: "PersistentVolumeClaim" });
    assert.deepEqual(first.resource, { group: "", version: "v1", resource: "persistentvolumeclaims" });
    assert.equal(first.namespace, "default");
    assert.equal(first.name, "mutated");
    assert.equal(first.oldObject, null);
    assert.equal(first.dryRun, false);
    assert.equal(first.userInfo.username, "sandbox");
    assert.deepEqual(first.options, { apiVersion: "meta.k8s.io/v1", kind: "CreateOptions" });
    // The validating webhook sees the object as it will be stored: patched, with uid and status.
    const validated = seen[2]!.request.object!;
    assert.deepEqual(labelsOf(validated), { first: "yes", "second-saw-first": "yes" });
    assert.ok((validated.metadata as { uid?: string }).uid);
    assert.deepEqual(validated.status, { phase: "Pending" });
  });

  test("a patch that makes the object invalid is caught by the registry's validation after mutation", async () => {
    handlers.set("/break", () => patch([{ op: "remove", path: "/spec/accessModes" }]));
    await sandbox.admin.seed([
      configuration("Mutating", "m", [webhook("break.example.com", { path: "/break" })]),
    ]);
    const res = await api("POST", claims, claim("broken"));
    assert.equal(res.status, 422);
    assert.match(String(res.body.message), /spec\.accessModes: Required value/);
    assert.equal((await api("GET", `${claims}/broken`)).status, 404);
  });

  test("a patch that does not apply fails the request with 500", async () => {
    handlers.set("/bad", () => patch([{ op: "replace", path: "/spec/nothing/here", value: 1 }]));
    await sandbox.admin.seed([
      configuration("Mutating", "m", [webhook("bad.example.com", { path: "/bad" })]),
    ]);
    const res = await api("POST", claims, claim("c"));
    assert.equal(res.status, 500);
    assert.match(
      String(res.body.message),
      /admission webhook "bad\.example\.com" returned a patch that does not apply/,
    );
  });

  test("an update to /status goes to webhooks for persistentvolumeclaims/status only, with subResource status", async () => {
    assert.equal((await api("POST", claims, claim("s"))).status, 201);
    await sandbox.admin.seed([
      configuration("Mutating", "status", [
        webhook("status.example.com", {
          path: "/status",
          operations: ["UPDATE"],
          resources: ["persistentvolumeclaims/status"],
        }),
        webhook("main.example.com", {
          path: "/main",
          operations: ["UPDATE"],
          resources: ["persistentvolumeclaims"],
        }),
      ]),
    ]);
    handlers.set("/status", () => patch([{ op: "add", path: "/status/phase", value: "Lost" }]));
    const current = (await api("GET", `${claims}/s`)).body;
    const res = await api("PUT", `${claims}/s/status`, { ...current, status: { phase: "Bound" } });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(res.body.status, { phase: "Lost" });
    assert.deepEqual(
      seen.map((s) => [s.path, s.request.subResource, s.request.operation]),
      [["/status", "status", "UPDATE"]],
    );
    assert.deepEqual((seen[0]!.request.oldObject as { status: unknown }).status, { phase: "Pending" });

    seen.length = 0;
    const labelled = await api(
      "PATCH",
      `${claims}/s`,
      { metadata: { labels: { a: "b" } } },
      {
        "content-type": "application/merge-patch+json",
      },
    );
    assert.equal(labelled.status, 200);
    assert.deepEqual(
      seen.map((s) => [s.path, s.request.subResource ?? "", s.request.operation]),
      [["/main", "", "UPDATE"]],
    );
  });
});

describe("validating webhooks", () => {
  test("a denial becomes a Status with the webhook's code, reason and kube-apiserver's message, and nothing is stored", async () => {
    handlers.set("/deny", () => ({
      allowed: false,
      status: { code: 403, reason: "Forbidden", message: "claims named like that are not allowed" },
    }));
    await sandbox.admin.seed([
      configuration("Validating", "v", [webhook("deny.example.com", { path: "/deny" })]),
    ]);
    const res = await api("POST", claims, claim("nope"));
    assert.equal(res.status, 403);
    assert.equal(res.body.kind, "Status");
    assert.equal(res.body.status, "Failure");
    assert.equal(res.body.reason, "Forbidden");
    assert.equal(res.body.code, 403);
    assert.equal(
      res.body.message,
      'admission webhook "deny.example.com" denied the request: claims named like that are not allowed',
    );
    assert.equal((await api("GET", `${claims}/nope`)).status, 404);
  });

  test("a denial without a status is a 400 'without explanation'", async () => {
    handlers.set("/deny", () => ({ allowed: false }));
    await sandbox.admin.seed([
      configuration("Validating", "v", [webhook("quiet.example.com", { path: "/deny" })]),
    ]);
    const res = await api("POST", claims, claim("nope"));
    assert.equal(res.status, 400);
    assert.equal(
      res.body.message,
      'admission webhook "quiet.example.com" denied the request without explanation',
    );
  });

  test("DELETE is admitted with the stored object as oldObject; a denial keeps the object", async () => {
    assert.equal((await api("POST", claims, claim("keep"))).status, 201);
    handlers.set("/delete", () => ({ allowed: false, status: { code: 422, message: "still in use" } }));
    await sandbox.admin.seed([
      configuration("Validating", "v", [
        webhook("delete.example.com", { path: "/delete", operations: ["DELETE"] }),
      ]),
    ]);
    const res = await api("DELETE", `${claims}/keep`);
    assert.equal(res.status, 422);
    assert.equal(res.body.message, 'admission webhook "delete.example.com" denied the request: still in use');
    assert.equal((await api("GET", `${claims}/keep`)).status, 200);
    const request = seen[0]!.request;
    assert.equal(request.operation, "DELETE");
    assert.equal(request.object, null);
    assert.equal((request.oldObject!.metadata as { name: string }).name, "keep");
    assert.equal((request.options as { kind: string }).kind, "DeleteOptions");
  });

  test("warnings come back as Warning headers; the user is the one a registered token names", async () => {
    handlers.set("/warn", () => ({ allowed: true, warnings: ['storage class "slow" is deprecated'] }));
    await sandbox.admin.seed([
      configuration("Validating", "v", [webhook("warn.example.com", { path: "/warn" })]),
    ]);
    const tokens = await api("PUT", "/_sandbox/tokens", { "t-123": { username: "alice", groups: ["dev"] } });
    assert.equal(tokens.status, 200);
    const res = await api("POST", claims, claim("w"), { authorization: "Bearer t-123" });
    assert.equal(res.status, 201);
    assert.equal(res.headers.get("warning"), '299 - "storage class \\"slow\\" is deprecated"');
    assert.deepEqual(seen[0]!.request.userInfo, {
      username: "alice",
      groups: ["dev", "system:authenticated"],
    });
  });
});

describe("failures, timeouts and TLS", () => {
  test("a webhook slower than timeoutSeconds fails the request under failurePolicy Fail", async () => {
    handlers.set("/slow", () => new Promise((resolve) => setTimeout(() => resolve({ allowed: true }), 2500)));
    await sandbox.admin.seed([
      configuration("Validating", "v", [webhook("slow.example.com", { path: "/slow", timeoutSeconds: 1 })]),
    ]);
    const started = Date.now();
    const res = await api("POST", claims, claim("late"));
    const took = Date.now() - started;
    assert.equal(res.status, 500);
    assert.equal(res.body.reason, "InternalError");
    assert.match(
      String(res.body.message),
      /^Internal error occurred: failed calling webhook "slow\.example\.com": failed to call webhook: Post "https:\/\/127\.0\.0\.1:\d+\/slow\?timeout=1s": context deadline exceeded/,
    );
    assert.ok(took >= 900 && took < 2400, `answered after ${took} ms`);
    assert.equal((await api("GET", `${claims}/late`)).status, 404);
  });

  test("the same timeout under failurePolicy Ignore lets the write through", async () => {
    handlers.set(
      "/slow",
      () => new Promise((resolve) => setTimeout(() => resolve({ allowed: false }), 2500)),
    );
    await sandbox.admin.seed([
      configuration("Mutating", "m", [
        webhook("slow.example.com", { path: "/slow", timeoutSeconds: 1, failurePolicy: "Ignore" }),
      ]),
    ]);
    const res = await api("POST", claims, claim("through"));
    assert.equal(res.status, 201);
    const admission = await api("GET", "/_sandbox/admission");
    const failures = admission.body.ignoredFailures as { webhook: string; error: string }[];
    assert.equal(failures.length, 1);
    assert.equal(failures[0]!.webhook, "slow.example.com");
    assert.match(failures[0]!.error, /context deadline exceeded/);
  });

  test("a caBundle that did not sign the server's certificate is a failed call, not an allowed one", async () => {
    const other = generateCertificates({
      service: "hooks",
      namespace: "webhooks",
      extraDnsNames: ["127.0.0.1"],
    });
    await sandbox.admin.seed([
      configuration("Validating", "v", [
        webhook("tls.example.com", {
          path: "/any",
          clientConfig: { url: `${hookBase}/any`, caBundle: Buffer.from(other.caCert).toString("base64") },
        }),
      ]),
    ]);
    const res = await api("POST", claims, claim("untrusted"));
    assert.equal(res.status, 500);
    assert.match(
      String(res.body.message),
      /failed calling webhook "tls\.example\.com": .*tls: failed to verify certificate/,
    );
    assert.equal(seen.length, 0, "the webhook never saw the request");
  });

  test("an answer with the wrong uid, or a patch from a validating webhook, is an invalid response", async () => {
    handlers.set("/uid", () => ({
      raw: {
        apiVersion: "admission.k8s.io/v1",
        kind: "AdmissionReview",
        response: { uid: "x", allowed: true },
      },
    }));
    await sandbox.admin.seed([
      configuration("Validating", "v", [webhook("uid.example.com", { path: "/uid" })]),
    ]);
    const res = await api("POST", claims, claim("u"));
    assert.equal(res.status, 500);
    assert.match(
      String(res.body.message),
      /received invalid webhook response: expected response\.uid="[0-9a-f-]{36}", got "x"/,
    );

    await sandbox.admin.reset();
    handlers.set("/patching", () => patch([{ op: "add", path: "/metadata/labels/x", value: "y" }]));
    await sandbox.admin.seed([
      configuration("Validating", "v", [webhook("patching.example.com", { path: "/patching" })]),
    ]);
    const patched = await api("POST", claims, claim("p"));
    assert.equal(patched.status, 500);
    assert.match(String(patched.body.message), /validating webhook may not return response\.patchType/);
  });

  test("clientConfig.service is resolved through the sandbox service map and verified as <name>.<namespace>.svc", async () => {
    handlers.set("/svc", () => patch([{ op: "add", path: "/metadata/labels/via", value: "service" }]));
    const service = { namespace: "webhooks", name: "hooks", path: "/svc", port: 8443 };
    await sandbox.admin.seed([
      configuration("Mutating", "m", [
        webhook("svc.example.com", { path: "/svc", clientConfig: { service, caBundle } }),
      ]),
    ]);
    const unmapped = await api("POST", claims, claim("a"));
    assert.equal(unmapped.status, 500);
    assert.match(
      String(unmapped.body.message),
      /Post "https:\/\/hooks\.webhooks\.svc:8443\/svc\?timeout=10s": service "webhooks\/hooks" is not in the sandbox service map/,
    );

    const mapped = await api("PUT", "/_sandbox/services", { "webhooks/hooks:8443": hookBase });
    assert.deepEqual(mapped.body, { "webhooks/hooks:8443": hookBase });
    const res = await api("POST", claims, claim("b"));
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assert.deepEqual(labelsOf(res.body), { via: "service" });

    // A certificate without the Service's name fails, as it would in a cluster.
    await sandbox.admin.reset();
    const localOnly = generateCertificates({
      service: "elsewhere",
      namespace: "x",
      extraDnsNames: ["127.0.0.1"],
    });
    const bare = createServer({ cert: localOnly.cert, key: localOnly.key }, (req, res) => {
      serveHook(req, res).catch(() => res.destroy());
    });
    await new Promise<void>((resolve) => bare.listen(0, "127.0.0.1", resolve));
    try {
      const bareUrl = `https://127.0.0.1:${(bare.address() as AddressInfo).port}`;
      await api("PUT", "/_sandbox/services", { "webhooks/hooks": bareUrl });
      await sandbox.admin.seed([
        configuration("Mutating", "m", [
          webhook("svc.example.com", {
            path: "/svc",
            clientConfig: { service, caBundle: Buffer.from(localOnly.caCert).toString("base64") },
          }),
        ]),
      ]);
      const wrongName = await api("POST", claims, claim("c"));
      assert.equal(wrongName.status, 500);
      assert.match(
        String(wrongName.body.message),
        /tls: failed to verify certificate: .*hooks\.webhooks\.svc/,
      );
    } finally {
      bare.closeAllConnections();
      bare.close();
    }
  });

  test("the service map hook rejects malformed entries", async () => {
    assert.equal((await api("PUT", "/_sandbox/services", { "no-slash": "https://127.0.0.1:1" })).status, 400);
    assert.equal((await api("PUT", "/_sandbox/services", { "a/b": "http://127.0.0.1:1" })).status, 400);
  });
});

describe("selectors", () => {
  test("namespaceSelector matches on the labels of the object's namespace", async () => {
    await sandbox.admin.seed([
      { apiVersion: "v1", kind: "Namespace", metadata: { name: "watched", labels: { admission: "on" } } },
      { apiVersion: "v1", kind: "Namespace", metadata: { name: "ignored" } },
      configuration("Validating", "v", [
        webhook("ns.example.com", { path: "/ns", namespaceSelector: { matchLabels: { admission: "on" } } }),
      ]),
    ]);
    assert.equal(
      (await api("POST", "/api/v1/namespaces/ignored/persistentvolumeclaims", claim("a"))).status,
      201,
    );
    assert.equal(seen.length, 0);
    assert.equal(
      (await api("POST", "/api/v1/namespaces/watched/persistentvolumeclaims", claim("a"))).status,
      201,
    );
    assert.deepEqual(
      seen.map((s) => s.request.namespace),
      ["watched"],
    );
  });

  test("objectSelector matches the new or the old object's labels; expressions work too", async () => {
    await sandbox.admin.seed([
      configuration("Validating", "v", [
        webhook("obj.example.com", {
          path: "/obj",
          operations: ["CREATE", "UPDATE"],
          objectSelector: {
            matchLabels: { team: "storage" },
            matchExpressions: [{ key: "skip", operator: "DoesNotExist" }],
          },
        }),
      ]),
    ]);
    assert.equal((await api("POST", claims, claim("other", { team: "web" }))).status, 201);
    assert.equal((await api("POST", claims, claim("skipped", { team: "storage", skip: "1" }))).status, 201);
    assert.equal(seen.length, 0);
    assert.equal((await api("POST", claims, claim("ours", { team: "storage" }))).status, 201);
    assert.equal(seen.length, 1);
    // Removing the label: the old object still matches, so the webhook hears about it.
    const removed = await api(
      "PATCH",
      `${claims}/ours`,
      { metadata: { labels: { team: null } } },
      {
        "content-type": "application/merge-patch+json",
      },
    );
    assert.equal(removed.status, 200);
    assert.deepEqual(
      seen.map((s) => s.request.operation),
      ["CREATE", "UPDATE"],
    );
  });

  test("rules: cluster-scoped resources with scope Cluster, and operations not listed are not sent", async () => {
    await sandbox.admin.seed([
      configuration("Validating", "v", [
        {
          ...webhook("pv.example.com", { path: "/pv", resources: ["persistentvolumes"] }),
          rules: [
            {
              operations: ["CREATE"],
              apiGroups: [""],
              apiVersions: ["v1"],
              resources: ["persistentvolumes"],
              scope: "Cluster",
            },
          ],
        },
        {
          ...webhook("ns-scoped.example.com", { path: "/never" }),
          rules: [
            {
              operations: ["*"],
              apiGroups: ["*"],
              apiVersions: ["*"],
              resources: ["persistentvolumes"],
              scope: "Namespaced",
            },
          ],
        },
      ]),
    ]);
    const pv = {
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: { name: "pv1" },
      spec: { capacity: { storage: "1Gi" }, accessModes: ["ReadWriteOnce"], hostPath: { path: "/tmp/pv1" } },
    };
    assert.equal((await api("POST", "/api/v1/persistentvolumes", pv)).status, 201);
    assert.equal((await api("DELETE", "/api/v1/persistentvolumes/pv1")).status, 200);
    assert.deepEqual(
      seen.map((s) => [s.path, s.request.operation, s.request.namespace ?? ""]),
      [["/pv", "CREATE", ""]],
    );
  });
});

describe("dry run and sideEffects", () => {
  test("webhooks with sideEffects None or NoneOnDryRun are called with dryRun true; nothing is stored", async () => {
    handlers.set("/m", () => patch([{ op: "add", path: "/metadata/labels/m", value: "1" }]));
    await sandbox.admin.seed([
      configuration("Mutating", "m", [webhook("none.example.com", { path: "/m", sideEffects: "None" })]),
      configuration("Validating", "v", [
        webhook("nodry.example.com", { path: "/v", sideEffects: "NoneOnDryRun" }),
      ]),
    ]);
    const res = await api("POST", `${claims}?dryRun=All`, claim("dry"));
    assert.equal(res.status, 201);
    assert.deepEqual(labelsOf(res.body), { m: "1" });
    assert.deepEqual(
      seen.map((s) => [s.path, s.request.dryRun, (s.request.options as { dryRun?: string[] }).dryRun]),
      [
        ["/m", true, ["All"]],
        ["/v", true, ["All"]],
      ],
    );
    assert.equal((await api("GET", `${claims}/dry`)).status, 404);
  });

  test("a webhook with side effects fails a dry-run request with 400 and is not called", async () => {
    await sandbox.admin.seed([
      configuration("Validating", "v", [webhook("effects.example.com", { path: "/v", sideEffects: "Some" })]),
    ]);
    const dry = await api("POST", `${claims}?dryRun=All`, claim("dry"));
    assert.equal(dry.status, 400);
    assert.equal(dry.body.message, 'admission webhook "effects.example.com" does not support dry run');
    assert.equal(seen.length, 0);
    // Without dryRun it is called as usual.
    assert.equal((await api("POST", claims, claim("wet"))).status, 201);
    assert.equal(seen.length, 1);
  });
});

describe("webhook configurations themselves", () => {
  test("are never admitted, so a failing webhook can always be removed", async () => {
    await sandbox.admin.seed([
      configuration("Validating", "v", [
        {
          ...webhook("everything.example.com", { path: "/deny-all" }),
          rules: [{ operations: ["*"], apiGroups: ["*"], apiVersions: ["*"], resources: ["*/*"] }],
        },
      ]),
    ]);
    handlers.set("/deny-all", () => ({ allowed: false }));
    assert.equal((await api("POST", claims, claim("x"))).status, 400);
    const removed = await api(
      "DELETE",
      "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/v",
    );
    assert.equal(removed.status, 200);
    assert.equal((await api("POST", claims, claim("x"))).status, 201);
  });
});

describe("TokenReview", () => {
  const review = (spec: object) => ({ apiVersion: "authentication.k8s.io/v1", kind: "TokenReview", spec });
  const path = "/apis/authentication.k8s.io/v1/tokenreviews";

  test("authenticates registered tokens and nothing else", async () => {
    await api("PUT", "/_sandbox/tokens", {
      "sa-token": {
        username: "system:serviceaccount:ksf:forwarder",
        uid: "u-1",
        groups: ["system:serviceaccounts"],
      },
      "aud-token": { username: "bob", audiences: ["functions"] },
    });
    const ok = await api("POST", path, review({ token: "sa-token" }));
    assert.equal(ok.status, 201);
    assert.deepEqual(ok.body.status, {
      authenticated: true,
      user: {
        username: "system:serviceaccount:ksf:forwarder",
        uid: "u-1",
        groups: ["system:serviceaccounts", "system:authenticated"],
      },
      audiences: ["https://kubernetes.default.svc.cluster.local"],
    });
    const unknown = await api("POST", path, review({ token: "nope" }));
    assert.equal(unknown.status, 201);
    assert.deepEqual(unknown.body.status, { user: {}, error: "invalid bearer token" });
    const wrongAudience = await api("POST", path, review({ token: "aud-token", audiences: ["other"] }));
    assert.equal((wrongAudience.body.status as { authenticated?: boolean }).authenticated, undefined);
    const rightAudience = await api("POST", path, review({ token: "aud-token", audiences: ["functions"] }));
    assert.deepEqual((rightAudience.body.status as { audiences: string[] }).audiences, ["functions"]);
    assert.equal((await api("POST", path, review({ token: "" }))).status, 400);
    assert.deepEqual((await api("GET", "/_sandbox/tokens")).body, {
      usernames: ["system:serviceaccount:ksf:forwarder", "bob"],
    });
    assert.equal((await api("GET", path)).status, 405);
  });
});
