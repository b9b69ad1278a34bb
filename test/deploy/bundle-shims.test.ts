// The function bundles take some modules from scripts/bundle-shims: undici
// (the part our code and client-node use, fetch and HTTP/2 loaded on first use),
// mime-types (its tables built on first need), socks, socks-proxy-agent and
// @opentelemetry/api, body-parser and qs (loaded on first use), and the serializer of
// client-node's ListWatch (without every generated model class). Bundled
// with the functions' options, each must answer as the real module does.
// Node built-ins imported as ES modules come in through require (see
// builtinsThroughRequire in scripts/build-lambda.ts), and must work as imported.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import { createSecureServer } from "node:http2";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { promisify } from "node:util";
import { build, stop as stopEsbuild } from "esbuild";
import { buildFunctions } from "../../scripts/build-functions.ts";
import { asciiOnly, bundleOptions } from "../../scripts/build-lambda.ts";
import { generateCertificates } from "../../shared/tls/certificates.ts";

const FIXTURES = join(import.meta.dirname, "fixtures");
const ENTRY = join(FIXTURES, "undici-shim-entry.mjs");
const run = promisify(execFile);

test("bundled undici: request on an agent and on the global dispatcher, fetch, and HTTP/2 on first use, reach the servers", async () => {
  const dir = await mkdtemp(join(tmpdir(), "ksf-undici-shim-"));
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (d: Buffer) => {
      body += d.toString();
    });
    req.on("end", () => res.end(`${req.method} ${req.url} ${body}`.trim()));
  });
  const certs = generateCertificates({ service: "h2", namespace: "test", extraDnsNames: ["127.0.0.1"] });
  const h2 = createSecureServer({ cert: certs.cert, key: certs.key }, (req, res) =>
    res.end(`h2 ${req.httpVersion} ${req.method} ${req.url}`),
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  await new Promise<void>((resolve) => h2.listen(0, "127.0.0.1", resolve));
  try {
    const outfile = join(dir, "entry.mjs");
    const caFile = join(dir, "ca.pem");
    await writeFile(caFile, certs.caCert);
    await build(bundleOptions(ENTRY, outfile));
    const bundled = await readFile(outfile, "utf8");
    assert.ok(bundled.includes("scripts/bundle-shims/undici.mjs"), "the shim stands in for undici");
    assert.ok(!bundled.includes("node_modules/undici/index.js"), "undici's index is left out");
    const { port } = server.address() as AddressInfo;
    const { port: h2Port } = h2.address() as AddressInfo;
    const { stdout } = await run(process.execPath, [
      outfile,
      `http://127.0.0.1:${port}`,
      `https://127.0.0.1:${h2Port}`,
      caFile,
    ]);
    assert.deepEqual(JSON.parse(stdout), {
      viaAgent: [200, "GET /a?x=1"],
      viaGlobal: [200, "POST /b hi"],
      fetched: [200, "GET /c"],
      proxyAgent: "function",
      // undici's HTTP/2 half (and node:http2) loads only for a connection that negotiated h2.
      http2LoadedByHttp1: false,
      viaH2: [200, "h2 2.0 GET /d"],
    });
  } finally {
    server.close();
    h2.close();
    await rm(dir, { recursive: true, force: true });
  }
});

