// What the image runs (deploy/Dockerfile): `npm run build:functions` output,
// started through the bundled serve.mjs with the image's NODE_OPTIONS. The
// bundles must work without node_modules beside them, so they are built into
// a temporary directory and run from there.
import assert from "node:assert/strict";
import { mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { FUNCTION_PROCESS_ENV } from "../../functions/node-options.ts";
import { buildFunctions, SERVE_BUNDLE } from "../../scripts/build-functions.ts";
import { primeCompileCache } from "../../scripts/prime-compile-cache.ts";
import { startFunctionProcess } from "../helpers/function-process.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";

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

describe("image entry: the compile cache primed at build time", () => {
  it("has an entry for serve.mjs and each bundle, which the served function compiles from without writing", async () => {
    const cache = join(dir, "compile-cache");
    const primed = await primeCompileCache(dir, cache);
    assert.deepEqual(
      primed.map((f) => f.slice(dir.length + 1)),
      [SERVE_BUNDLE, "binder/index.mjs", "provisioner/index.mjs"],
    );
    // One directory per Node version and user id, holding an entry per module compiled.
    const [versioned, ...others] = await readdir(cache);
    assert.ok(versioned, "a cache for this node and user");
    assert.deepEqual(others, []);
    assert.ok(versioned.endsWith(`-${process.getuid?.() ?? 0}`), versioned);
    const entries = await readdir(join(cache, versioned));
    assert.ok(entries.length >= primed.length, `${entries.length} entries`);
    const snapshot = async (): Promise<string[]> =>
      Promise.all(
        (await readdir(join(cache, versioned))).map(async (e) => {
          const st = await stat(join(cache, versioned, e));
          return `${e} ${st.size} ${st.mtimeMs}`;
        }),
      );
    const before = await snapshot();
    const fn = await startFunctionProcess(
      "binder",
      {
        KUBECONFIG: sandbox.kubeconfigPath,
        ...FUNCTION_PROCESS_ENV,
        NODE_COMPILE_CACHE: cache,
        NODE_DEBUG_NATIVE: "COMPILE_CACHE",
      },
      join(dir, SERVE_BUNDLE),
    );
    try {
      assert.equal((await fetch(`${fn.url}/healthz`)).status, 200);
    } finally {
      assert.equal(await fn.stop(), 0);
    }
    // Nothing to write: the image's read-only root filesystem costs nothing.
    assert.deepEqual(await snapshot(), before);
    for (const bundle of [SERVE_BUNDLE, "binder/index.mjs"])
      assert.match(
        fn.stderr(),
        new RegExp(`V8 code cache for ESM \\S+/${bundle.replace(".", "\\.")} was accepted`),
        `${bundle} compiled from the cache`,
      );
  });
});
