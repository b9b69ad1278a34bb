// `npm run build:lambda`: one self-contained ES module per function for AWS
// Lambda, dist/lambda/<name>/index.mjs exporting `handler` (serverless.yml
// names `dist/lambda/<name>/index.handler`).
//
// Why a bundle: Lambda's Node runtime loads .js/.mjs/.cjs handlers only, and
// a bundle of just the reachable code keeps the zip small and the cold start
// short. esbuild strips the types the way Node does (erasable syntax only).
// Nothing is opened beside the bundle at run time (csi.proto comes in as the
// static code and tables of npm run generate:csi). bundleFunctions is the
// bundler itself; scripts/build-functions.ts uses it for the container
// entries (functions/<name>/main.ts).
//
//   npm run build:lambda [-- --out DIR] [--no-credentials-check] [NAME ...]
//
// It refuses (exit 2) unless the environment names where the functions read
// their bearer token and kubeconfig (KSF_AUTH_TOKEN_SSM_PARAMETER or
// KSF_AUTH_TOKEN_SECRET_ARN, KSF_KUBECONFIG_SSM_PARAMETER or
// KSF_KUBECONFIG_SECRET_ARN; scripts/lambda-credentials.cjs), because
// `npm run package:lambda` and a deploy run it first and a function without
// them could only answer 503. --no-credentials-check builds the bundles
// alone; osls still refuses to package without them.

import { mkdir, rm, writeFile } from "node:fs/promises";
import { createRequire, isBuiltin } from "node:module";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { type BuildOptions, build, type Metafile, type Plugin } from "esbuild";
import { FUNCTION_NAMES } from "../functions/serve.ts";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const DEFAULT_OUT_DIR = join(REPO, "dist", "lambda");

/** Which module of functions/<name>/ a bundle starts from: `lambda.ts` (exports `handler`) or `main.ts` (serves). */
type FunctionEntry = "lambda" | "main";

export interface BuiltLambda {
  name: string;
  /** Absolute path of the bundle. */
  file: string;
  /** esbuild's metafile: every input and its size in the bundle (what startup has to parse). */
  metafile: Metafile;
}

/**
 * "esm": an ES module, `<name>/index.mjs` (Lambda loads handlers this way).
 * "cjs": a CommonJS module, `<name>/index.cjs`, for functions/load-bundle.ts,
 * which runs it with a V8 code cache made after its modules were evaluated.
 * The file holds the module already wrapped in the function Node wraps
 * modules in (BUNDLE_WRAPPER), so the loader compiles its text as it is,
 * without a second copy of the source in the heap.
 */
type BundleFormat = "esm" | "cjs";

interface BundleOptions {
  /** Where `<name>/index.mjs` (or `.cjs`) go. */
  outDir: string;
  entry: FunctionEntry;
  /** Default "esm". */
  format?: BundleFormat;
  names?: readonly string[];
  /** The names it may build, and builds by default. Default FUNCTION_NAMES. */
  known?: readonly string[];
  /** Also write `<name>/meta.json` (esbuild's metafile) beside each bundle. Default false. */
  writeMetafile?: boolean;
}

/**
 * @kubernetes/client-node's index re-exports its generated API clients and
 * every model, and the package does not declare itself free of side effects,
 * so a bundle would carry and evaluate all of them at start. Its modules only
 * define things, so they may be dropped when nothing of theirs is used.
 */
