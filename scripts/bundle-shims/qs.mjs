// qs as the function bundles see it (scripts/build-lambda.ts bundleOptions):
// express requires it at load for its "extended" query parser, which our
// functions do not select (express 5's default is node:querystring), so it
// is loaded on the first parse rather than at every cold start.
import { onFirstUse } from "./on-first-use.mjs";

// Resolved by the bundler to the real package (this file is the importer).
const real = onFirstUse(() => require("qs"));

export const parse = (...args) => real().parse(...args);
