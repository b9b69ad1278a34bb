// `npm run build:lambda`: one self-contained ES module per function for AWS
// Lambda, dist/lambda/<name>/index.mjs exporting `handler` (serverless.yml
// names `dist/lambda/<name>/index.handler`).
//
// Why a bundle: Lambda's Node runtime loads .js/.mjs/.cjs handlers only, and
// a bundle of just the reachable code keeps the zip small and the cold start
// short. esbuild strips the types the way Node does (erasable syntax only).
// Files the code opens at run time next to itself (csi.proto, found through
// import.meta.url) are copied beside the bundle.
//
//   npm run build:lambda [-- --out DIR] [NAME ...]

import { copyFile, mkdir, rm } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { build } from "esbuild";
import { FUNCTION_NAMES, isFunctionName } from "../functions/serve.ts";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..");
export const DEFAULT_OUT_DIR = join(REPO, "dist", "lambda");

/** Runtime assets: a bundle whose inputs include `module` gets `asset` copied next to it. */
const ASSETS: readonly { module: string; asset: string }[] = [
  { module: "shared/csi/proto.ts", asset: "shared/csi/csi.proto" },
];

export interface BuiltLambda {
  name: string;
  /** Absolute path of the bundle. */
  file: string;
  assets: string[];
}

export async function buildLambdas(
  options: { outDir?: string; names?: readonly string[] } = {},
): Promise<BuiltLambda[]> {
  const outDir = resolve(options.outDir ?? DEFAULT_OUT_DIR);
  const names = options.names ?? FUNCTION_NAMES;
  const built: BuiltLambda[] = [];
  for (const name of names) {
    if (!isFunctionName(name))
      throw new Error(`unknown function ${name}; expected one of ${FUNCTION_NAMES.join(", ")}`);
    const dir = join(outDir, name);
    await rm(dir, { recursive: true, force: true });
    await mkdir(dir, { recursive: true });
    const file = join(dir, "index.mjs");
    const result = await build({
      entryPoints: [join(REPO, "functions", name, "lambda.ts")],
      outfile: file,
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node24",
      // No source map: the bundle is not minified, so stack traces stay readable without one.
      metafile: true,
      logLevel: "warning",
      // CommonJS dependencies call require() for Node built-ins; an ES module has no require of its own.
      banner: {
        js: "import { createRequire as __ksfCreateRequire } from 'node:module'; const require = __ksfCreateRequire(import.meta.url);",
      },
    });
    const inputs = new Set(Object.keys(result.metafile.inputs).map((p) => relative(REPO, resolve(REPO, p))));
    const assets: string[] = [];
    for (const { module, asset } of ASSETS) {
      if (!inputs.has(module)) continue;
      const target = join(dir, asset.split("/").pop() as string);
      await copyFile(join(REPO, asset), target);
      assets.push(target);
    }
    built.push({ name, file, assets });
  }
  return built;
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({
    options: { out: { type: "string" } },
    allowPositionals: true,
  });
  const built = await buildLambdas({
    ...(values.out ? { outDir: values.out } : {}),
    ...(positionals.length > 0 ? { names: positionals } : {}),
  });
  for (const b of built)
    process.stdout.write(`${JSON.stringify({ built: b.name, file: relative(REPO, b.file) })}\n`);
}
