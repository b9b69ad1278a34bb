// What the image runs (deploy/Dockerfile): `npm run build:functions` output,
// started through the bundled serve.mjs with the image's NODE_OPTIONS. The
// bundles must work without node_modules beside them, so they are built into
// a temporary directory and run from there.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { FUNCTION_PROCESS_ENV } from "../../functions/node-options.ts";
import { buildFunctions, SERVE_BUNDLE } from "../../scripts/build-functions.ts";
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
