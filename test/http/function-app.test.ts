import assert from "node:assert/strict";
import { request as httpRequest } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, test } from "node:test";
import request from "supertest";
import { createFunctionApp, maxBodyBytesFromEnv, rawBody } from "../../shared/http/function-app.ts";
import { createMetricsRegistry } from "../../shared/metrics.ts";
import { captureLogs, echoSpec, SECRET_DETAIL } from "./echo-function.ts";

function json(value: unknown): string {
  return JSON.stringify(value);
}

describe("POST /", () => {
  test("handles each event in order and answers 200 with the summaries", async () => {
    const app = createFunctionApp(echoSpec());
    const res = await request(app)
      .post("/")
      .set("content-type", "application/json")
      .set("ce-id", "event-123")
      .send(json([{ id: "a" }, { id: "b", sleepMs: 5 }, { id: "c" }]));
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, {
      function: "echo",
      results: [{ echoed: "a" }, { echoed: "b" }, { echoed: "c" }],
    });
    assert.equal(res.headers["x-request-id"], "event-123");
    assert.equal(res.headers["x-powered-by"], undefined);
  });

  test("with orderKey, a batch runs different keys at once and one key's events in order", async () => {
    const order: string[] = [];
    const app = createFunctionApp(
      echoSpec({
        orderKey: (e) => e.id?.split(".")[0],
        handleEvent: async (e) => {
          order.push(`start ${e.id}`);
          await new Promise((r) => setTimeout(r, e.sleepMs ?? 0));
          order.push(`end ${e.id}`);
          return { echoed: e.id };
        },
      }),
    );
    const res = await request(app)
      .post("/")
      .set("content-type", "application/json")
      .send(
        json([
          { id: "a.1", sleepMs: 60 },
          { id: "b.1", sleepMs: 5 },
          { id: "a.2", sleepMs: 5 },
        ]),
      );
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.results, [{ echoed: "a.1" }, { echoed: "b.1" }, { echoed: "a.2" }]);
    assert.ok(order.indexOf("end b.1") < order.indexOf("end a.1"), `b did not wait for a: ${order}`);
    assert.ok(order.indexOf("end a.1") < order.indexOf("start a.2"), `a's events in order: ${order}`);
  });

  test("with orderKey, one failing event fails the batch (the sender retries it all)", async () => {
    const app = createFunctionApp(echoSpec({ orderKey: (e) => e.id }));
    const res = await request(app)
      .post("/")
      .set("content-type", "application/json")
      .send(
        json([
          { id: "ok", sleepMs: 5 },
          { id: "bad", do: "api503" },
        ]),
      );
    assert.equal(res.status, 503);
  });

  test("an envelope that yields no events is still a 200", async () => {
    const app = createFunctionApp(echoSpec());
    const res = await request(app).post("/").set("content-type", "application/json").send("[]");
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { function: "echo", results: [] });
  });

  test("uses x-request-id when there is no ce-id, and generates one otherwise", async () => {
    const app = createFunctionApp(echoSpec());
    const given = await request(app).post("/").set("x-request-id", "req-9").send(json({}));
    assert.equal(given.headers["x-request-id"], "req-9");
    const generated = await request(app).post("/").send(json({}));
    assert.match(String(generated.headers["x-request-id"]), /^[0-9a-f-]{36}$/);
  });

  test("a parse error is a 400 with the parser's message", async () => {
    const app = createFunctionApp(echoSpec());
    const res = await request(app).post("/").set("content-type", "application/json").send("{not json");
    assert.equal(res.status, 400);
    assert.match(String(res.headers["content-type"]), /^application\/json/);
    assert.deepEqual(res.body, { error: "body is not valid JSON" });
  });

  test("empty bodies and odd content types reach the parser instead of crashing", async () => {
    const app = createFunctionApp(echoSpec());
    const empty = await request(app).post("/");
    assert.equal(empty.status, 400);
    assert.deepEqual(empty.body, { error: "body is not valid JSON" });
    for (const type of [
      "text/plain",
      "application/cloudevents+json",
      "%%garbage;;=",
      "application/json; charset=klingon",
    ]) {
      const res = await request(app)
        .post("/")
        .set("content-type", type)
        .send(json({ id: type }));
      assert.equal(res.status, 200, type);
      assert.deepEqual(res.body.results, [{ echoed: type }]);
    }
  });

  test("an unsupported content-encoding is a 415 JSON error", async () => {
    const app = createFunctionApp(echoSpec());
    const res = await request(app).post("/").set("content-encoding", "zstd-ish").send(json({}));
    assert.equal(res.status, 415);
    assert.equal(typeof res.body.error, "string");
  });

  test("a body over the limit is a 413 JSON error", async () => {
    const app = createFunctionApp(echoSpec({ maxBodyBytes: 64 }));
    const res = await request(app)
      .post("/")
      .set("content-type", "application/json")
      .send(json({ id: "x".repeat(200) }));
    assert.equal(res.status, 413);
    assert.match(String(res.headers["content-type"]), /^application\/json/);
    assert.equal(typeof res.body.error, "string");
    const small = await request(app)
      .post("/")
      .send(json({ id: "ok" }));
    assert.equal(small.status, 200);
  });

  test("MAX_BODY_BYTES sets the default limit and is validated", () => {
    assert.equal(maxBodyBytesFromEnv({}), 1024 * 1024);
    assert.equal(maxBodyBytesFromEnv({ MAX_BODY_BYTES: "2048" }), 2048);
    for (const bad of ["0", "-1", "1.5", "1mb", "abc"]) {
      assert.throws(() => maxBodyBytesFromEnv({ MAX_BODY_BYTES: bad }), /MAX_BODY_BYTES/);
    }
  });
});

