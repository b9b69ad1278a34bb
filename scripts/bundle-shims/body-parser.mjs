// body-parser as the function bundles see it (scripts/build-lambda.ts
// bundleOptions): express requires it at load to offer express.json, .raw,
// .text and .urlencoded, which our functions never call (they read bodies
// with shared/http/read-body.ts), so it is loaded on first use rather than at
// every cold start (cost: bench/README.md).
import { onFirstUse } from "./on-first-use.mjs";

// Resolved by the bundler to the real package (this file is the importer).
const real = onFirstUse(() => require("body-parser"));

export const json = (...args) => real().json(...args);
export const raw = (...args) => real().raw(...args);
export const text = (...args) => real().text(...args);
export const urlencoded = (...args) => real().urlencoded(...args);
