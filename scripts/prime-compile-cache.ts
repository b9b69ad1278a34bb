// `node scripts/prime-compile-cache.ts <bundle dir> <cache dir>`: fills Node's
// compile cache (NODE_COMPILE_CACHE) for the bundles of build:functions, so a
// process that starts with that cache skips compiling them (bench figure 1,
// the bundleCompileCache variant). The image does this at build time.
//
// Each bundle is imported, not run: what Node caches is the code it compiles
// when it compiles a module, which a full run with a first request does not
// add to (the cache files come out the same size). Facts the caller must keep:
//   - Node keeps one cache per Node version and per user id
//     (<cache dir>/v<version>-<arch>-<hash>-<uid>), so prime with the node
//     binary and as the user that will run the functions;
//   - entries are found by the bundle's path, so prime the bundles where they
//     will run.

import { spawn } from "node:child_process";
import { readdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { SERVE_BUNDLE } from "./build-functions.ts";

/** serve.mjs and every <name>/index.mjs under `bundleDir`. */
export async function bundlesIn(bundleDir: string): Promise<string[]> {
  const entries = await readdir(bundleDir, { withFileTypes: true });
  const bundles = entries
    .filter((e) => e.isDirectory())
    .map((e) => join(bundleDir, e.name, "index.mjs"))
    .sort();
  return [join(bundleDir, SERVE_BUNDLE), ...bundles];
}

function importOnce(file: string, cacheDir: string): Promise<void> {
  // Imported, so `if (import.meta.main) await main()` does not serve.
  const script = `await import(${JSON.stringify(pathToFileURL(file).href)});`;
  const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
    env: { ...process.env, NODE_COMPILE_CACHE: cacheDir },
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
        : reject(new Error(`importing ${file} failed (${code ?? signal}): ${stderr}`)),
    );
  });
}

/** Primes `cacheDir` for every bundle under `bundleDir`; returns the bundles primed. */
export async function primeCompileCache(bundleDir: string, cacheDir: string): Promise<string[]> {
  const bundles = await bundlesIn(resolve(bundleDir));
  for (const file of bundles) await importOnce(file, resolve(cacheDir));
  return bundles;
}

if (import.meta.main) {
  const [bundleDir, cacheDir] = process.argv.slice(2);
  if (!bundleDir || !cacheDir) {
    process.stderr.write("usage: node scripts/prime-compile-cache.ts <bundle dir> <cache dir>\n");
    process.exit(2);
  }
  for (const file of await primeCompileCache(bundleDir, cacheDir))
    process.stdout.write(`${JSON.stringify({ primed: file, cache: cacheDir })}\n`);
}
