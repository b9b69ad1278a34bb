// The function bundles take some modules from scripts/bundle-shims: undici
// (the part our code and client-node use, fetch and HTTP/2 loaded on first use),
// mime-types (its tables built on first need), socks, socks-proxy-agent and
// @opentelemetry/api, body-parser and qs (loaded on first use), and the serializer of
// client-node's ListWatch (without every generated model class). Bundled
// with the functions' options, each must answer as the real module does.
// Node built-ins imported as ES modules come in through require (see
// builtinsThroughRequire in scripts/build-lambda.ts), and must work as imported.
// Beside the behaviour, each shim's surface is pinned to what the real
// modules that import it use, so a change of those packages fails here.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import { createSecureServer } from "node:http2";
import { createRequire } from "node:module";
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
const REPO = join(import.meta.dirname, "..", "..");
const run = promisify(execFile);

interface FixtureRun {
  /** The bundle's text. */
  text: string;
  /** What the bundle printed (JSON). */
  bundled: unknown;
  /** What the fixture printed run as it is (JSON). */
  unbundled: unknown;
}

/**
 * Bundles test/deploy/fixtures/<fixture> with the functions' options, checks
 * that each of `shims` stands in, then runs it bundled and as it is (each
 * prints one JSON document), with `args`.
 */
async function runFixture(
  fixture: string,
  shims: readonly string[],
  args: string[] = [],
): Promise<FixtureRun> {
  const dir = await mkdtemp(join(tmpdir(), "ksf-shim-fixture-"));
  try {
    const entry = join(FIXTURES, fixture);
    const outfile = join(dir, "entry.mjs");
    await build(bundleOptions(entry, outfile));
    const text = await readFile(outfile, "utf8");
    for (const shim of shims) assert.ok(text.includes(`scripts/bundle-shims/${shim}`), `${shim} stands in`);
    const [bundled, unbundled] = await Promise.all(
      [outfile, entry].map(async (file) => JSON.parse((await run(process.execPath, [file, ...args])).stdout)),
    );
    return { text, bundled, unbundled };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

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
    const caFile = join(dir, "ca.pem");
    await writeFile(caFile, certs.caCert);
    const { port } = server.address() as AddressInfo;
    const { port: h2Port } = h2.address() as AddressInfo;
    const { text, bundled, unbundled } = await runFixture(
      "undici-shim-entry.mjs",
      ["undici.mjs"],
      [`http://127.0.0.1:${port}`, `https://127.0.0.1:${h2Port}`, caFile],
    );
    assert.ok(!text.includes("node_modules/undici/index.js"), "undici's index is left out");
    assert.deepEqual(bundled, {
      viaAgent: [200, "GET /a?x=1"],
      viaGlobal: [200, "POST /b hi"],
      fetched: [200, "GET /c"],
      proxyAgent: "function",
      // undici's HTTP/2 half (and node:http2) loads only for a connection that negotiated h2.
      http2LoadedByHttp1: false,
      viaH2: [200, "h2 2.0 GET /d"],
    });
    // The real undici loads its HTTP/2 half at once; everything else is the same.
    assert.deepEqual(unbundled, { ...(bundled as object), http2LoadedByHttp1: true });
  } finally {
    server.close();
    h2.close();
    await rm(dir, { recursive: true, force: true });
  }
});

test("bundled mime-types: express sends the Content-Types it sends with the real module", async () => {
  const { bundled, unbundled } = await runFixture("express-content-types.mjs", ["mime-types.mjs"]);
  assert.deepEqual(bundled, unbundled);
  const real = unbundled as Record<string, [string, string]>;
  assert.deepEqual(real["/json"], ["application/json; charset=utf-8", '{"ok":true}']);
  assert.equal(
    real["/html"]?.[0],
    "text/html; charset=utf-8",
    "a lookup by extension reaches the real tables",
  );
});

test("bundled ListWatch: lists, then watches with its resourceVersion and selectors, without the model classes", async () => {
  const { text, bundled, unbundled } = await runFixture("list-watch-entry.mjs", [
    "client-node-serializer.mjs",
  ]);
  assert.ok(!text.includes("gen/models/ObjectSerializer.js"), "no generated model classes");
  assert.deepEqual(bundled, unbundled, "as with client-node's own serializer");
  assert.deepEqual(bundled, [
    {
      path: "/api/v1/persistentvolumes",
      queryParams: { resourceVersion: "42", labelSelector: "app=db", fieldSelector: "spec.x=y" },
    },
  ]);
});

test("bundled socks, socks-proxy-agent and @opentelemetry/api: loaded on first use, used as the real packages", async () => {
  const { bundled, unbundled } = await runFixture("lazy-packages-entry.mjs", [
    "socks.mjs",
    "socks-proxy-agent.mjs",
    "opentelemetry-api.mjs",
  ]);
  assert.deepEqual(bundled, unbundled);
  const real = unbundled as { socksError: unknown };
  assert.deepEqual(
    { ...real, socksError: typeof real.socksError },
    {
      agent: "SocksProxyAgent",
      proxy: { host: "127.0.0.1", port: 1080, type: 5 },
      keepAlive: true,
      span: null,
      socksError: "string",
    },
  );
});

