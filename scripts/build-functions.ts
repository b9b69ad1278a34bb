// `npm run build:functions`: one self-contained CommonJS module per function
// for the container / process entry, dist/functions/<name>/index.cjs, bundled
// from functions/<name>/main.ts by the same bundler as the Lambda handlers
// (scripts/build-lambda.ts bundleFunctions), esbuild's metafile beside it as
// meta.json, and serve.mjs to start one: `FUNCTION=<name> node
// dist/functions/serve.mjs` (same environment as `npm run serve`).
//
// Why: one file of just the reachable code loads several times faster than
// thousands of source files, and a code cache written after its modules ran
// (scripts/prime-code-cache.ts, functions/load-bundle.ts) shortens it further
// (figures: bench/README.md). CommonJS, not an ES module, because only
// vm.Script writes a cache after running.
//
//   npm run build:functions [-- --out DIR] [--no-code-cache] [NAME ...]
//
// The command also writes each bundle's code cache (scripts/prime-code-cache.ts)
// with this node binary, unless --no-code-cache; buildFunctions() alone does not.

import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { SERVED_NAMES } from "../functions/serve.ts";
import {
  type BuiltLambda,
  buildBundle,
  bundleFunctions,
  parseBuildCommand,
  printBuilt,
  SERVE_BUNDLE,
} from "./build-lambda.ts";
import { primeCodeCache } from "./prime-code-cache.ts";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const DEFAULT_FUNCTIONS_OUT_DIR = join(REPO, "dist", "functions");

/**
 * Bundles functions/<name>/main.ts for each name (default: every function, and `controllers`)
 * into <name>/index.cjs, and functions/serve.ts as `serve.mjs` beside them: `FUNCTION=<name> node
 * <outDir>/serve.mjs` runs one, which is what the image does.
 */
export async function buildFunctions(
  options: { outDir?: string; names?: readonly string[] } = {},
): Promise<BuiltLambda[]> {
  const outDir = resolve(options.outDir ?? DEFAULT_FUNCTIONS_OUT_DIR);
  const built = await bundleFunctions({
    outDir,
    entry: "main",
    format: "cjs",
    writeMetafile: true,
    known: SERVED_NAMES,
    ...(options.names ? { names: options.names } : {}),
  });
  await buildBundle(join(REPO, "functions", "serve.ts"), join(outDir, SERVE_BUNDLE));
  return built;
}

export { SERVE_BUNDLE };

if (import.meta.main) {
  const { options, switches } = parseBuildCommand(["no-code-cache"]);
  printBuilt(await buildFunctions(options));
  // A bundle without its code cache starts tens of ms slower: write them, as the image does,
  // unless told not to.
  if (!switches.has("no-code-cache")) {
    const primed = await primeCodeCache(options.outDir ?? DEFAULT_FUNCTIONS_OUT_DIR);
    process.stdout.write(`${JSON.stringify({ codeCaches: primed.functions })}\n`);
  }
}