test("bundled mime-types: express sends the Content-Types it sends with the real module", async () => {
  const dir = await mkdtemp(join(tmpdir(), "ksf-mime-shim-"));
  try {
    const entry = join(FIXTURES, "express-content-types.mjs");
    const outfile = join(dir, "entry.mjs");
    await build(bundleOptions(entry, outfile));
    const bundled = await readFile(outfile, "utf8");
    assert.ok(bundled.includes("scripts/bundle-shims/mime-types.mjs"), "the shim stands in for mime-types");
    const real = JSON.parse((await run(process.execPath, [entry])).stdout) as Record<
      string,
      [string, string]
    >;
    const shimmed = JSON.parse((await run(process.execPath, [outfile])).stdout) as Record<
      string,
      [string, string]
    >;
    assert.deepEqual(shimmed, real);
    assert.deepEqual(real["/json"], ["application/json; charset=utf-8", '{"ok":true}']);
    assert.equal(
      real["/html"]?.[0],
      "text/html; charset=utf-8",
      "a lookup by extension reaches the real tables",
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("bundled ListWatch: lists, then watches with its resourceVersion and selectors, without the model classes", async () => {
  const dir = await mkdtemp(join(tmpdir(), "ksf-listwatch-shim-"));
  try {
    const outfile = join(dir, "entry.mjs");
    await build(bundleOptions(join(FIXTURES, "list-watch-entry.mjs"), outfile));
    const bundled = await readFile(outfile, "utf8");
    assert.ok(bundled.includes("scripts/bundle-shims/client-node-serializer.mjs"), "the shim stands in");
    assert.ok(!bundled.includes("gen/models/ObjectSerializer.js"), "no generated model classes");
    const { stdout } = await run(process.execPath, [outfile]);
    const real = await run(process.execPath, [join(FIXTURES, "list-watch-entry.mjs")]);
    assert.deepEqual(JSON.parse(stdout), JSON.parse(real.stdout), "as with client-node's own serializer");
    assert.deepEqual(JSON.parse(stdout), [
      {
        path: "/api/v1/persistentvolumes",
        queryParams: { resourceVersion: "42", labelSelector: "app=db", fieldSelector: "spec.x=y" },
      },
    ]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("bundled socks, socks-proxy-agent and @opentelemetry/api: loaded on first use, used as the real packages", async () => {
  const dir = await mkdtemp(join(tmpdir(), "ksf-lazy-shims-"));
  try {
    const entry = join(FIXTURES, "lazy-packages-entry.mjs");
    const outfile = join(dir, "entry.mjs");
    await build(bundleOptions(entry, outfile));
    const bundled = await readFile(outfile, "utf8");
    for (const shim of ["socks.mjs", "socks-proxy-agent.mjs", "opentelemetry-api.mjs"])
      assert.ok(bundled.includes(`scripts/bundle-shims/${shim}`), `${shim} stands in`);
    const real = JSON.parse((await run(process.execPath, [entry])).stdout) as object;
    const shimmed = JSON.parse((await run(process.execPath, [outfile])).stdout) as object;
    assert.deepEqual(shimmed, real);
    assert.deepEqual(
      { ...real, socksError: typeof (real as { socksError: unknown }).socksError },
      {
        agent: "SocksProxyAgent",
        proxy: { host: "127.0.0.1", port: 1080, type: 5 },
        keepAlive: true,
        span: null,
        socksError: "string",
      },
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("bundled body-parser and qs: express's parsers and extended query parser work as with the real packages", async () => {
  const dir = await mkdtemp(join(tmpdir(), "ksf-body-parser-shim-"));
  try {
    const entry = join(FIXTURES, "express-body-parsers-entry.mjs");
    const outfile = join(dir, "entry.mjs");
    await build(bundleOptions(entry, outfile));
    const bundled = await readFile(outfile, "utf8");
    for (const shim of ["body-parser.mjs", "qs.mjs"])
      assert.ok(bundled.includes(`scripts/bundle-shims/${shim}`), `${shim} stands in`);
    const real = JSON.parse((await run(process.execPath, [entry])).stdout) as object;
    const shimmed = JSON.parse((await run(process.execPath, [outfile])).stdout) as object;
    assert.deepEqual(shimmed, real);
    assert.deepEqual(real, {
      json: [200, { body: { x: [1, 2] }, query: { a: { b: "1" }, c: "2" } }],
      form: [200, { body: { a: { b: ["c", "d"] } } }],
      text: [200, { body: "hello" }],
      raw: [200, { bytes: 5 }],
      badJson: 400,
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("bundled built-in imports work as ES imports do, without the module facade that loads Node's undici", async () => {
  const dir = await mkdtemp(join(tmpdir(), "ksf-builtins-"));
  try {
    const entry = join(FIXTURES, "builtin-imports-entry.mjs");
    const outfile = join(dir, "entry.mjs");
    await build(bundleOptions(entry, outfile));
    const unbundled = JSON.parse((await run(process.execPath, [entry])).stdout);
    const bundled = JSON.parse((await run(process.execPath, [outfile])).stdout);
    // The facade of node:http reads its lazy WebSocket export: that is the cost avoided.
    assert.equal(unbundled.undiciLoaded, true, "an ES import of node:http loads Node's undici");
    assert.equal(bundled.undiciLoaded, false, "the bundle's require of node:http does not");
    assert.deepEqual({ ...bundled, undiciLoaded: true }, unbundled);
    assert.deepEqual(
      { answer: bundled.answer, notFound: bundled.notFound, formatted: bundled.formatted },
      { answer: "200 pong", notFound: "Not Found", formatted: "a=1" },
    );
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("in the function bundles, the lazily loaded packages are imported only where their shims expect", async () => {
  const outDir = await mkdtemp(join(tmpdir(), "ksf-shim-importers-"));
  try {
    const expected: Record<string, string[]> = {
      socks: [
        "node_modules/@kubernetes/client-node/dist/config.js",
        "node_modules/socks-proxy-agent/dist/index.js",
      ],
      "socks-proxy-agent": ["node_modules/@kubernetes/client-node/dist/config.js"],
      "@opentelemetry/api": ["node_modules/prom-client/lib/metrics/processCpuTotal.js"],
      "body-parser": ["node_modules/express/lib/express.js"],
      qs: ["node_modules/express/lib/utils.js", "node_modules/body-parser/lib/types/urlencoded.js"],
    };
    const seen = new Set<string>();
    for (const b of await buildFunctions({ outDir })) {
      const text = await readFile(b.file, "utf8");
      assert.ok(!/[\u0080-\uffff]/.test(text), `${b.name}: the bundle is ASCII only`);
      // The banner's node:module is the one built-in left as an ES import.
      const esImports =
        (await readFile(b.file, "utf8")).match(/^import .* from ["'][^"'.][^"']*["'];?$/gm) ?? [];
      assert.deepEqual(esImports, [], `${b.name}: static ES imports ${JSON.stringify(esImports)}`);
      for (const [path, input] of Object.entries(b.metafile.inputs)) {
        if (path.startsWith("scripts/bundle-shims/")) continue;
        for (const imp of input.imports) {
          const wanted = imp.original === undefined ? undefined : expected[imp.original];
          if (wanted === undefined || imp.original === undefined) continue;
          assert.ok(wanted.includes(path), `${b.name}: ${imp.original} imported by ${path}`);
          seen.add(imp.original);
        }
      }
    }
    assert.deepEqual([...seen].sort(), Object.keys(expected).sort(), "each shimmed package is imported");
  } finally {
    await stopEsbuild();
    await rm(outDir, { recursive: true, force: true });
  }
});

test("asciiOnly escapes what esbuild leaves in comments, and the code means what it meant", () => {
  const source =
    'const s = "caf\u00e9 \u{1F600}"; // it\u2019s \u00e9t\u00e9\nconst r = /\u00e9+/.test("\u00e9\u00e9");';
  const escaped = asciiOnly(source);
  assert.ok(!/[\u0080-\uffff]/.test(escaped), escaped);
  assert.match(escaped, /\/\/ it\\u2019s \\u00e9t\\u00e9/);
  const run = (code: string): unknown => new Function(`${code}\nreturn [s, r];`)();
  assert.deepEqual(run(escaped), ["caf\u00e9 \u{1F600}", true]);
  assert.deepEqual(run(escaped), run(source));
});