test("bundled body-parser and qs: express's parsers and extended query parser work as with the real packages", async () => {
  const { bundled, unbundled } = await runFixture("express-body-parsers-entry.mjs", [
    "body-parser.mjs",
    "qs.mjs",
  ]);
  assert.deepEqual(bundled, unbundled);
  assert.deepEqual(unbundled, {
    json: [200, { body: { x: [1, 2] }, query: { a: { b: "1" }, c: "2" } }],
    form: [200, { body: { a: { b: ["c", "d"] } } }],
    text: [200, { body: "hello" }],
    raw: [200, { bytes: 5 }],
    badJson: 400,
  });
});

test("bundled built-in imports work as ES imports do, without the module facade that loads Node's undici", async () => {
  const result = await runFixture("builtin-imports-entry.mjs", []);
  const bundled = result.bundled as Record<string, unknown>;
  const unbundled = result.unbundled as Record<string, unknown>;
  // The facade of node:http reads its lazy WebSocket export: that is the cost avoided.
  assert.equal(unbundled.undiciLoaded, true, "an ES import of node:http loads Node's undici");
  assert.equal(bundled.undiciLoaded, false, "the bundle's require of node:http does not");
  assert.deepEqual({ ...bundled, undiciLoaded: true }, unbundled);
  assert.deepEqual(
    { answer: bundled.answer, notFound: bundled.notFound, formatted: bundled.formatted },
    { answer: "200 pong", notFound: "Not Found", formatted: "a=1" },
  );
});

/**
 * What each shim stands in for, and for whom: the modules whose import of
 * `specifier` the bundles resolve to the shim, and every member those modules
 * use of it (a dotted chain, "()" for a call of the module itself). A shim
 * offers exactly that surface, so a new importer, or an importer that starts
 * using more of the package, fails here instead of in a deployed bundle.
 */
const SHIMS: Readonly<Record<string, { specifier: string; importers: string[]; surface: string[] }>> = {
  "body-parser.mjs": {
    specifier: "body-parser",
    importers: ["node_modules/express/lib/express.js"],
    surface: ["json", "raw", "text", "urlencoded"],
  },
  "client-node-serializer.mjs": {
    specifier: "./serializer.js",
    importers: ["node_modules/@kubernetes/client-node/dist/cache.js"],
    surface: ["ObjectSerializer", "ObjectSerializer.serialize"],
  },
  "mime-types.mjs": {
    specifier: "mime-types",
    importers: [
      "node_modules/accepts/index.js",
      "node_modules/express/lib/response.js",
      "node_modules/express/lib/utils.js",
      "node_modules/send/index.js",
      "node_modules/type-is/index.js",
    ],
    surface: ["contentType", "lookup"],
  },
  "opentelemetry-api.mjs": {
    specifier: "@opentelemetry/api",
    importers: ["node_modules/prom-client/lib/metrics/processCpuTotal.js"],
    surface: ["context.active", "trace.getSpan"],
  },
  "qs.mjs": {
    specifier: "qs",
    importers: ["node_modules/body-parser/lib/types/urlencoded.js", "node_modules/express/lib/utils.js"],
    surface: ["parse"],
  },
  "socks-proxy-agent.mjs": {
    specifier: "socks-proxy-agent",
    importers: ["node_modules/@kubernetes/client-node/dist/config.js"],
    surface: ["SocksProxyAgent"],
  },
  "socks.mjs": {
    specifier: "socks",
    importers: [
      "node_modules/@kubernetes/client-node/dist/config.js",
      "node_modules/socks-proxy-agent/dist/index.js",
    ],
    surface: ["SocksClient", "SocksClient.createConnection"],
  },
  "undici-client-h2.cjs": {
    specifier: "./client-h2.js",
    importers: ["node_modules/undici/lib/dispatcher/client.js"],
    surface: ["()"],
  },
  "undici.mjs": {
    specifier: "undici",
    importers: [
      "node_modules/@kubernetes/client-node/dist/config.js",
      "node_modules/@kubernetes/client-node/dist/gen/http/isomorphic-fetch.js",
      "node_modules/@kubernetes/client-node/dist/health.js",
      "node_modules/@kubernetes/client-node/dist/log.js",
      "node_modules/@kubernetes/client-node/dist/metrics.js",
      "node_modules/@kubernetes/client-node/dist/watch.js",
      "shared/kube/json-client.ts",
      "shared/kube/kube-watch.ts",
    ],
    surface: ["Agent", "ProxyAgent", "fetch", "request"],
  },
};

/** A metafile path as seen from the repository, wherever node_modules really lies. */
function repoPath(path: string): string {
  const at = path.lastIndexOf("node_modules/");
  return at === -1 ? path : path.slice(at);
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\/]/g, "\\$&");
}

/**
 * The members of `specifier` that a module's source uses: through a binding
 * of the whole module (`const x = require(...)`, `import x from`), each
 * `x.a.b` as "a.b" and a call `x(...)` as "()"; through named imports (types
 * aside), each name and each chain on it ("SocksClient.createConnection").
 */
