// Runs a function's bundle (`npm run build:functions`: a CommonJS module,
// <name>/index.cjs, already wrapped in the function Node wraps modules in)
// with the V8 code cache beside it, <name>/index.cjs.v8cache.
//
// Why not Node's compile cache (NODE_COMPILE_CACHE): Node makes its cache
// entry as it compiles a module, before running it. V8 compiles a function
// only when it is first called, so that entry holds the top-level code and
// little else: every module factory of the bundle, and everything they call
// while the modules load, was compiled again at each start. A cache made
// with vm.Script#createCachedData after the modules have been evaluated
// holds all of that (the provisioner's is 2.5 times larger), which took
// 28-41 ms off the cold start of the binder, provisioner and attacher against
// the primed compile cache (alternating runs; bench figure 1). Written after
// the function was also built (scripts/prime-code-cache.ts), it took another
// 14 (binder) to 25 ms (provisioner) off.
//
// V8 accepts a cache only for the same V8 version and V8 flags, and rejects
// any other; the bundle then compiles as it would without one. So the cache
// is written by the node binary and with the NODE_OPTIONS that will run it
// (scripts/prime-code-cache.ts spawns it so), and a rejected cache is
// reported, not fatal. V8 checks the source by its length only: a cache of
// another text of the same length would be taken, and run that text's code.
// So the file starts with the CRC-32 of the bundle it was made from (about
// 1 ms for 4.5 MB), and a cache of other bytes is rejected before V8 sees it.

import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname } from "node:path";
import { constants, Script } from "node:vm";
import { crc32 } from "node:zlib";

/** The code cache of a bundle: beside it, under the same name. */
export function codeCachePath(bundle: string): string {
  return `${bundle}.v8cache`;
}

/** What became of the bundle's code cache. */
export type CodeCacheUse = "accepted" | "rejected" | "absent";

/** The cache file: the CRC-32 of the bundle's text (UTF-8, 4 bytes, little endian), then V8's data. */
const CHECKSUM_BYTES = 4;

export interface LoadedBundle {
  /** The bundle's module.exports. */
  exports: Record<string, unknown>;
  codeCache: CodeCacheUse;
  /** Writes the code cache of what has been compiled so far; returns its size in bytes. */
  writeCodeCache(): number;
}

/** Compiles and runs `bundle` (an absolute path) as Node runs a CommonJS module, with its code cache if there is one. */
export function loadBundle(bundle: string): LoadedBundle {
  const cacheFile = codeCachePath(bundle);
  // Read as text, not as a Buffer to decode: that Buffer (3-4.5 MB) would stay resident until a full collection.
  const source = readFileSync(bundle, "utf8");
  const checksum = crc32(source);
  const file = existsSync(cacheFile) ? readFileSync(cacheFile) : undefined;
  const ours = file !== undefined && file.length > CHECKSUM_BYTES && file.readUInt32LE(0) === checksum;
  const cachedData = ours ? file.subarray(CHECKSUM_BYTES) : undefined;
  // The text is compiled as it is (the bundle holds its wrapper), so the heap holds one copy of it.
  const script = new Script(source, {
    filename: bundle,
    ...(cachedData ? { cachedData } : {}),
    // A bundle has no import() of its own, but code it loads may, as in any module.
    importModuleDynamically: constants.USE_MAIN_CONTEXT_DEFAULT_LOADER,
  });
  const module = { exports: {} as Record<string, unknown> };
  const run: unknown = script.runInThisContext();
  // An ES module would not have compiled; an unwrapped CommonJS one (built before the wrapper) evaluates to no function.
  if (typeof run !== "function")
    throw new Error(`${bundle} is not a bundle of this build:functions (no module wrapper); rebuild it`);
  run(module.exports, createRequire(bundle), module, bundle, dirname(bundle));
  return {
    exports: module.exports,
    codeCache:
      file === undefined
        ? "absent"
        : cachedData === undefined || script.cachedDataRejected
          ? "rejected"
          : "accepted",
    writeCodeCache() {
      const header = Buffer.alloc(CHECKSUM_BYTES);
      header.writeUInt32LE(checksum);
      const data = Buffer.concat([header, script.createCachedData()]);
      writeFileSync(cacheFile, data);
      return data.byteLength;
    },
  };
}
