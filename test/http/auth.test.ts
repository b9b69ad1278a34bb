// Authentication of the function routes: AUTH_MODE=token (a shared bearer
// token) and AUTH_MODE=tokenreview (TokenReview against the sandbox API
// server), with probes left open.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, afterEach, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { KubeConfig } from "@kubernetes/client-node";
import request from "supertest";
import {
  type AuthPolicy,
  authorize,
  authPolicyFromEnv,
  bearerToken,
  staticTokenAuthenticator,
  tokenReviewAuthenticator,
} from "../../shared/http/auth.ts";
import { createFunctionApp } from "../../shared/http/function-app.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";
import { captureLogs, echoSpec } from "./echo-function.ts";

const TOKEN = "s3cr3t-token-for-the-forwarder";
const FORWARDER = "system:serviceaccount:ksf:forwarder";

function tokenPolicy(): AuthPolicy {
  return { mode: "token", authenticator: staticTokenAuthenticator(TOKEN) };
}

describe("bearer token parsing and decisions", () => {
  test("bearerToken: the token, undefined without a header, null for another scheme or shape", () => {
    assert.equal(bearerToken("Bearer abc.def-ghi_~+/="), "abc.def-ghi_~+/=");
    assert.equal(bearerToken("bearer   abc"), "abc");
    assert.equal(bearerToken(undefined), undefined);
    assert.equal(bearerToken(""), undefined);
    assert.equal(bearerToken("Basic dXNlcjpwYXNz"), null);
    assert.equal(bearerToken("Bearer"), null);
    assert.equal(bearerToken("Bearer a b"), null);
  });

  test("authorize: 401 with a challenge, 403 for users not allowed, ok otherwise", async () => {
    const policy: AuthPolicy = {
      mode: "token",
      authenticator: staticTokenAuthenticator(TOKEN, "forwarder"),
      allowedUsers: new Set(["forwarder"]),
    };
    assert.deepEqual(await authorize(policy, undefined, "binder"), {
      ok: false,
      status: 401,
      error: "unauthorized: a bearer token is required",
      challenge: 'Bearer realm="binder"',
    });
    assert.deepEqual(await authorize(policy, "Bearer wrong", "binder"), {
      ok: false,
      status: 401,
      error: "unauthorized: the bearer token is not valid",
      challenge: 'Bearer realm="binder", error="invalid_token"',
    });
    assert.deepEqual(await authorize(policy, `Bearer ${TOKEN}`, "binder"), {
      ok: true,
      user: { username: "forwarder", groups: [] },
    });
    const strict = { ...policy, allowedUsers: new Set(["someone-else"]) };
    assert.deepEqual(await authorize(strict, `Bearer ${TOKEN}`, "binder"), {
      ok: false,
      status: 403,
      error: 'forbidden: user "forwarder" may not call this function',
    });
  });

  test("the static token comparison accepts only the exact token", async () => {
    const auth = staticTokenAuthenticator(TOKEN);
    assert.ok(await auth.authenticate(TOKEN));
    for (const wrong of ["", TOKEN.slice(0, -1), `${TOKEN}x`, TOKEN.toUpperCase()])
      assert.equal(await auth.authenticate(wrong), undefined);
    assert.throws(() => staticTokenAuthenticator(""), /must not be empty/);
  });

  test("authPolicyFromEnv: none by default, and configuration mistakes fail at start", () => {
    assert.equal(authPolicyFromEnv({}), undefined);
    assert.equal(authPolicyFromEnv({ AUTH_MODE: "none" }), undefined);
    assert.equal(authPolicyFromEnv({ AUTH_MODE: "token", AUTH_TOKEN: TOKEN })?.mode, "token");
    assert.throws(
      () => authPolicyFromEnv({ AUTH_MODE: "tokn" }),
      /AUTH_MODE must be none, token or tokenreview/,
    );
    assert.throws(() => authPolicyFromEnv({ AUTH_MODE: "token" }), /needs AUTH_TOKEN/);
    assert.throws(
      () => authPolicyFromEnv({ AUTH_MODE: "token", AUTH_TOKEN: "a", AUTH_TOKEN_FILE: "/x" }),
      /not both/,
    );
    assert.throws(
      () => authPolicyFromEnv({ AUTH_MODE: "token", AUTH_TOKEN: "a", AUTH_ALLOWED_USERS: "x" }),
      /only applies to AUTH_MODE=tokenreview/,
    );
    assert.throws(
      () =>
        authPolicyFromEnv(
          { AUTH_MODE: "tokenreview", AUTH_CACHE_TTL_SECONDS: "-1" },
          { kube: () => ({ create: async () => ({}) as never }) },
        ),
      /AUTH_CACHE_TTL_SECONDS/,
    );
    assert.throws(() => authPolicyFromEnv({ AUTH_MODE: "tokenreview" }), /no Kubernetes API configured/);
  });
});