const clientNodeWithoutSideEffects: Plugin = {
  name: "client-node-without-side-effects",
  setup(b) {
    const inClientNode = (path: string) => path.includes("/node_modules/@kubernetes/client-node/");
    // Its own relative imports name the file exactly ("./config.js"), so resolving them is a join.
    b.onResolve({ filter: /^\.\.?\// }, (args) =>
      inClientNode(args.importer)
        ? { path: resolve(args.resolveDir, args.path), sideEffects: false }
        : undefined,
    );
    b.onResolve({ filter: /^@kubernetes\/client-node$/ }, () => ({
      path: fileURLToPath(import.meta.resolve("@kubernetes/client-node")),
      sideEffects: false,
    }));
  },
};

/**
 * Packages a bundle takes from scripts/bundle-shims instead (each file says
 * why). A shim that loads its real package imports it by name, and that
 * import resolves to the package itself.
 */
const SHIMMED_PACKAGES: Readonly<Record<string, string>> = {
  undici: "undici.mjs",
  "mime-types": "mime-types.mjs",
  socks: "socks.mjs",
  "socks-proxy-agent": "socks-proxy-agent.mjs",
  "@opentelemetry/api": "opentelemetry-api.mjs",
  "body-parser": "body-parser.mjs",
  qs: "qs.mjs",
};

const SHIMMED_PACKAGE_NAMES = new RegExp(
  `^(${Object.keys(SHIMMED_PACKAGES)
    .map((name) => name.replace(/[/.]/g, "\\$&"))
    .join("|")})$`,
);

const bundleShims: Plugin = {
  name: "bundle-shims",
  setup(b) {
    b.onResolve({ filter: SHIMMED_PACKAGE_NAMES }, (args) => {
      const file = SHIMMED_PACKAGES[args.path];
      if (file === undefined) return undefined;
      const shim = join(REPO, "scripts", "bundle-shims", file);
      return args.importer === shim ? undefined : { path: shim };
    });
    // undici's Client requires its HTTP/2 half (and node:http2) at load; the shim loads it on first use.
    b.onResolve({ filter: /^\.\/client-h2\.js$/ }, (args) =>
      args.importer.endsWith("/node_modules/undici/lib/dispatcher/client.js")
        ? { path: join(REPO, "scripts", "bundle-shims", "undici-client-h2.cjs") }
        : undefined,
    );
    // client-node's ListWatch imports its serializer only to pass selector strings through;
    // the shim spares the bundle every generated model class the real one imports.
    b.onResolve({ filter: /^\.\/serializer\.js$/ }, (args) =>
      args.importer.endsWith("/node_modules/@kubernetes/client-node/dist/cache.js")
        ? { path: join(REPO, "scripts", "bundle-shims", "client-node-serializer.mjs") }
        : undefined,
    );
  },
};

/**
 * Node built-ins reached by `import` come in through `require` instead: the
 * module facade of an ES import reads every export, and some are getters that
 * load whole subsystems (`node:http`'s WebSocket loads Node's internal undici),
 * while `require` hands over the exports object unread. Each such import
 * becomes a tiny CommonJS module that requires the built-in.
 */
const builtinsThroughRequire: Plugin = {
  name: "builtins-through-require",
  setup(b) {
    b.onResolve({ filter: /^(node:)?[a-z_0-9]+(\/[a-z_0-9]+)?$/ }, (args) =>
      args.kind === "import-statement" && isBuiltin(args.path)
        ? { path: args.path, namespace: "builtin-through-require" }
        : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: "builtin-through-require" }, (args) => ({
      contents: `module.exports = require(${JSON.stringify(args.path)});`,
      loader: "js",
    }));
  },
};

/** Around a "cjs" bundle: its value is the function load-bundle.ts calls as Node calls a module's. */
export const BUNDLE_WRAPPER = {
  start: "(function (exports, require, module, __filename, __dirname) {",
  end: "\n})",
} as const;

/** The launcher bundle beside the function bundles of build:functions (functions/serve.ts). */
export const SERVE_BUNDLE = "serve.mjs";

/** A function's bundle in its directory: index.mjs or index.cjs. */
export function bundleFileName(format: BundleFormat): string {
  return format === "esm" ? "index.mjs" : "index.cjs";
}

/** How every bundle is built: one ES module (or CommonJS script) for Node 24 from one entry. */
export function bundleOptions(
  entryPoint: string,
  outfile: string,
  format: BundleFormat = "esm",
): BuildOptions & { metafile: true } {
  return {
    entryPoints: [entryPoint],
    outfile,
    bundle: true,
    platform: "node",
    format,
    target: "node24",
    // No source map: the bundle is not minified, so stack traces stay readable without one.
    metafile: true,
    logLevel: "warning",
    // The shims first: they take some of client-node's own relative imports too.
    plugins: [builtinsThroughRequire, bundleShims, clientNodeWithoutSideEffects],
    // CommonJS dependencies call require() for Node built-ins; an ES module has no require of its own.
    ...(format === "esm"
      ? {
          banner: {
            js: "import { createRequire as __ksfCreateRequire } from 'node:module'; const require = __ksfCreateRequire(import.meta.url);",
          },
        }
      : { banner: { js: BUNDLE_WRAPPER.start }, footer: { js: BUNDLE_WRAPPER.end } }),
  };
}

/**
 * Source text as ASCII: every other character as a \u escape. esbuild
 * escapes everything but comments, and one non-ASCII character in a
 * dependency's comment makes V8 hold the whole source as two-byte text,
 * slower to read and compile. In a comment the escape is text like any
 * other, and anywhere else it means the same character.
 */