describe("error answers", () => {
  test("API server 503 becomes 503 with the server's Retry-After", async () => {
    const app = createFunctionApp(echoSpec());
    const res = await request(app)
      .post("/")
      .send(json({ do: "api503" }));
    assert.equal(res.status, 503);
    assert.equal(res.headers["retry-after"], "7");
    assert.equal(typeof res.body.error, "string");
  });

  test("API server 429, connection refused and exhausted conflict retries are 503", async () => {
    const app = createFunctionApp(echoSpec());
    for (const kind of ["api429", "refused", "conflict"]) {
      const res = await request(app)
        .post("/")
        .send(json({ do: kind }));
      assert.equal(res.status, 503, kind);
      assert.match(String(res.headers["retry-after"]), /^\d+$/, kind);
    }
  });

  test("RetryLaterError is 503 with its reason and seconds", async () => {
    const app = createFunctionApp(echoSpec());
    const res = await request(app)
      .post("/")
      .send(json({ do: "retry" }));
    assert.equal(res.status, 503);
    assert.equal(res.headers["retry-after"], "3");
    assert.deepEqual(res.body, { error: "volume operation pending" });
  });

  test("an unexpected error is a bare 500 and its detail only goes to the log", async () => {
    const logs = captureLogs();
    const app = createFunctionApp(echoSpec({}, logs));
    const res = await request(app)
      .post("/")
      .send(json({ id: "e1", do: "crash" }));
    assert.equal(res.status, 500);
    assert.deepEqual(res.body, { error: "internal error" });
    assert.equal(res.headers["retry-after"], undefined);
    assert.doesNotMatch(res.text, /hunter2|internal\/path|at .*\.ts/);
    const logged = logs.lines.find((l) => l.msg === "request failed");
    assert.ok(logged, "the failure is logged");
    const err = logged.err as { message: string; stack: string };
    assert.equal(err.message, SECRET_DETAIL);
    assert.match(err.stack, /echo-function\.ts/);
    assert.equal(logged.eventId, "e1", "logged with the event's fields");
  });

  test("an API 403 escaping a handler is a 500, not the API's 4xx", async () => {
    const app = createFunctionApp(echoSpec());
    const res = await request(app)
      .post("/")
      .send(json({ do: "api403" }));
    assert.equal(res.status, 500);
    assert.deepEqual(res.body, { error: "internal error" });
  });

  test("the process keeps serving after every kind of failure", async () => {
    const app = createFunctionApp(echoSpec());
    for (const kind of ["crash", "api503", "retry"])
      await request(app)
        .post("/")
        .send(json({ do: kind }));
    const res = await request(app)
      .post("/")
      .send(json({ id: "after" }));
    assert.equal(res.status, 200);
  });
});

