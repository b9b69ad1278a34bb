// serverless.yml against the code: every function it names is built the way
// `npm run build:lambda` builds it (an esbuild bundle per function), the
// bundle's handler is loaded and driven with function URL events (API Gateway
// v2 payloads) against a sandbox API server and CSI driver, with its token and
// kubeconfig read at cold start from a server playing SSM Parameter Store and
// Secrets Manager, and osls packages the service offline.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { pathToFileURL } from "node:url";
import { unzipSync } from "fflate";
import { parse as parseYaml } from "yaml";
import type { FunctionUrlEvent, FunctionUrlResult, LambdaHandler } from "../../functions/lambda-adapter.ts";
import { capacityFromEnv } from "../../functions/provisioner/main.ts";
import { FUNCTION_NAMES } from "../../functions/serve.ts";
import { buildLambdas } from "../../scripts/build-lambda.ts";
import { isRecord } from "../../shared/is-record.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { persistentVolumeClaims, persistentVolumes } from "../../shared/kube/resources.ts";
import type { PersistentVolume, PersistentVolumeClaim } from "../../shared/kube/types.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";
import { REPO } from "./code-rbac.ts";
import { awsEnv, type FakeAws, startFakeAws } from "./fake-aws.ts";

interface ServerlessFunction {
  handler: string;
  url?: unknown;
  timeout?: number;
  environment?: Record<string, string>;
  events?: Record<string, unknown>[];
  package?: { patterns?: string[] };
}

interface ServerlessConfig {
  service: string;
  frameworkVersion?: string;
  provider: {
    name: string;
    runtime: string;
    environment?: Record<string, string>;
    iam?: { role?: { statements?: unknown } };
  };
  package?: { individually?: boolean; patterns?: string[] };
  functions: Record<string, ServerlessFunction>;
  plugins?: string[];
}

const config = parseYaml(await readFile(join(REPO, "serverless.yml"), "utf8")) as ServerlessConfig;
const TOKEN = `token-${randomUUID()}`;
const TOKEN_PARAMETER = "/kube-storage-functions/auth-token";
const KUBECONFIG_SECRET =
  "arn:aws:secretsmanager:eu-west-1:123456789012:secret:kube-storage-functions-kubeconfig-AbCdEf";

let sandbox: TestSandbox;
let aws: FakeAws;
let kube: KubeJsonClient;
let workDir: string;
const handlers = new Map<string, LambdaHandler>();

/** `dist/lambda/binder/index.handler` -> the bundle path and export name. */
function handlerParts(handler: string): { file: string; exportName: string } {
  const dot = handler.lastIndexOf(".");
  return { file: handler.slice(0, dot), exportName: handler.slice(dot + 1) };
}

async function loadHandler(root: string, name: string, cacheBust = ""): Promise<LambdaHandler> {
  const { file, exportName } = handlerParts(config.functions[name]?.handler ?? "");
  const url = pathToFileURL(join(root, `${file}.mjs`)).href + cacheBust;
  const module: Record<string, unknown> = await import(url);
  const handler = module[exportName];
  assert.equal(typeof handler, "function", `${file}.mjs exports ${exportName}`);
  return handler as LambdaHandler;
}

/** A Lambda function URL event (payload format 2.0), as AWS sends it. */
function urlEvent(
  method: string,
  path: string,
  options: { body?: string; headers?: Record<string, string>; base64?: boolean; auth?: boolean } = {},
): FunctionUrlEvent {
  const id = randomUUID();
  const auth = options.auth ?? true;
  return {
    version: "2.0",
    routeKey: "$default",
    rawPath: path,
    rawQueryString: "",
    headers: {
      host: "abcdefghij.lambda-url.eu-west-1.on.aws",
      "x-forwarded-proto": "https",
      ...(auth ? { authorization: `Bearer ${TOKEN}` } : {}),
      ...(options.body !== undefined ? { "content-type": "application/json" } : {}),
      ...options.headers,
    },
    requestContext: {
      accountId: "anonymous",
      apiId: "abcdefghij",
      domainName: "abcdefghij.lambda-url.eu-west-1.on.aws",
      domainPrefix: "abcdefghij",
      http: { method, path, protocol: "HTTP/1.1", sourceIp: "203.0.113.7", userAgent: "test" },
      requestId: id,
      routeKey: "$default",
      stage: "$default",
      time: new Date().toUTCString(),
      timeEpoch: Date.now(),
    },
    ...(options.body !== undefined
      ? {
          body: options.base64 ? Buffer.from(options.body).toString("base64") : options.body,
          isBase64Encoded: options.base64 === true,
        }
      : { isBase64Encoded: false }),
  };
}

