// What the image runs (deploy/Dockerfile): `npm run build:functions` output,
// started through the bundled serve.mjs with the image's NODE_OPTIONS. The
// bundles must work without node_modules beside them, so they are built into
// a temporary directory and run from there.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { codeCachePath } from "../../functions/load-bundle.ts";
import { FUNCTION_PROCESS_ENV } from "../../functions/node-options.ts";
import { buildFunctions, SERVE_BUNDLE } from "../../scripts/build-functions.ts";
import { primeCodeCache } from "../../scripts/prime-code-cache.ts";
import { startFunctionProcess } from "../helpers/function-process.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";

const REPO = join(dirname(fileURLToPath(import.meta.url)), "..", "..");

let dir: string;
let sandbox: TestSandbox;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "ksf-image-entry-"));
  await buildFunctions({ outDir: dir, names: ["binder", "provisioner"] });
  sandbox = await startTestSandbox();
});
after(async () => {
  await sandbox.close();
  await rm(dir, { recursive: true, force: true });
});

describe("image entry: bundled serve.mjs", () => {
  for (const name of ["binder", "provisioner"]) {
    it(`FUNCTION=${name} serves the bundle, with the image's environment`, async () => {
      const fn = await startFunctionProcess(
        name,
        {
          KUBECONFIG: sandbox.kubeconfigPath,
          CSI_ENDPOINT: sandbox.csiEndpoint,
          ...FUNCTION_PROCESS_ENV,
        },
        join(dir, SERVE_BUNDLE),
      );
      try {
        const health = await fetch(`${fn.url}/healthz`);
        assert.equal(health.status, 200);
        // A watch event it does not handle is still answered: the whole app is there.
        const res = await fetch(`${fn.url}/`, {
          method: "POST",
          headers: { "Content-Type": "application/json" },
          body: JSON.stringify({
            type: "ADDED",
            object: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "x" } },
          }),
        });
        assert.equal(res.status, 200, fn.stderr());
      } finally {
        assert.equal(await fn.stop(), 0);
      }
    });
  }
});

describe("image entry: the code cache written at build time", () => {
  it("is written beside each bundle, and the served function takes it without writing", async () => {
    const primed = await primeCodeCache(dir);
    assert.deepEqual(primed.functions, ["binder", "provisioner"]);
    // Each function was built before its cache was written: the provisioner introduced itself to
    // the driver as it does at start, so its first gRPC calls are in its cache too.
    assert.equal(primed.driverCalls.GetPluginInfo, 1);
    assert.equal(primed.driverCalls.ControllerGetCapabilities, 1);
    const snapshot = async (): Promise<string[]> =>
      Promise.all(
        ["binder", "provisioner"].map(async (name) => {
          const st = await stat(codeCachePath(join(dir, name, "index.cjs")));
          return `${name} ${st.size} ${st.mtimeMs}`;
        }),
      );
    const before = await snapshot();
    // Loading the modules and building compile far more than their top-level code
    // (load-bundle.ts): the provisioner's cache holds more than a MiB of it.
    assert.ok((await stat(codeCachePath(join(dir, "provisioner", "index.cjs")))).size > 1024 * 1024);
    const started = async (env: Record<string, string>) => {
      const fn = await startFunctionProcess(
        "binder",
        { KUBECONFIG: sandbox.kubeconfigPath, ...FUNCTION_PROCESS_ENV, ...env },
        join(dir, SERVE_BUNDLE),
      );
      try {
        assert.equal((await fetch(`${fn.url}/healthz`)).status, 200);
      } finally {
        assert.equal(await fn.stop(), 0);
      }
      return fn.stderr();
    };
    // With the image's environment the cache is taken: serve says nothing about it.
    assert.doesNotMatch(await started({}), /code cache/);
    // Nothing is written: the image's read-only root filesystem costs nothing.
    assert.deepEqual(await snapshot(), before);
    // Other V8 flags than those it was written with (heap sizes aside): V8 rejects it, and the
    // function still serves.
    assert.match(
      await started({ NODE_OPTIONS: `${FUNCTION_PROCESS_ENV.NODE_OPTIONS} --stack-trace-limit=50` }),
      /serve: the code cache of \S+\/binder\/index\.cjs was rejected/,
    );
  });
});

describe("npm run build:functions", () => {
  it("writes the code caches too, unless --no-code-cache", async () => {
    const out = await mkdtemp(join(tmpdir(), "ksf-build-cli-"));
    try {
      const cli = (...args: string[]) =>
        execFileSync(
          process.execPath,
          ["scripts/build-functions.ts", "--out", out, ...args, "attach-detach"],
          {
            cwd: REPO,
            encoding: "utf8",
          },
        );
      const cache = codeCachePath(join(out, "attach-detach", "index.cjs"));
      cli("--no-code-cache");
      assert.equal(existsSync(cache), false, "no cache with --no-code-cache");
      assert.match(cli(), /"codeCaches":\["attach-detach"\]/);
      assert.ok(existsSync(cache), "a cache beside the bundle");
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  });
});
