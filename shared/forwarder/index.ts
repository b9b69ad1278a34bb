// shared/forwarder: watch the API server, deliver every change to the
// functions as ApiServerSource-style CloudEvents. `npm start` runs it
// in-process via startForwarder; `npm run forwarder` runs main.ts.

export type { Change } from "./change.ts";
export { cloudEventRequest, type EventRequest, subjectOf } from "./cloud-event.ts";
export { ForwarderConfigError, type ForwarderEnvConfig, forwarderConfigFromEnv } from "./config.ts";
export {
  DEFAULT_CONCURRENCY,
  DEFAULT_MAX_QUEUE,
  DEFAULT_REQUEST_TIMEOUT_MS,
  DEFAULT_SHUTDOWN_GRACE_MS,
  type DestinationStats,
  type Forwarder,
  type ForwarderOptions,
  type ForwarderStats,
  type KindStats,
  startForwarder,
} from "./forwarder.ts";
export { type ProbeServer, startProbeServer } from "./probe-server.ts";
export { DEFAULT_RETRY, type RetryOptions } from "./retry-policy.ts";
export { parseRoutes, type Route, RouteConfigError } from "./routes.ts";
export { WATCHABLE_KINDS } from "./watched-kinds.ts";