const lambdaContext = {
  awsRequestId: "test-request",
  functionName: "test",
  getRemainingTimeInMillis: () => 30_000,
};

/** An EventBridge `schedule` invocation as it reaches the function. */
function scheduledEvent(): Record<string, unknown> {
  return {
    version: "0",
    id: randomUUID(),
    "detail-type": "Scheduled Event",
    source: "aws.events",
    account: "123456789012",
    time: new Date().toISOString(),
    region: "eu-west-1",
    resources: ["arn:aws:events:eu-west-1:123456789012:rule/test"],
    detail: {},
  };
}

function json(result: FunctionUrlResult): Record<string, unknown> {
  const text = result.isBase64Encoded
    ? Buffer.from(result.body ?? "", "base64").toString("utf8")
    : (result.body ?? "");
  const value: unknown = JSON.parse(text);
  assert.ok(isRecord(value), `a JSON object: ${text}`);
  return value;
}

async function invoke(name: string, event: object): Promise<FunctionUrlResult> {
  const handler = handlers.get(name);
  assert.ok(handler, `handler of ${name} loaded`);
  return handler(event, lambdaContext);
}

describe("serverless.yml", () => {
  it("uses osls's AWS provider on Node 24, without the archived Knative plugin", () => {
    assert.equal(config.provider.name, "aws");
    assert.equal(config.provider.runtime, "nodejs24.x");
    assert.ok(!(config.plugins ?? []).some((p) => p.includes("knative")), "no serverless-knative");
    assert.equal(config.package?.individually, true);
    assert.equal(
      config.provider.environment?.AUTH_MODE,
      "token",
      "function URLs are public: a bearer token is required",
    );
  });

  it("names where the token and kubeconfig are kept, never their values, and grants reading exactly those", () => {
    const env = config.provider.environment ?? {};
    for (const plain of ["AUTH_TOKEN", "AUTH_TOKEN_FILE", "KUBECONFIG", "KUBECONFIG_DATA"])
      assert.ok(!(plain in env), `no ${plain} in the template`);
    for (const fn of Object.values(config.functions))
      for (const plain of ["AUTH_TOKEN", "KUBECONFIG_DATA"]) assert.ok(!(plain in (fn.environment ?? {})));
    for (const name of [
      "AUTH_TOKEN_SSM_PARAMETER",
      "AUTH_TOKEN_SECRET_ARN",
      "KUBECONFIG_SSM_PARAMETER",
      "KUBECONFIG_SECRET_ARN",
    ])
      assert.equal(env[name], `\${env:KSF_${name}, ''}`, name);
    assert.equal(
      config.provider.iam?.role?.statements,
      // biome-ignore lint/suspicious/noTemplateCurlyInString: osls's variable syntax, not a template
      "${file(./scripts/lambda-credentials.cjs):iamStatements}",
    );
  });

  it("names every function once, each with a URL and its own bundle", () => {
    assert.deepEqual(Object.keys(config.functions).sort(), [...FUNCTION_NAMES].sort());
    for (const [name, fn] of Object.entries(config.functions)) {
      assert.equal(fn.handler, `dist/lambda/${name}/index.handler`, name);
      assert.equal(fn.url, true, `${name}: function URL`);
      assert.deepEqual(fn.package?.patterns, [`dist/lambda/${name}/**`], `${name} packages only its bundle`);
    }
  });

  it("controllers get a scheduled resync; CSI functions get their driver", () => {
    for (const [name, fn] of Object.entries(config.functions)) {
      const schedules = (fn.events ?? []).filter((e) => "schedule" in e);
      assert.equal(schedules.length, name === "admission" ? 0 : 1, `${name} schedule`);
      const env = fn.environment ?? {};
      const csi = name === "provisioner" || name === "attacher" || name === "resizer";
      assert.equal("CSI_ENDPOINT" in env, csi, `${name} CSI_ENDPOINT`);
      assert.equal("DRIVER_NAME" in env, csi, `${name} DRIVER_NAME`);
    }
  });

  it("capacity tracking is the provisioner's, off unless the deploy turns it on, and its entry reads the defaults as off", () => {
    for (const [name, fn] of Object.entries(config.functions)) {
      const env = fn.environment ?? {};
      for (const key of ["ENABLE_CAPACITY", "NAMESPACE"])
        assert.equal(key in env, name === "provisioner", `${name} ${key}`);
    }
    const env = config.functions.provisioner?.environment ?? {};
    // biome-ignore lint/suspicious/noTemplateCurlyInString: osls's variable syntax, not a template
    assert.equal(env.ENABLE_CAPACITY, "${env:KSF_ENABLE_CAPACITY, 'false'}");
    // biome-ignore lint/suspicious/noTemplateCurlyInString: osls's variable syntax, not a template
    assert.equal(env.NAMESPACE, "${env:KSF_CAPACITY_NAMESPACE, ''}");
    // osls substitutes the defaults; the function then runs without capacity tracking.
    assert.equal(capacityFromEnv({ ENABLE_CAPACITY: "false", NAMESPACE: "" }, true), undefined);
    assert.throws(() => capacityFromEnv({ ENABLE_CAPACITY: "true", NAMESPACE: "" }, true), /NAMESPACE/);
  });
});

