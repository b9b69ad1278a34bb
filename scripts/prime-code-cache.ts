// `node scripts/prime-code-cache.ts <bundle dir>`: writes the V8 code cache of
// each function bundle of build:functions (<name>/index.cjs.v8cache, see
// functions/load-bundle.ts), so a process that starts from the bundle skips
// compiling what loading its modules runs (bench figure 1). The image does
// this at build time.
//
// Each bundle is loaded by the bundled serve.mjs --write-code-cache, in its
// own process with the environment the functions run with
// (functions/node-options.ts): V8 takes a cache only from the same node
// binary with the same V8 flags, and NODE_OPTIONS sets some. So prime with
// the node binary that will run the functions; unlike Node's compile cache,
// the user id and the bundles' paths do not matter.

import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { readdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import { FUNCTION_PROCESS_ENV } from "../functions/node-options.ts";
import { SERVE_BUNDLE } from "./build-functions.ts";
import { bundleFileName } from "./build-lambda.ts";

/** The functions built under `bundleDir`: each directory holding an index.cjs. */
export async function bundledFunctions(bundleDir: string): Promise<string[]> {
  const entries = await readdir(bundleDir, { withFileTypes: true });
  return entries
    .filter((e) => e.isDirectory() && existsSync(join(bundleDir, e.name, bundleFileName("cjs"))))
    .map((e) => e.name)
    .sort();
}

function writeCodeCache(bundleDir: string, name: string): Promise<void> {
  const child = spawn(process.execPath, [join(bundleDir, SERVE_BUNDLE), "--write-code-cache"], {
    env: { ...process.env, ...FUNCTION_PROCESS_ENV, FUNCTION: name },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4096);
  });
  return new Promise((resolvePromise, reject) => {
    child.once("error", reject);
    child.once("exit", (code, signal) =>
      code === 0
        ? resolvePromise()
        : reject(new Error(`writing the code cache of ${name} failed (${code ?? signal}): ${stderr}`)),
    );
  });
}

/** Writes the code cache of every function bundle under `bundleDir`; returns the functions primed. */
export async function primeCodeCache(bundleDir: string): Promise<string[]> {
  const dir = resolve(bundleDir);
  const names = await bundledFunctions(dir);
  for (const name of names) await writeCodeCache(dir, name);
  return names;
}

if (import.meta.main) {
  const [bundleDir] = process.argv.slice(2);
  if (!bundleDir) {
    process.stderr.write("usage: node scripts/prime-code-cache.ts <bundle dir>\n");
    process.exit(2);
  }
  for (const name of await primeCodeCache(bundleDir))
    process.stdout.write(`${JSON.stringify({ primed: name, bundleDir })}\n`);
}
