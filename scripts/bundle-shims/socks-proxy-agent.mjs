// socks-proxy-agent as the function bundles see it (scripts/build-lambda.ts
// bundleOptions): loaded when client-node builds an agent for a cluster with a
// socks:// proxyUrl, a setting few clusters use, not at every start. The real
// class is constructed and returned, so the caller holds a real agent.
import { onFirstUse } from "./on-first-use.mjs";

// Resolved by the bundler to the real package (this file is the importer).
const real = onFirstUse(() => require("socks-proxy-agent"));

export class SocksProxyAgent {
  constructor(...args) {
    // biome-ignore lint/correctness/noConstructorReturn: the real agent stands in for this shim's instance.
    return new (real().SocksProxyAgent)(...args);
  }
}