function usesOf(text: string, specifier: string): Set<string> {
  // Comment lines aside (a source map's URL, a JSDoc example).
  const source = text.replace(/^\s*(\/\/|\/\*|\*).*$/gm, "");
  const spec = escapeRegExp(specifier);
  const bindings: { local: string; prefix: string }[] = [];
  const whole = new RegExp(
    `(?:(?:var|let|const)\\s+(\\w+)\\s*=\\s*require\\(\\s*['"]${spec}['"]\\s*\\)|import\\s+(?:\\*\\s+as\\s+)?(\\w+)\\s+from\\s*['"]${spec}['"])`,
    "g",
  );
  for (const m of source.matchAll(whole)) bindings.push({ local: m[1] ?? m[2] ?? "", prefix: "" });
  const uses = new Set<string>();
  for (const m of source.matchAll(new RegExp(`import\\s*\\{([^}]*)\\}\\s*from\\s*['"]${spec}['"]`, "g"))) {
    for (const part of (m[1] ?? "").split(",").map((p) => p.trim())) {
      if (part === "" || part.startsWith("type ")) continue;
      const [name = "", local = name] = part.split(/\s+as\s+/);
      uses.add(name);
      bindings.push({ local, prefix: name });
    }
  }
  for (const { local, prefix } of bindings) {
    for (const m of source.matchAll(new RegExp(`(?<![\\w.$])${local}((?:\\.\\w+)*)(\\s*\\()?`, "g"))) {
      const chain = m[1] ?? "";
      if (prefix !== "") uses.add(`${prefix}${chain}`);
      else if (chain !== "") uses.add(chain.slice(1));
      else if (m[2] !== undefined) uses.add("()");
    }
  }
  return uses;
}

/** Whether `module` has what `use` names: a function for "()", else a defined value at the dotted chain. */
function offers(module: unknown, use: string): boolean {
  if (use === "()") return typeof module === "function";
  let value: unknown = module;
  for (const key of use.split(".")) {
    if ((typeof value !== "object" && typeof value !== "function") || value === null) return false;
    value = (value as Record<string, unknown>)[key];
  }
  return value !== undefined;
}

test("each shim stands in where expected and offers exactly what its importers use, as the real module does", async () => {
  const outDir = await mkdtemp(join(tmpdir(), "ksf-shim-importers-"));
  try {
    const importers = new Map<string, Set<string>>();
    for (const b of await buildFunctions({ outDir })) {
      const text = await readFile(b.file, "utf8");
      assert.ok(!/[\u0080-\uffff]/.test(text), `${b.name}: the bundle is ASCII only`);
      // The banner's node:module is the one built-in left as an ES import.
      const esImports = text.match(/^import .* from ["'][^"'.][^"']*["'];?$/gm) ?? [];
      assert.deepEqual(esImports, [], `${b.name}: static ES imports ${JSON.stringify(esImports)}`);
      for (const [path, input] of Object.entries(b.metafile.inputs)) {
        if (path.startsWith("scripts/bundle-shims/")) continue;
        for (const imp of input.imports) {
          if (!imp.path.startsWith("scripts/bundle-shims/")) continue;
          const shim = imp.path.slice("scripts/bundle-shims/".length);
          const expected = SHIMS[shim];
          assert.ok(
            expected !== undefined,
            `${b.name}: ${path} imports ${shim}, which this test does not know`,
          );
          assert.equal(imp.original, expected.specifier, `${shim} stands in for ${expected.specifier}`);
          const found = importers.get(shim) ?? new Set<string>();
          importers.set(shim, found.add(repoPath(path)));
        }
      }
    }
    const files = (await readdir(join(REPO, "scripts", "bundle-shims"))).filter(
      (f) => f !== "on-first-use.mjs",
    );
    assert.deepEqual([...importers.keys()].sort(), files.sort(), "every shim stands in somewhere");
    for (const [shim, { specifier, importers: wanted, surface }] of Object.entries(SHIMS)) {
      assert.deepEqual([...(importers.get(shim) ?? [])].sort(), wanted, `${shim}: importers`);
      const used = new Set<string>();
      for (const importer of wanted) {
        const file = join(REPO, importer);
        const uses = usesOf(await readFile(file, "utf8"), specifier);
        assert.ok(uses.size > 0, `${importer} uses something of ${specifier}`);
        for (const use of uses) used.add(use);
        // The real module, as the importer would load it, has each of them.
        const real: unknown = createRequire(file)(specifier);
        for (const use of uses)
          assert.ok(offers(real, use), `the real ${specifier} offers ${use} to ${importer}`);
      }
      assert.deepEqual([...used].sort(), surface, `${shim}: what its importers use of ${specifier}`);
      const module: unknown = createRequire(import.meta.filename)(
        join(REPO, "scripts", "bundle-shims", shim),
      );
      for (const use of surface) assert.ok(offers(module, use), `${shim} offers ${use}`);
      const exported = shim.endsWith(".cjs") ? ["()"] : Object.keys(module as object);
      const top = new Set(surface.map((use) => use.split(".")[0]));
      assert.deepEqual(exported.sort(), [...top].sort(), `${shim} exports no more than is used`);
    }
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
