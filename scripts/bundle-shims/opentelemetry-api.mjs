// @opentelemetry/api as the function bundles see it (scripts/build-lambda.ts
// bundleOptions): prom-client's process CPU metric imports it at load for one
// thing, the current span of an exemplar (only with exemplars enabled, which
// we never do), so the API is loaded on that first use rather than at every
// cold start. test/deploy/bundle-shims.test.ts checks that nothing else in
// the bundles imports it.
import { onFirstUse } from "./on-first-use.mjs";

// Resolved by the bundler to the real package (this file is the importer).
const real = onFirstUse(() => require("@opentelemetry/api"));

export const trace = { getSpan: (context) => real().trace.getSpan(context) };
export const context = { active: () => real().context.active() };
