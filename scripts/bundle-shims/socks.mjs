// socks as the function bundles see it (scripts/build-lambda.ts
// bundleOptions): client-node imports its SocksClient at load for clusters
// with a socks:// proxyUrl, and so does socks-proxy-agent; both only call
// SocksClient.createConnection, so socks is loaded on that first call.
import { onFirstUse } from "./on-first-use.mjs";

// Resolved by the bundler to the real package (this file is the importer).
const real = onFirstUse(() => require("socks"));

export const SocksClient = {
  createConnection: (...args) => real().SocksClient.createConnection(...args),
};