describe("AUTH_MODE=token on a function", () => {
  test("event routes need the token: 401 with WWW-Authenticate without it or with a wrong one", async () => {
    const app = createFunctionApp(echoSpec({ auth: tokenPolicy() }));
    const missing = await request(app).post("/").send("{}");
    assert.equal(missing.status, 401);
    assert.equal(missing.headers["www-authenticate"], 'Bearer realm="echo"');
    assert.deepEqual(missing.body, { error: "unauthorized: a bearer token is required" });
    const wrong = await request(app).post("/").set("authorization", "Bearer nope").send("{}");
    assert.equal(wrong.status, 401);
    assert.equal(wrong.headers["www-authenticate"], 'Bearer realm="echo", error="invalid_token"');
    const basic = await request(app).post("/resync").set("authorization", "Basic Zm9vOmJhcg==");
    assert.equal(basic.status, 401);
  });

  test("with the token the event is handled, and the log line names the caller but never the token", async () => {
    const logs = captureLogs();
    const app = createFunctionApp(echoSpec({ auth: tokenPolicy() }, logs));
    const res = await request(app)
      .post("/")
      .set("authorization", `Bearer ${TOKEN}`)
      .set("content-type", "application/json")
      .send(JSON.stringify({ id: "e1" }));
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { function: "echo", results: [{ echoed: "e1" }] });
    const line = logs.lines.find((l) => l.msg === "request" && l.route === "/");
    assert.equal(line?.user, "static-token");
    assert.ok(!JSON.stringify(logs.lines).includes(TOKEN));
  });

  test("probes stay open; unknown paths and wrong methods answer 401 before 404/405", async () => {
    const app = createFunctionApp(echoSpec({ auth: tokenPolicy() }));
    assert.equal((await request(app).get("/healthz")).status, 200);
    assert.equal((await request(app).get("/readyz")).status, 200);
    assert.equal((await request(app).get("/metrics")).status, 200);
    assert.equal((await request(app).head("/healthz")).status, 200);
    assert.equal((await request(app).get("/no-such-route")).status, 401);
    assert.equal((await request(app).get("/")).status, 401);
    const authed = await request(app).get("/no-such-route").set("authorization", `Bearer ${TOKEN}`);
    assert.equal(authed.status, 404);
  });

  test("without an auth option the function reads AUTH_MODE from the environment", async () => {
    const saved = { mode: process.env.AUTH_MODE, token: process.env.AUTH_TOKEN };
    process.env.AUTH_MODE = "token";
    process.env.AUTH_TOKEN = TOKEN;
    try {
      const app = createFunctionApp(echoSpec());
      assert.equal(app.runtime.authMode, "token");
      assert.equal((await request(app).post("/").send("{}")).status, 401);
      assert.equal(
        (await request(app).post("/").set("authorization", `Bearer ${TOKEN}`).send("{}")).status,
        200,
      );
      // auth: null keeps a function open whatever the environment says.
      const open = createFunctionApp(echoSpec({ auth: null }));
      assert.equal((await request(open).post("/").send("{}")).status, 200);
    } finally {
      if (saved.mode === undefined) delete process.env.AUTH_MODE;
      else process.env.AUTH_MODE = saved.mode;
      if (saved.token === undefined) delete process.env.AUTH_TOKEN;
      else process.env.AUTH_TOKEN = saved.token;
    }
  });

  test("answers carry no-store and nosniff", async () => {
    const app = createFunctionApp(echoSpec({ auth: tokenPolicy() }));
    for (const res of [await request(app).post("/"), await request(app).get("/healthz")]) {
      assert.equal(res.headers["cache-control"], "no-store");
      assert.equal(res.headers["x-content-type-options"], "nosniff");
    }
  });
});

