// mime-types as the function bundles see it (scripts/build-lambda.ts
// bundleOptions): the real module, loaded on the first call that needs its
// tables, because express requires it at load and building the tables from
// mime-db is the largest single cost of a cold start (bench/README.md). The
// functions answer JSON and Prometheus text, whose Content-Type needs no
// table: a type that names its charset is kept as it is, and mime-db gives
// JSON UTF-8. Express, accepts, type-is and send call contentType and lookup
// only; test/deploy/bundle-shims.test.ts holds the answers to the real module's.
import { onFirstUse } from "./on-first-use.mjs";

// A CommonJS require of the real file, which esbuild bundles and evaluates on first call.
const real = onFirstUse(() => require("mime-types/index.js"));

export function contentType(str) {
  if (typeof str === "string" && str.includes("/") && str.includes("charset")) return str;
  if (str === "application/json") return "application/json; charset=utf-8";
  return real().contentType(str);
}

export function lookup(path) {
  return real().lookup(path);
}
