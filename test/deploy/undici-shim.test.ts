// The function bundles get undici through scripts/bundle-shims/undici.mjs
// (the part our code and client-node use, fetch loaded on first use). Bundled
// with the same options as the functions, its request (on a given agent and
// on the global one) and fetch must reach a real server as undici's own do.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { build } from "esbuild";
import { bundleOptions } from "../../scripts/build-lambda.ts";

const ENTRY = join(import.meta.dirname, "fixtures", "undici-shim-entry.mjs");

test("bundled undici: request on an agent and on the global dispatcher, and fetch, reach the server", async () => {
  const dir = await mkdtemp(join(tmpdir(), "ksf-undici-shim-"));
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (d: Buffer) => {
      body += d.toString();
    });
    req.on("end", () => res.end(`${req.method} ${req.url} ${body}`.trim()));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const outfile = join(dir, "entry.mjs");
    await build(bundleOptions(ENTRY, outfile));
    const bundled = await readFile(outfile, "utf8");
    assert.ok(bundled.includes("scripts/bundle-shims/undici.mjs"), "the shim stands in for undici");
    assert.ok(!bundled.includes("node_modules/undici/index.js"), "undici's index is left out");
    const { port } = server.address() as AddressInfo;
    const { stdout } = await promisify(execFile)(process.execPath, [outfile, `http://127.0.0.1:${port}`]);
    assert.deepEqual(JSON.parse(stdout), {
      viaAgent: [200, "GET /a?x=1"],
      viaGlobal: [200, "POST /b hi"],
      fetched: [200, "GET /c"],
      proxyAgent: "function",
    });
  } finally {
    server.close();
    await rm(dir, { recursive: true, force: true });
  }
});