describe("AUTH_MODE=tokenreview against the sandbox", () => {
  let sandbox: TestSandbox;
  let kube: KubeJsonClient;

  before(async () => {
    sandbox = await startTestSandbox();
    kube = new KubeJsonClient(sandbox.kubeConfig);
  });

  after(async () => {
    await kube.close();
    await sandbox.close();
  });

  afterEach(async () => {
    await sandbox.admin.reset();
  });

  async function registerTokens(): Promise<void> {
    const res = await fetch(`${sandbox.url}/_sandbox/tokens`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        "forwarder-token": { username: FORWARDER, groups: ["system:serviceaccounts"] },
        "intruder-token": { username: "system:serviceaccount:other:intruder" },
      }),
    });
    assert.equal(res.status, 200);
  }

  test("a token of an allowed user gets in, another valid user gets 403, an unknown token 401", async () => {
    await registerTokens();
    const policy = authPolicyFromEnv(
      { AUTH_MODE: "tokenreview", AUTH_ALLOWED_USERS: `${FORWARDER}, someone` },
      { kube: () => kube },
    );
    assert.ok(policy);
    const logs = captureLogs();
    const app = createFunctionApp(echoSpec({ auth: policy }, logs));
    const ok = await request(app).post("/").set("authorization", "Bearer forwarder-token").send("{}");
    assert.equal(ok.status, 200);
    assert.equal(logs.lines.find((l) => l.msg === "request")?.user, FORWARDER);
    const intruder = await request(app).post("/").set("authorization", "Bearer intruder-token").send("{}");
    assert.equal(intruder.status, 403);
    assert.deepEqual(intruder.body, {
      error: 'forbidden: user "system:serviceaccount:other:intruder" may not call this function',
    });
    const unknown = await request(app).post("/").set("authorization", "Bearer who-am-i").send("{}");
    assert.equal(unknown.status, 401);
    assert.equal(unknown.headers["www-authenticate"], 'Bearer realm="echo", error="invalid_token"');
    assert.equal((await request(app).get("/healthz")).status, 200);
  });

  test("answers are cached briefly: a burst with one token costs one TokenReview", async () => {
    await registerTokens();
    await sandbox.admin.resetCounters();
    let now = 1_000;
    const auth = tokenReviewAuthenticator({ client: kube, cacheTtlMs: 10_000, now: () => now });
    const app = createFunctionApp(echoSpec({ auth: { mode: "tokenreview", authenticator: auth } }));
    const burst = await Promise.all(
      Array.from({ length: 5 }, () =>
        request(app).post("/").set("authorization", "Bearer forwarder-token").send("{}"),
      ),
    );
    assert.deepEqual(
      burst.map((r) => r.status),
      [200, 200, 200, 200, 200],
    );
    assert.equal((await request(app).post("/").set("authorization", "Bearer nobody").send("{}")).status, 401);
    assert.equal((await request(app).post("/").set("authorization", "Bearer nobody").send("{}")).status, 401);
    assert.equal((await sandbox.admin.counters())["create tokenreviews"], 2);
    // Past the TTL the token is reviewed again, and a revoked token is refused.
    await fetch(`${sandbox.url}/_sandbox/tokens`, { method: "DELETE" });
    now += 10_001;
    assert.equal(
      (await request(app).post("/").set("authorization", "Bearer forwarder-token").send("{}")).status,
      401,
    );
    assert.equal((await sandbox.admin.counters())["create tokenreviews"], 3);
  });

  test("audiences: a token for another audience is not accepted", async () => {
    await fetch(`${sandbox.url}/_sandbox/tokens`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ "fn-token": { username: FORWARDER, audiences: ["kube-storage-functions"] } }),
    });
    const right = tokenReviewAuthenticator({ client: kube, audiences: ["kube-storage-functions"] });
    assert.equal((await right.authenticate("fn-token"))?.username, FORWARDER);
    const wrong = tokenReviewAuthenticator({ client: kube, audiences: ["something-else"] });
    assert.equal(await wrong.authenticate("fn-token"), undefined);
  });

  test("an unreachable API server is a 503 with Retry-After, never a 401 or an open door", async () => {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: "down", server: "http://127.0.0.1:1", skipTLSVerify: true }],
      users: [{ name: "u", token: "x" }],
      contexts: [{ name: "down", cluster: "down", user: "u" }],
      currentContext: "down",
    });
    const down = new KubeJsonClient(kc, { requestTimeoutMs: 2000 });
    try {
      const app = createFunctionApp(
        echoSpec({
          auth: { mode: "tokenreview", authenticator: tokenReviewAuthenticator({ client: down }) },
        }),
      );
      const res = await request(app).post("/").set("authorization", "Bearer forwarder-token").send("{}");
      assert.equal(res.status, 503);
      assert.ok(res.headers["retry-after"]);
    } finally {
      await down.close();
    }
  });

  test("a function process configured by environment (AUTH_MODE=tokenreview, KUBECONFIG) authenticates through the sandbox", async () => {
    await registerTokens();
    const fixture = fileURLToPath(new URL("./fixtures/slow-function.ts", import.meta.url));
    const child = spawn(process.execPath, [fixture], {
      env: {
        ...process.env,
        PORT: "0",
        LOG_LEVEL: "warn",
        AUTH_MODE: "tokenreview",
        AUTH_ALLOWED_USERS: FORWARDER,
        KUBECONFIG: sandbox.kubeconfigPath,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      out += d;
    });
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      err += d;
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    try {
      const deadline = Date.now() + 15_000;
      while (!out.includes("\n")) {
        if (Date.now() > deadline || child.exitCode !== null)
          throw new Error(`no ready line; stderr: ${err}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const { url } = JSON.parse(out.trim()) as { url: string };
      const call = (token?: string) =>
        fetch(`${url}/`, {
          method: "POST",
          body: "{}",
          headers: token ? { authorization: `Bearer ${token}` } : {},
        });
      assert.equal((await call()).status, 401);
      assert.equal((await call("intruder-token")).status, 403);
      assert.equal((await call("forwarder-token")).status, 200);
      assert.equal((await fetch(`${url}/healthz`)).status, 200);
    } finally {
      child.kill("SIGTERM");
    }
    assert.equal(await exited, 0, err);
  });
});