describe("routes", () => {
  test("unknown routes are 404 JSON", async () => {
    const app = createFunctionApp(echoSpec());
    for (const [method, path] of [
      ["get", "/nope"],
      ["post", "/nope"],
      ["delete", "/a/b/c"],
    ] as const) {
      const res = await request(app)[method](path);
      assert.equal(res.status, 404, `${method} ${path}`);
      assert.match(String(res.headers["content-type"]), /^application\/json/);
      assert.equal(typeof res.body.error, "string");
    }
  });

  test("a known path with the wrong method is 405 with Allow", async () => {
    const app = createFunctionApp(echoSpec());
    const get = await request(app).get("/");
    assert.equal(get.status, 405);
    assert.equal(get.headers.allow, "POST");
    assert.match(String(get.headers["content-type"]), /^application\/json/);
    const post = await request(app).post("/healthz");
    assert.equal(post.status, 405);
    assert.equal(post.headers.allow, "GET, HEAD");
    const put = await request(app).put("/resync");
    assert.equal(put.status, 405);
    const options = await request(app).options("/");
    assert.equal(options.status, 204);
    assert.equal(options.headers.allow, "POST");
  });

  test("POST /resync is 404 when the function has none", async () => {
    const app = createFunctionApp(echoSpec());
    const res = await request(app).post("/resync");
    assert.equal(res.status, 404);
    assert.equal(typeof res.body.error, "string");
  });

  test("POST /resync runs the function's resync", async () => {
    const app = createFunctionApp(
      echoSpec({ resync: async (ctx) => ({ scanned: 3, requestId: ctx.requestId }) }),
    );
    const res = await request(app).post("/resync").set("ce-id", "ping-1").send(json({}));
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { function: "echo", result: { scanned: 3, requestId: "ping-1" } });
  });

  test("resync failures are classified like event failures", async () => {
    const app = createFunctionApp(
      echoSpec({
        resync: async () => {
          throw new Error("boom");
        },
      }),
    );
    const res = await request(app).post("/resync");
    assert.equal(res.status, 500);
    assert.deepEqual(res.body, { error: "internal error" });
  });

  test("extra routes get the request context through ctx() and take part in 405", async () => {
    const app = createFunctionApp(
      echoSpec({
        routes(router, ctx) {
          router.get("/explain/:name", async (req, res) => {
            await new Promise((resolve) => setImmediate(resolve));
            res.json({ name: req.params.name, requestId: ctx().requestId });
          });
          // A POST route reading its body: ctx() must survive the body stream's callbacks.
          router.post("/annotate", rawBody(), (req, res) => {
            res.json({ bytes: (req.body as Buffer).length, requestId: ctx().requestId });
          });
        },
      }),
    );
    const res = await request(app).get("/explain/pvc-1").set("x-request-id", "r-1");
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { name: "pvc-1", requestId: "r-1" });
    const wrong = await request(app).delete("/explain/pvc-1");
    assert.equal(wrong.status, 405);
    assert.equal(wrong.headers.allow, "GET, HEAD");
    const posted = await request(app).post("/annotate").set("ce-id", "c-7").send("12345");
    assert.equal(posted.status, 200);
    assert.deepEqual(posted.body, { bytes: 5, requestId: "c-7" });
  });
});

