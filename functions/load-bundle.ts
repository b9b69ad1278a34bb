// Runs a function's bundle (`npm run build:functions`: a CommonJS module,
// <name>/index.cjs, already wrapped in the function Node wraps modules in)
// with the V8 code cache beside it, <name>/index.cjs.v8cache.
//
// Not Node's compile cache: that is written before the modules run, so it
// misses every function compiled while they load; this one is written after
// (how much that saves: bench/README.md).
//
// V8 takes a cache only from the same V8 version and flags, so
// scripts/prime-code-cache.ts writes it with the node binary and NODE_OPTIONS
// that will run it, and a rejected cache is reported, not fatal. V8 checks the
// source by its length only, so the file starts with the CRC-32 of the
// bundle it was made from, and a cache of other bytes never reaches V8.

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
type CodeCacheUse = "accepted" | "rejected" | "absent";

/** The cache file: the CRC-32 of the bundle's text (UTF-8, 4 bytes, little endian), then V8's data. */
const CHECKSUM_BYTES = 4;

interface LoadedBundle {
  /** The bundle's module.exports. */
  exports: Record<string, unknown>;
  codeCache: CodeCacheUse;
  /** Writes the code cache of what has been compiled so far; returns its size in bytes. */
  writeCodeCache(): number;
}

/** Compiles and runs `bundle` (an absolute path) as Node runs a CommonJS module, with its code cache if there is one. */
export function loadBundle(bundle: string): LoadedBundle {
  const cacheFile = codeCachePath(bundle);
  // Read as text: a Buffer to decode would stay resident until a full collection.
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
