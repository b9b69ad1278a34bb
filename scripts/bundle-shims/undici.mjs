// undici as the function bundles see it (scripts/build-lambda.ts
// bundleOptions): the four names @kubernetes/client-node and shared/kube
// import from it, without the rest of its index.
//
// Why: undici's index loads every dispatcher, interceptor, cache store, mock
// and web API it has, and with them node:http2, node:dns, node:zlib,
// node:worker_threads and more, at every cold start; a function uses two
// agent classes and plain requests. fetch (client-node's Watch and log
// helpers, which our functions do not call at start) is loaded on first use.
// Only bundles use this file; the sources run on undici itself, and a file
// that moves in undici fails the bundle build rather than a request.
import api from "undici/lib/api/index.js";
import Agent from "undici/lib/dispatcher/agent.js";
import Dispatcher from "undici/lib/dispatcher/dispatcher.js";
import ProxyAgent from "undici/lib/dispatcher/proxy-agent.js";
import globalDispatcher from "undici/lib/global.js";

// What undici's index does so that every dispatcher has request(), stream(), ...
Object.assign(Dispatcher.prototype, api);

export { Agent, ProxyAgent };

/** undici's request(url, options): on options.dispatcher, else the global one. */
export function request(url, options = {}) {
  const { dispatcher = globalDispatcher.getGlobalDispatcher(), ...rest } = options;
  const target = url instanceof URL ? url : new URL(url);
  return dispatcher.request({
    ...rest,
    origin: target.origin,
    path: `${target.pathname}${target.search}`,
    method: rest.method ?? (rest.body ? "PUT" : "GET"),
  });
}

/** undici's fetch, loaded on first use. */
export async function fetch(input, init) {
  const { fetch: fetchImpl } = await import("undici/lib/web/fetch/index.js");
  return fetchImpl(input, init);
}