export function asciiOnly(source: string): string {
  return source.replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** One bundle written to `outfile`, ASCII only (see asciiOnly); returns esbuild's metafile. */
export async function buildBundle(
  entryPoint: string,
  outfile: string,
  format: BundleFormat = "esm",
): Promise<Metafile> {
  const result = await build({ ...bundleOptions(entryPoint, outfile, format), write: false });
  const output = result.outputFiles.find((f) => f.path === resolve(outfile));
  if (output === undefined) throw new Error(`esbuild wrote no ${outfile}`);
  await writeFile(outfile, asciiOnly(output.text));
  return result.metafile;
}

/**
 * One self-contained bundle per function, `<outDir>/<name>/index.mjs` (or
 * `index.cjs`, see BundleFormat), from `functions/<name>/<entry>.ts`. Shared
 * by `npm run build:lambda` and `npm run build:functions`.
 */
export async function bundleFunctions(options: BundleOptions): Promise<BuiltLambda[]> {
  const outDir = resolve(options.outDir);
  const known: readonly string[] = options.known ?? FUNCTION_NAMES;
  const names = options.names ?? known;
  const built: BuiltLambda[] = [];
  for (const name of names) {
    if (!known.includes(name))
      throw new Error(`unknown function ${name}; expected one of ${known.join(", ")}`);
    const dir = join(outDir, name);
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir, { recursive: true });
    const format = options.format ?? "esm";
    const file = join(dir, bundleFileName(format));
    const metafile = await buildBundle(join(REPO, "functions", name, `${options.entry}.ts`), file, format);
    if (options.writeMetafile) await writeFile(join(dir, "meta.json"), JSON.stringify(metafile));
    built.push({ name, file, metafile });
  }
  return built;
}

/** The Lambda bundles: `functions/<name>/lambda.ts` into `dist/lambda/<name>/index.mjs`. */
export async function buildLambdas(
  options: { outDir?: string; names?: readonly string[] } = {},
): Promise<BuiltLambda[]> {
  return bundleFunctions({
    outDir: options.outDir ?? DEFAULT_OUT_DIR,
    entry: "lambda",
    ...(options.names ? { names: options.names } : {}),
  });
}

/** What both build commands take: `--out DIR` and the functions to build (default every one); `switches` are a command's own flags. */
export function parseBuildCommand(switches: readonly string[] = []): {
  options: { outDir?: string; names?: string[] };
  switches: ReadonlySet<string>;
} {
  const { values, positionals } = parseArgs({
    options: {
      out: { type: "string" },
      ...Object.fromEntries(switches.map((s) => [s, { type: "boolean" as const }])),
    },
    allowPositionals: true,
  });
  const out = typeof values.out === "string" ? values.out : undefined;
  return {
    options: { ...(out ? { outDir: out } : {}), ...(positionals.length > 0 ? { names: positionals } : {}) },
    switches: new Set(switches.filter((s) => (values as Record<string, unknown>)[s] === true)),
  };
}

/** One JSON line per bundle built, as both build commands print them. */
export function printBuilt(built: readonly BuiltLambda[]): void {
  for (const b of built)
    process.stdout.write(`${JSON.stringify({ built: b.name, file: relative(REPO, b.file) })}\n`);
}

/**
 * What keeps the Lambda functions from being packaged: the KSF_* settings
 * that must name an SSM parameter or a Secrets Manager secret for the token
 * and the kubeconfig, one sentence each. Empty: go ahead.
 */
export function lambdaCredentialProblems(env: NodeJS.ProcessEnv = process.env): string[] {
  // CommonJS because osls loads it too; required here, on use, so the image build
  // (which imports this module for bundleFunctions) needs no copy of it.
  const check = createRequire(import.meta.url)("./lambda-credentials.cjs") as {
    problems: (env: NodeJS.ProcessEnv) => string[];
  };
  return check.problems(env);
}

if (import.meta.main) {
  const { options, switches } = parseBuildCommand(["no-credentials-check"]);
  const problems = switches.has("no-credentials-check") ? [] : lambdaCredentialProblems();
  if (problems.length > 0) {
    process.stderr.write(
      `build:lambda: refusing to build the Lambda functions without their credentials (deploy/README.md, AWS Lambda):\n${problems.map((p) => `  ${p}\n`).join("")}`,
    );
    process.exit(2);
  }
  printBuilt(await buildLambdas(options));
}