describe("Lambda handlers over the sandbox", () => {
  before(async () => {
    sandbox = await startTestSandbox();
    aws = await startFakeAws();
    aws.parameters.set(TOKEN_PARAMETER, { Type: "SecureString", Value: TOKEN });
    aws.secrets.set(KUBECONFIG_SECRET, {
      SecretString: (await readFile(sandbox.kubeconfigPath)).toString("base64"),
    });
    kube = new KubeJsonClient(sandbox.kubeConfig);
    workDir = await mkdtemp(join(tmpdir(), "ksf-lambda-"));
    // Built as `npm run build:lambda` builds them, into the layout serverless.yml names.
    await buildLambdas({ outDir: join(workDir, "dist", "lambda") });
    // Read when each handler builds its app, on its first invocation: as serverless.yml sets them,
    // the names of the parameter and the secret, and what Lambda adds (the role's keys, the region).
    delete process.env.KUBECONFIG;
    delete process.env.AUTH_TOKEN;
    Object.assign(process.env, {
      ...awsEnv(aws),
      AUTH_TOKEN_SSM_PARAMETER: TOKEN_PARAMETER,
      KUBECONFIG_SECRET_ARN: KUBECONFIG_SECRET,
      CSI_ENDPOINT: sandbox.csiEndpoint,
      LOG_LEVEL: "silent",
      AUTH_MODE: "token",
    });
    for (const name of Object.keys(config.functions)) handlers.set(name, await loadHandler(workDir, name));
  });
  after(async () => {
    await kube?.close();
    await sandbox?.close();
    await aws?.close();
    if (workDir) await rm(workDir, { recursive: true, force: true });
  });

  it("every handler answers GET /healthz and GET /readyz (the CSI functions once the driver answers Probe)", async () => {
    for (const name of Object.keys(config.functions)) {
      const health = await invoke(name, urlEvent("GET", "/healthz", { auth: false }));
      assert.equal(health.statusCode, 200, `${name} /healthz`);
      assert.deepEqual(json(health), { ok: true });
      const ready = await invoke(name, urlEvent("GET", "/readyz", { auth: false }));
      assert.equal(ready.statusCode, 200, `${name} /readyz: ${ready.body}`);
      assert.equal(ready.headers?.["content-type"], "application/json; charset=utf-8");
    }
  });

  it("controllers refuse callers without the bearer token (401); the webhooks answer kube-apiserver, which sends none", async () => {
    for (const name of ["binder", "provisioner", "attacher", "resizer", "attach-detach", "protection"]) {
      const r = await invoke(name, urlEvent("POST", "/", { body: "{}", auth: false }));
      assert.equal(r.statusCode, 401, name);
      assert.match(String(r.headers?.["www-authenticate"]), /^Bearer/);
    }
    // Admission ignores AUTH_MODE (functions/admission/app.ts): a bad review is judged, not refused.
    const r = await invoke(
      "admission",
      urlEvent("POST", "/mutate/persistentvolumeclaims", { body: "{}", auth: false }),
    );
    assert.equal(r.statusCode, 400);
  });

  it("binder: a forwarded watch event (base64 body, as function URLs send binary payloads) binds a claim", async () => {
    const pv: PersistentVolume = {
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: { name: "pv-lambda" },
      spec: {
        capacity: { storage: "1Gi" },
        accessModes: ["ReadWriteOnce"],
        csi: { driver: "hostpath.csi.k8s.io", volumeHandle: "pv-lambda" },
        storageClassName: "",
      },
    };
    const pvc: PersistentVolumeClaim = {
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: { name: "claim-lambda", namespace: "default" },
      spec: {
        accessModes: ["ReadWriteOnce"],
        resources: { requests: { storage: "1Gi" } },
        storageClassName: "",
      },
    };
    // The claim comes after the PV's event (which would otherwise bind the waiting claim itself),
    // so its own event, base64-encoded, is what binds it.
    const volume = await kube.create(persistentVolumes, pv);
    const first = await invoke(
      "binder",
      urlEvent("POST", "/", { body: JSON.stringify({ type: "ADDED", object: volume }) }),
    );
    assert.equal(first.statusCode, 200, String(first.body));
    const claim = await kube.create(persistentVolumeClaims, pvc);
    const r = await invoke(
      "binder",
      urlEvent("POST", "/", { body: JSON.stringify({ type: "ADDED", object: claim }), base64: true }),
    );
    assert.equal(r.statusCode, 200, String(r.body));
    const body = json(r);
    assert.equal(body.function, "binder");
    assert.deepEqual(
      (body.results as { synced: { outcome: string }[] }[])[0]?.synced[0]?.outcome,
      "bound to volume pv-lambda",
    );
    const bound = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "claim-lambda", "default");
    assert.equal(bound.spec.volumeName, "pv-lambda");
    assert.equal(bound.status?.phase, "Bound");
  });

  it("binder: a malformed event is a 400 through the adapter too", async () => {
    const r = await invoke("binder", urlEvent("POST", "/", { body: "{not json" }));
    assert.equal(r.statusCode, 400);
    assert.equal(typeof json(r).error, "string");
  });

  it("controllers: an EventBridge schedule invocation runs POST /resync", async () => {
    for (const name of ["binder", "provisioner", "attacher", "resizer", "attach-detach", "protection"]) {
      const r = await invoke(name, scheduledEvent());
      assert.equal(r.statusCode, 200, `${name}: ${r.body}`);
      const body = json(r);
      assert.equal(body.function, name);
      assert.ok(isRecord(body.result), `${name} resync result`);
    }
  });

  it("attach-detach: a Node event is reconciled", async () => {
    const r = await invoke(
      "attach-detach",
      urlEvent("POST", "/", {
        body: JSON.stringify({
          type: "MODIFIED",
          object: { apiVersion: "v1", kind: "Node", metadata: { name: "sandbox-node" } },
        }),
      }),
    );
    assert.equal(r.statusCode, 200, String(r.body));
    assert.equal(json(r).function, "attach-detach");
  });

  it("protection: a claim being deleted that no pod uses loses its finalizer and is gone", async () => {
    await kube.create<PersistentVolumeClaim>(persistentVolumeClaims, {
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: {
        name: "claim-protected",
        namespace: "default",
        finalizers: ["kubernetes.io/pvc-protection"],
      },
      spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
    });
    const marked = await kube.delete(persistentVolumeClaims, "claim-protected", "default");
    assert.ok(marked?.metadata.deletionTimestamp, "held by its finalizer");
    const r = await invoke(
      "protection",
      urlEvent("POST", "/", { body: JSON.stringify({ type: "MODIFIED", object: marked }) }),
    );
    assert.equal(r.statusCode, 200, String(r.body));
    assert.equal(json(r).function, "protection");
    await assert.rejects(kube.get(persistentVolumeClaims, "claim-protected", "default"), /404/);
  });

  it("admission: a PVC CREATE review is answered with the request's uid", async () => {
    const uid = randomUUID();
    const review = {
      apiVersion: "admission.k8s.io/v1",
      kind: "AdmissionReview",
      request: {
        uid,
        kind: { group: "", version: "v1", kind: "PersistentVolumeClaim" },
        resource: { group: "", version: "v1", resource: "persistentvolumeclaims" },
        requestKind: { group: "", version: "v1", kind: "PersistentVolumeClaim" },
        requestResource: { group: "", version: "v1", resource: "persistentvolumeclaims" },
        name: "claim-reviewed",
        namespace: "default",
        operation: "CREATE",
        userInfo: { username: "kubernetes-admin", groups: ["system:masters"] },
        object: {
          apiVersion: "v1",
          kind: "PersistentVolumeClaim",
          metadata: { name: "claim-reviewed", namespace: "default" },
          spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
        },
        oldObject: null,
        dryRun: false,
        options: { apiVersion: "meta.k8s.io/v1", kind: "CreateOptions" },
      },
    };
    const r = await invoke(
      "admission",
      urlEvent("POST", "/mutate/persistentvolumeclaims", { body: JSON.stringify(review) }),
    );
    assert.equal(r.statusCode, 200, String(r.body));
    const body = json(r);
    assert.equal(body.kind, "AdmissionReview");
    const response = body.response as { uid: string; allowed: boolean };
    assert.equal(response.uid, uid);
    assert.equal(response.allowed, true);
  });

  it("the token and kubeconfig come from SSM and Secrets Manager: the kubeconfig is a private file KUBECONFIG names", async () => {
    assert.ok(
      aws.seen.some((r) => r.target === "AmazonSSM.GetParameter" && r.body.Name === TOKEN_PARAMETER),
      "the token was read from its parameter",
    );
    assert.ok(
      aws.seen.some(
        (r) => r.target === "secretsmanager.GetSecretValue" && r.body.SecretId === KUBECONFIG_SECRET,
      ),
      "the kubeconfig was read from its secret",
    );
    const file = process.env.KUBECONFIG ?? "";
    assert.notEqual(file, "", "KUBECONFIG names the written file");
    assert.equal(await readFile(file, "utf8"), await readFile(sandbox.kubeconfigPath, "utf8"));
    assert.equal((await stat(file)).mode & 0o777, 0o600);
  });

  it("without a store, KUBECONFIG_DATA (base64) stands in for a kubeconfig file on a cold start", async () => {
    const saved = {
      KUBECONFIG: process.env.KUBECONFIG,
      KUBECONFIG_SECRET_ARN: process.env.KUBECONFIG_SECRET_ARN,
    };
    try {
      delete process.env.KUBECONFIG;
      delete process.env.KUBECONFIG_SECRET_ARN;
      process.env.KUBECONFIG_DATA = (await readFile(sandbox.kubeconfigPath)).toString("base64");
      // A fresh module instance is a fresh cold start.
      const cold = await loadHandler(workDir, "binder", "?cold=kubeconfig-data");
      const r = await cold(urlEvent("POST", "/resync", { body: "{}" }), lambdaContext);
      assert.equal(r.statusCode, 200, String(r.body));
      assert.notEqual(process.env.KUBECONFIG, undefined, "KUBECONFIG now names the written file");
      assert.equal(
        await readFile(process.env.KUBECONFIG ?? "", "utf8"),
        await readFile(sandbox.kubeconfigPath, "utf8"),
      );
    } finally {
      delete process.env.KUBECONFIG_DATA;
      Object.assign(process.env, saved);
    }
  });

  it("fails closed: a cold start that cannot read its token answers 503 saying so, runs nothing, and recovers once it can", async () => {
    aws.denied.add(TOKEN_PARAMETER);
    try {
      const cold = await loadHandler(workDir, "binder", "?cold=denied");
      for (const event of [urlEvent("POST", "/resync", { body: "{}" }), scheduledEvent()]) {
        const r = await cold(event, lambdaContext);
        assert.equal(r.statusCode, 503, String(r.body));
        assert.equal(r.headers?.["retry-after"], "5");
        const error = String(json(r).error);
        assert.match(error, /cannot read AUTH_TOKEN from SSM Parameter Store/);
        // The URL is public: the answer names the setting, not the parameter or AWS's text.
        assert.doesNotMatch(error, /kube-storage-functions\/auth-token|AccessDenied/);
      }
      aws.denied.delete(TOKEN_PARAMETER);
      const r = await cold(urlEvent("POST", "/resync", { body: "{}" }), lambdaContext);
      assert.equal(r.statusCode, 200, String(r.body));
    } finally {
      aws.denied.delete(TOKEN_PARAMETER);
    }
  });

  it("fails closed: with AUTH_MODE=token and no token configured anywhere, every invocation is a 503", async () => {
    const saved = process.env.AUTH_TOKEN_SSM_PARAMETER;
    const savedToken = process.env.AUTH_TOKEN;
    try {
      delete process.env.AUTH_TOKEN_SSM_PARAMETER;
      delete process.env.AUTH_TOKEN;
      const cold = await loadHandler(workDir, "protection", "?cold=no-token");
      for (const event of [
        urlEvent("POST", "/", { body: "{}", auth: false }),
        urlEvent("GET", "/healthz", { auth: false }),
      ]) {
        const r = await cold(event, lambdaContext);
        assert.equal(r.statusCode, 503, String(r.body));
        assert.match(String(json(r).error), /AUTH_TOKEN_SSM_PARAMETER or AUTH_TOKEN_SECRET_ARN/);
      }
    } finally {
      process.env.AUTH_TOKEN_SSM_PARAMETER = saved;
      if (savedToken === undefined) delete process.env.AUTH_TOKEN;
      else process.env.AUTH_TOKEN = savedToken;
    }
  });

  it("a cold start that cannot build the app answers 503 with Retry-After, and recovers on a later invocation", async () => {
    const saved = process.env.CSI_ENDPOINT;
    try {
      process.env.CSI_ENDPOINT = "not a valid endpoint";
      const cold = await loadHandler(workDir, "provisioner", "?cold=bad-endpoint");
      const first = await cold(urlEvent("GET", "/healthz", { auth: false }), lambdaContext);
      assert.equal(first.statusCode, 503);
      assert.equal(first.headers?.["retry-after"], "5");
      process.env.CSI_ENDPOINT = saved;
      const second = await cold(urlEvent("GET", "/healthz", { auth: false }), lambdaContext);
      assert.equal(second.statusCode, 200);
    } finally {
      process.env.CSI_ENDPOINT = saved;
    }
  });
});