describe("probes and metrics", () => {
  test("/healthz is always 200", async () => {
    const app = createFunctionApp(echoSpec({ ready: async () => false }));
    const res = await request(app).get("/healthz");
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { ok: true });
  });

  test("/readyz follows ready(), treats a throwing ready() as not ready, and is 503 while draining", async () => {
    let ready: boolean | Error = true;
    const app = createFunctionApp(
      echoSpec({
        ready: async () => {
          if (ready instanceof Error) throw ready;
          return ready;
        },
      }),
    );
    assert.equal((await request(app).get("/readyz")).status, 200);
    ready = false;
    assert.equal((await request(app).get("/readyz")).status, 503);
    ready = new Error("csi probe failed");
    const failing = await request(app).get("/readyz");
    assert.equal(failing.status, 503);
    assert.doesNotMatch(failing.text, /csi probe failed/);
    ready = true;
    app.runtime.draining = true;
    const draining = await request(app).get("/readyz");
    assert.equal(draining.status, 503);
    assert.deepEqual(draining.body, { ready: false, reason: "shutting down" });
  });

  test("/readyz without ready() is 200", async () => {
    const app = createFunctionApp(echoSpec());
    assert.equal((await request(app).get("/readyz")).status, 200);
  });

  test("/metrics exposes the request counter, duration histogram and process metrics", async () => {
    const app = createFunctionApp(echoSpec());
    await request(app)
      .post("/")
      .send(json({ id: "m" }));
    await request(app)
      .post("/")
      .send(json({ do: "retry" }));
    await request(app).post("/").send("{bad");
    await request(app).get("/nope");
    const res = await request(app).get("/metrics");
    assert.equal(res.status, 200);
    assert.match(String(res.headers["content-type"]), /^text\/plain/);
    const text = res.text;
    assert.match(text, /function_requests_total\{function="echo",route="\/",outcome="ok"\} 1\n/);
    assert.match(text, /function_requests_total\{function="echo",route="\/",outcome="retry"\} 1\n/);
    assert.match(text, /function_requests_total\{function="echo",route="\/",outcome="bad_request"\} 1\n/);
    assert.match(
      text,
      /function_requests_total\{function="echo",route="unmatched",outcome="bad_request"\} 1\n/,
    );
    assert.match(
      text,
      /function_request_duration_seconds_count\{function="echo",route="\/",outcome="ok"\} 1\n/,
    );
    assert.match(text, /process_cpu_user_seconds_total/);
    await request(app)
      .post("/")
      .send(json({ id: "m2" }));
    const again = await request(app).get("/metrics");
    assert.match(again.text, /function_requests_total\{function="echo",route="\/",outcome="ok"\} 2\n/);
  });

  test("route labels use the pattern, not the raw path", async () => {
    const metrics = createMetricsRegistry({ defaultMetrics: false });
    const app = createFunctionApp(
      echoSpec({
        metrics,
        routes(router) {
          router.get("/explain/:name", (_req, res) => void res.json({}));
        },
      }),
    );
    await request(app).get("/explain/a");
    await request(app).get("/explain/b");
    const text = await metrics.metrics();
    assert.match(
      text,
      /function_requests_total\{function="echo",route="\/explain\/:name",outcome="ok"\} 2\n/,
    );
    assert.doesNotMatch(text, /explain\/a/);
  });

  test("two apps with the shared process registry do not collide", async () => {
    const a = createFunctionApp(echoSpec({ name: "one", metrics: undefined }));
    const b = createFunctionApp(echoSpec({ name: "two", metrics: undefined }));
    await request(a).post("/").send(json({}));
    await request(b).post("/").send(json({}));
    const text = (await request(a).get("/metrics")).text;
    assert.match(text, /function_requests_total\{function="one",route="\/",outcome="ok"\} 1\n/);
    assert.match(text, /function_requests_total\{function="two",route="\/",outcome="ok"\} 1\n/);
  });
});

