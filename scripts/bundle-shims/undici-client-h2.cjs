// undici's HTTP/2 connection as the function bundles see it (scripts/build-lambda.ts
// bundleOptions): undici's Client requires it at load, and it requires
// node:http2, but it is only called for a connection that negotiated h2 over
// TLS, which an Agent without allowH2, as ours are, never offers. So it is
// loaded on that first call.
let loaded;
module.exports = function connectH2(client, socket) {
  loaded ??= require("undici/lib/dispatcher/client-h2.js");
  return loaded(client, socket);
};
