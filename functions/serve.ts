// `npm run serve` with FUNCTION=<name>: starts one function by calling the
// `main()` of its entry, functions/<name>/main.ts, or, bundled as
// dist/functions/serve.mjs (`npm run build:functions`, what the image runs),
// of the bundle beside it, <name>/index.cjs, run with its code cache
// (load-bundle.ts). Exit code 2 means "wrong invocation" (unknown or missing
// FUNCTION, function not built yet), so scripts can tell it from a crash (1).
//
// `serve.mjs --write-code-cache` loads the bundle, builds the function
// without serving it, writes the bundle's code cache and exits:
// scripts/prime-code-cache.ts runs it for the image.

import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { loadBundle } from "./load-bundle.ts";

export const FUNCTION_NAMES = [
  "admission",
  "binder",
  "provisioner",
  "attacher",
  "attach-detach",
  "protection",
  "resizer",
] as const;
export type FunctionName = (typeof FUNCTION_NAMES)[number];

export function isFunctionName(value: string): value is FunctionName {
  return (FUNCTION_NAMES as readonly string[]).includes(value);
}

/**
 * What FUNCTION may name: every function, and `controllers`, one process
 * hosting several controller functions (functions/controllers), bundled and
 * served like them but deployed only in its place (deploy/README.md).
 */
export const SERVED_NAMES = [...FUNCTION_NAMES, "controllers"] as const;
export type ServedName = (typeof SERVED_NAMES)[number];

export function isServedName(value: string): value is ServedName {
  return (SERVED_NAMES as readonly string[]).includes(value);
}

/** Whether this file runs bundled (serve.mjs), so the functions are bundles too. */
const bundled = import.meta.url.endsWith(".mjs");

/** Absolute path of a function's entry module: its sources, or its bundle when this file is bundled too. */
export function entryPath(name: ServedName): string {
  return fileURLToPath(new URL(bundled ? `./${name}/index.cjs` : `./${name}/main.ts`, import.meta.url));
}

class UsageError extends Error {
  override name = "UsageError";
}

/** Why this Node cannot run the functions, or undefined: @kubernetes/client-node 2.x needs Node 24. */
export function unsupportedNode(version: string): string | undefined {
  const major = Number(/^v?(\d+)\./.exec(version)?.[1]);
  if (Number.isInteger(major) && major >= 24) return undefined;
  return `Node.js 24 or newer is required, this is ${version} (README "Node version")`;
}

async function main(): Promise<void> {
  const tooOld = unsupportedNode(process.version);
  if (tooOld) throw new UsageError(tooOld);
  const requested = process.env.FUNCTION?.trim() ?? "";
  const expected = `expected one of: ${SERVED_NAMES.join(", ")}`;
  if (requested === "")
    throw new UsageError(`FUNCTION is not set; ${expected} (e.g. FUNCTION=binder npm run serve)`);
  if (!isServedName(requested))
    throw new UsageError(`unknown FUNCTION ${JSON.stringify(requested)}; ${expected}`);
  const entry = entryPath(requested);
  if (!existsSync(entry)) {
    throw new UsageError(`function ${requested} is not built yet (${entry} does not exist)`);
  }
  const writeCodeCache = process.argv.includes("--write-code-cache");
  if (!bundled) {
    if (writeCodeCache)
      throw new UsageError("--write-code-cache is for the bundled serve.mjs (npm run build:functions)");
    const module: { main?: unknown } = await import(pathToFileURL(entry).href);
    if (typeof module.main !== "function") throw new Error(`${entry} exports no main()`);
    await module.main();
    return;
  }
  const loaded = loadBundle(entry);
  if (writeCodeCache) {
    // Starting compiles more than loading does: build() reads the configuration and
    // introduces the function to its CSI driver, without serving. prime-code-cache.ts gives
    // it a kubeconfig that is never called and a driver that only introduces itself.
    if (typeof loaded.exports.build === "function") {
      const built = (await loaded.exports.build()) as { close?: () => Promise<void> };
      await built.close?.();
    }
    const bytes = loaded.writeCodeCache();
    process.stdout.write(`${JSON.stringify({ codeCache: entry, bytes })}\n`);
    return;
  }
  if (loaded.codeCache === "rejected")
    process.stderr.write(
      `serve: the code cache of ${entry} was rejected (written for other bytes of the bundle, by another node binary, or with other V8 flags than NODE_OPTIONS gives now); starting without it\n`,
    );
  if (typeof loaded.exports.main !== "function") throw new Error(`${entry} exports no main()`);
  await loaded.exports.main();
}

// import.meta.main is Node 24's: an older Node must still run main() to be told it is too old.
const runDirectly =
  import.meta.main ??
  (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === resolve(process.argv[1]));
if (runDirectly) {
  main().catch((err: unknown) => {
    if (err instanceof UsageError) {
      process.stderr.write(`serve: ${err.message}\n`);
      process.exit(2);
    }
    process.stderr.write(
      `serve: failed to start: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exit(1);
  });
}
