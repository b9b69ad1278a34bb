import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import { IncomingMessage } from "node:http";
import { Socket } from "node:net";
import { test } from "node:test";
import { createLogger, isSecretKey, REDACTED, requestLogger, scrub } from "../../shared/log.ts";
import {
  counter,
  createMetricsRegistry,
  gauge,
  histogram,
  outcomeOfStatus,
  processMetrics,
  requestMetrics,
} from "../../shared/metrics.ts";
import { captureLogs } from "./echo-function.ts";

test("the logger writes JSON lines with level names, function and time", () => {
  const logs = captureLogs();
  const log = createLogger({ name: "binder", level: "info", destination: logs.destination });
  log.info({ pv: "pv-1" }, "bound");
  log.debug("hidden at info");
  assert.equal(logs.lines.length, 1);
  const [line] = logs.lines;
  assert.equal(line?.level, "info");
  assert.equal(line?.function, "binder");
  assert.equal(line?.msg, "bound");
  assert.equal(line?.pv, "pv-1");
  assert.match(String(line?.time), /^\d{4}-\d\d-\d\dT/);
});

test("LOG_LEVEL picks the level; an unknown value falls back to info with a warning", () => {
  const saved = process.env.LOG_LEVEL;
  try {
    process.env.LOG_LEVEL = "debug";
    assert.equal(createLogger({ destination: captureLogs().destination }).level, "debug");
    process.env.LOG_LEVEL = "chatty";
    const logs = captureLogs();
    assert.equal(createLogger({ destination: logs.destination }).level, "info");
    assert.equal(logs.lines[0]?.msg, "unknown log level, using info");
  } finally {
    if (saved === undefined) delete process.env.LOG_LEVEL;
    else process.env.LOG_LEVEL = saved;
  }
});

test("requestLogger binds the event's identity and skips empty fields", () => {
  const logs = captureLogs();
  const base = createLogger({ name: "binder", destination: logs.destination });
  requestLogger(base, { eventId: "e-1", objectKey: "ns/claim", resourceVersion: undefined }).info("handled");
  const [line] = logs.lines;
  assert.equal(line?.eventId, "e-1");
  assert.equal(line?.objectKey, "ns/claim");
  assert.equal("resourceVersion" in (line ?? {}), false);
});

test("credentials are redacted in logged objects and bindings", () => {
  const logs = captureLogs();
  const log = createLogger({ destination: logs.destination }).child({ token: "child-binding-token" });
  log.info(
    {
      req: { headers: { authorization: "Bearer abc.def", "content-type": "application/json" } },
      csiRequest: { name: "pvc-1", secrets: { password: "p4ss" }, parameters: { fsType: "ext4" } },
      storageClass: {
        parameters: {
          "csi.storage.k8s.io/provisioner-secret-name": "vendor-creds",
          "csi.storage.k8s.io/fstype": "xfs",
        },
      },
      user: { bearerToken: "tok-1", clientSecret: "cs-1", password: "pw-1" },
    },
    "calling driver",
  );
  const text = JSON.stringify(logs.lines);
  for (const secret of ["child-binding-token", "abc.def", "p4ss", "vendor-creds", "tok-1", "cs-1", "pw-1"]) {
    assert.doesNotMatch(text, new RegExp(secret), secret);
  }
  const [line] = logs.lines as Array<Record<string, Record<string, Record<string, unknown>>>>;
  assert.equal(line?.req?.headers?.["content-type"], "application/json");
  assert.equal(line?.req?.headers?.authorization, REDACTED);
  assert.equal(line?.csiRequest?.name, "pvc-1");
  assert.deepEqual(line?.csiRequest?.parameters, { fsType: "ext4" });
  assert.equal(
    (line?.storageClass?.parameters as Record<string, string> | undefined)?.["csi.storage.k8s.io/fstype"],
    "xfs",
  );
});

