// qs as the function bundles see it (scripts/build-lambda.ts bundleOptions):
// express requires it at load for its "extended" query parser, which our
// functions do not select (express 5's default is node:querystring). Loading
// it, with side-channel and get-intrinsic, cost a few ms of each cold start;
// it is now loaded on the first parse.
import { onFirstUse } from "./on-first-use.mjs";

// Resolved by the bundler to the real package (this file is the importer).
const real = onFirstUse(() => require("qs"));

export const parse = (...args) => real().parse(...args);
