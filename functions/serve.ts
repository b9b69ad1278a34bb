// `npm run serve` with FUNCTION=<name>: starts one function by importing its
// entry, functions/<name>/main.ts, or, bundled as dist/functions/serve.mjs
// (`npm run build:functions`, what the image runs), the bundle beside it,
// <name>/index.mjs. The entry either serves on import or exports `main()`,
// which is then called. Exit code 2 means "wrong
// invocation" (unknown or missing FUNCTION, function not built yet), so
// scripts can tell it from a crash (1).

import { existsSync } from "node:fs";
import { fileURLToPath, pathToFileURL } from "node:url";

export const FUNCTION_NAMES = ["admission", "binder", "provisioner", "attacher", "attach-detach"] as const;
export type FunctionName = (typeof FUNCTION_NAMES)[number];

export function isFunctionName(value: string): value is FunctionName {
  return (FUNCTION_NAMES as readonly string[]).includes(value);
}

/** Absolute path of a function's entry module: its sources, or its bundle when this file is bundled too. */
export function entryPath(name: FunctionName): string {
  const bundled = import.meta.url.endsWith(".mjs");
  return fileURLToPath(new URL(bundled ? `./${name}/index.mjs` : `./${name}/main.ts`, import.meta.url));
}

class UsageError extends Error {
  override name = "UsageError";
}

async function main(): Promise<void> {
  const requested = process.env.FUNCTION?.trim() ?? "";
  const expected = `expected one of: ${FUNCTION_NAMES.join(", ")}`;
  if (requested === "")
    throw new UsageError(`FUNCTION is not set; ${expected} (e.g. FUNCTION=binder npm run serve)`);
  if (!isFunctionName(requested))
    throw new UsageError(`unknown FUNCTION ${JSON.stringify(requested)}; ${expected}`);
  const entry = entryPath(requested);
  if (!existsSync(entry)) {
    throw new UsageError(`function ${requested} is not built yet (${entry} does not exist)`);
  }
  const module: { main?: unknown } = await import(pathToFileURL(entry).href);
  if (typeof module.main === "function") await module.main();
}

if (import.meta.main) {
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