test("raw requests and errors are serialized without their credentials", () => {
  const logs = captureLogs();
  const log = createLogger({ destination: logs.destination });
  const req = new IncomingMessage(new Socket());
  req.method = "POST";
  req.url = "/";
  req.headers = { authorization: "Bearer raw-req-token", "ce-id": "1" };
  const err = Object.assign(new Error("upstream said no"), {
    request: { headers: { authorization: "Basic eHg=" } },
  });
  log.error({ req, err }, "failed");
  const text = JSON.stringify(logs.lines);
  assert.doesNotMatch(text, /raw-req-token|eHg=/);
  const [line] = logs.lines as Array<Record<string, Record<string, unknown>>>;
  assert.equal(line?.req?.method, "POST");
  assert.deepEqual(line?.req?.headers, { authorization: REDACTED, "ce-id": "1" });
  assert.equal(line?.err?.message, "upstream said no");
  assert.match(String(line?.err?.stack), /log-metrics\.test\.ts/);
});

test("the data of Secrets is redacted, other objects' data is not", () => {
  class V1Secret {
    apiVersion = "v1";
    kind = "Secret";
    metadata = { name: "creds", namespace: "ns" };
    data = { key: "c2VjcmV0" };
    stringData = { plain: "plain-secret" };
  }
  const scrubbed = scrub({
    event: { type: "ADDED", object: new V1Secret() },
    list: { kind: "SecretList", items: [{ metadata: { name: "s" }, data: { k: "djE=" } }] },
    configMap: { kind: "ConfigMap", data: { setting: "visible" } },
  }) as Record<string, Record<string, unknown>>;
  const text = JSON.stringify(scrubbed);
  assert.doesNotMatch(text, /c2VjcmV0|plain-secret|djE=/);
  assert.match(text, /"name":"creds"/);
  assert.deepEqual(scrubbed.configMap, { kind: "ConfigMap", data: { setting: "visible" } });
});

test("scrub copies, handles cycles, and leaves live objects and errors alone", () => {
  const original: Record<string, unknown> = { authorization: "x", nested: { ok: 1 } };
  original.self = original;
  const emitter = new EventEmitter();
  const err = new Error("kept");
  const out = scrub({ original, emitter, err, buf: Buffer.from("hi") }) as Record<
    string,
    Record<string, unknown>
  >;
  assert.equal(original.authorization, "x", "the input is not modified");
  assert.equal(out.original?.authorization, REDACTED);
  assert.equal(out.original?.self, "[Circular]");
  assert.equal(out.emitter, emitter);
  assert.equal(out.err, err);
  assert.ok(isSecretKey("Authorization"));
  assert.ok(isSecretKey("csi.storage.k8s.io/node-publish-secret-namespace"));
  assert.ok(!isSecretKey("storageClassName"));
});

test("metric helpers are get-or-create on the given registry", async () => {
  const registry = createMetricsRegistry({ defaultMetrics: false });
  const a = counter(registry, { name: "csi_calls_total", help: "CSI calls", labelNames: ["method"] });
  const b = counter(registry, { name: "csi_calls_total", help: "CSI calls", labelNames: ["method"] });
  assert.equal(a, b);
  a.inc({ method: "CreateVolume" });
  histogram(registry, { name: "csi_call_seconds", help: "CSI call time" }).observe(0.2);
  gauge(registry, { name: "inflight", help: "in flight" }).set(2);
  assert.throws(() => gauge(registry, { name: "csi_calls_total", help: "x" }), /another type/);
  const text = await registry.metrics();
  assert.match(text, /csi_calls_total\{method="CreateVolume"\} 1/);
  assert.match(text, /csi_call_seconds_bucket\{le="0.25"\} 1/);
  assert.doesNotMatch(text, /process_cpu/, "no default metrics when disabled");
});

test("registries are independent; the process registry is one instance", async () => {
  const one = createMetricsRegistry();
  const two = createMetricsRegistry();
  requestMetrics(one).observe({ function: "a", route: "/", outcome: "ok" }, 0.01);
  requestMetrics(two);
  assert.match(await one.metrics(), /function_requests_total\{function="a",route="\/",outcome="ok"\} 1/);
  assert.doesNotMatch(await two.metrics(), /function="a"/);
  assert.match(await one.metrics(), /process_cpu_user_seconds_total/);
  assert.equal(processMetrics(), processMetrics());
});

test("outcome labels follow the status", () => {
  assert.equal(outcomeOfStatus(200), "ok");
  assert.equal(outcomeOfStatus(204), "ok");
  assert.equal(outcomeOfStatus(400), "bad_request");
  assert.equal(outcomeOfStatus(413), "bad_request");
  assert.equal(outcomeOfStatus(503), "retry");
  assert.equal(outcomeOfStatus(500), "error");
});