/** Runs a command to completion; resolves with its exit code and output. */
function run(command: string, args: string[], options: { cwd: string; env: NodeJS.ProcessEnv }) {
  return new Promise<{ code: number | null; output: string }>((resolve, reject) => {
    const child = spawn(command, args, { ...options, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (d: Buffer) => {
      output += d.toString();
    });
    child.stderr.on("data", (d: Buffer) => {
      output += d.toString();
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, output }));
  });
}

describe("osls package", () => {
  it("packages the service offline: one zip per function with its bundle, URLs, Node 24, schedules", {
    timeout: 240_000,
  }, async () => {
    const service = await mkdtemp(join(tmpdir(), "ksf-osls-"));
    try {
      await copyFile(join(REPO, "serverless.yml"), join(service, "serverless.yml"));
      await mkdir(join(service, "scripts"));
      await copyFile(
        join(REPO, "scripts", "lambda-credentials.cjs"),
        join(service, "scripts", "lambda-credentials.cjs"),
      );
      await buildLambdas({ outDir: join(service, "dist", "lambda") });
      await mkdir(join(service, "home"));
      const out = join(service, "package");
      // No AWS credentials and a private HOME: packaging must not need an AWS account.
      const env: NodeJS.ProcessEnv = {
        PATH: process.env.PATH,
        HOME: join(service, "home"),
        SLS_TELEMETRY_DISABLED: "1",
        KSF_AUTH_TOKEN_SSM_PARAMETER: TOKEN_PARAMETER,
        KSF_KUBECONFIG_SECRET_ARN: KUBECONFIG_SECRET,
      };
      const result = await run(
        process.execPath,
        [
          join(REPO, "node_modules", "osls", "bin", "serverless.js"),
          "package",
          "--stage",
          "test",
          "--package",
          out,
        ],
        { cwd: service, env },
      );
      assert.equal(result.code, 0, result.output);
      const files = await readdir(out);
      for (const name of Object.keys(config.functions)) {
        assert.ok(files.includes(`${name}.zip`), `${name}.zip in ${files.join(", ")}`);
        const zip = unzipSync(new Uint8Array(await readFile(join(out, `${name}.zip`))));
        const entries = Object.keys(zip);
        assert.ok(entries.includes(`dist/lambda/${name}/index.mjs`), `${name}.zip: ${entries.join(", ")}`);
        assert.ok(
          entries.every((e) => e.startsWith(`dist/lambda/${name}/`)),
          `${name}.zip holds only its bundle`,
        );
        assert.deepEqual(
          entries,
          [`dist/lambda/${name}/index.mjs`],
          `${name}.zip: the bundle and nothing else`,
        );
      }
      const template = JSON.parse(
        await readFile(join(out, "cloudformation-template-update-stack.json"), "utf8"),
      ) as {
        Resources: Record<string, { Type: string; Properties: Record<string, unknown> }>;
      };
      const resources = Object.values(template.Resources);
      const lambdas = resources.filter((r) => r.Type === "AWS::Lambda::Function");
      assert.equal(lambdas.length, FUNCTION_NAMES.length);
      for (const fn of lambdas) assert.equal(fn.Properties.Runtime, "nodejs24.x");
      assert.equal(resources.filter((r) => r.Type === "AWS::Lambda::Url").length, FUNCTION_NAMES.length);
      assert.equal(resources.filter((r) => r.Type === "AWS::Events::Rule").length, FUNCTION_NAMES.length - 1);
      for (const fn of lambdas) {
        const variables = (fn.Properties.Environment as { Variables: Record<string, string> }).Variables;
        assert.equal(variables.AUTH_TOKEN_SSM_PARAMETER, TOKEN_PARAMETER);
        assert.equal(variables.KUBECONFIG_SECRET_ARN, KUBECONFIG_SECRET);
        assert.ok(!("AUTH_TOKEN" in variables) && !("KUBECONFIG_DATA" in variables), "no credential values");
      }
      // Capacity tracking packaged off (KSF_ENABLE_CAPACITY unset), on the provisioner only.
      const capacity = lambdas.map(
        (fn) =>
          (fn.Properties.Environment as { Variables: Record<string, string> }).Variables.ENABLE_CAPACITY,
      );
      assert.deepEqual(
        capacity.filter((v) => v !== undefined),
        ["false"],
      );
      // The role may read the parameter and the secret, and nothing else of either service.
      const roles = resources.filter((r) => r.Type === "AWS::IAM::Role");
      const statements = roles.flatMap((r) =>
        (
          (r.Properties.Policies ?? []) as { PolicyDocument: { Statement: Record<string, unknown>[] } }[]
        ).flatMap((p) => p.PolicyDocument.Statement),
      );
      const actions = (action: string) =>
        statements.filter((st) => ([] as unknown[]).concat(st.Action).includes(action));
      assert.deepEqual(
        actions("secretsmanager:GetSecretValue").flatMap((st) => ([] as unknown[]).concat(st.Resource)),
        [KUBECONFIG_SECRET],
      );
      assert.equal(actions("ssm:GetParameter").length, 1);
      assert.match(
        JSON.stringify(actions("ssm:GetParameter")[0]?.Resource),
        /:parameter\/kube-storage-functions\/auth-token"/,
      );
    } finally {
      await rm(service, { recursive: true, force: true });
    }
  });
});