describe("logging", () => {
  test("one request line per request with outcome and duration; probes only at debug", async () => {
    const logs = captureLogs();
    const app = createFunctionApp(echoSpec({}, logs));
    await request(app)
      .post("/")
      .set("ce-id", "abc")
      .send(json({ id: "x" }));
    await request(app).get("/healthz");
    const lines = logs.lines.filter((l) => l.msg === "request");
    assert.equal(lines.length, 2);
    const [post, probe] = lines;
    assert.equal(post?.level, "info");
    assert.equal(post?.requestId, "abc");
    assert.equal(post?.function, "echo");
    assert.equal(post?.route, "/");
    assert.equal(post?.status, 200);
    assert.equal(post?.outcome, "ok");
    assert.equal(typeof post?.durationMs, "number");
    assert.equal(probe?.level, "debug");
  });

  test("an event's lines carry the request id and the event's identity; other contexts carry the request id", async () => {
    const logs = captureLogs();
    const app = createFunctionApp(
      echoSpec(
        {
          handleEvent: async (_event, ctx) => {
            ctx.log.info("handling");
            return {};
          },
          resync: async (ctx) => {
            ctx.log.info("resyncing");
            return {};
          },
        },
        logs,
      ),
    );
    await request(app)
      .post("/")
      .set("ce-id", "req-9")
      .send(json({ id: "event-3" }));
    await request(app).post("/resync").set("x-request-id", "req-10").send("");
    const handling = logs.lines.find((l) => l.msg === "handling");
    assert.equal(handling?.requestId, "req-9");
    assert.equal(handling?.eventId, "event-3");
    assert.equal(handling?.function, "echo");
    const resyncing = logs.lines.find((l) => l.msg === "resyncing");
    assert.equal(resyncing?.requestId, "req-10");
    // Bound once, not by a child of a child: the line has each field once.
    assert.equal(JSON.stringify(handling).match(/"requestId"/g)?.length, 1);
  });

  test("authorization headers never reach the log", async () => {
    const logs = captureLogs();
    const app = createFunctionApp(
      echoSpec(
        {
          handleEvent: async (_event, ctx) => {
            ctx.log.info({ headers: { authorization: "Bearer sekret-token" } }, "looking at headers");
            return {};
          },
        },
        logs,
      ),
    );
    await request(app).post("/").set("authorization", "Bearer sekret-token").send(json({}));
    assert.ok(logs.lines.some((l) => l.msg === "looking at headers"));
    assert.doesNotMatch(JSON.stringify(logs.lines), /sekret-token/);
  });
});

test("a client that disconnects aborts ctx.signal and is counted as aborted", async () => {
  const logs = captureLogs();
  const metrics = createMetricsRegistry({ defaultMetrics: false });
  const app = createFunctionApp(echoSpec({ metrics }, logs));
  const server = app.listen(0, "127.0.0.1");
  await new Promise((resolve) => server.once("listening", resolve));
  try {
    const { port } = server.address() as AddressInfo;
    const req = httpRequest({ host: "127.0.0.1", port, method: "POST", path: "/" });
    req.on("error", () => {});
    req.end(json({ do: "wait-abort" }));
    await new Promise((resolve) => setTimeout(resolve, 100));
    req.destroy();
    for (
      let i = 0;
      i < 50 && !logs.lines.some((l) => l.msg === "client disconnected before the answer");
      i++
    ) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.ok(logs.lines.some((l) => l.msg === "client disconnected before the answer"));
    assert.match(
      await metrics.metrics(),
      /function_requests_total\{function="echo",route="\/",outcome="aborted"\} 1/,
    );
    const after = await fetch(`http://127.0.0.1:${port}/healthz`);
    assert.equal(after.status, 200);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});
