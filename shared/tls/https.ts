// An HTTPS server whose certificate follows its source: every new valid pair
// goes in through server.setSecureContext, so connections opened afterwards
// get the new certificate while open ones finish on the old one. No restart,
// no dropped requests.

import type { RequestListener } from "node:http";
import { createServer, type Server } from "node:https";
import {
  loadServingTls,
  secureContextOptions,
  type TlsSource,
  type TlsWatcher,
  type WatchLogger,
  watchServingTls,
} from "./serving.ts";

export interface ReloadingHttpsOptions {
  source: TlsSource;
  /** Poll period of the source; see WatchOptions.intervalMs. */
  reloadIntervalMs?: number;
  logger?: WatchLogger;
}

export interface ReloadingHttpsServer {
  server: Server;
  /** Stop watching; call when the server closes. */
  watcher: TlsWatcher;
}

/** Loads the pair (failing when it is unusable: better not to start than to serve nothing) and watches it. */
export async function createReloadingHttpsServer(
  listener: RequestListener,
  options: ReloadingHttpsOptions,
): Promise<ReloadingHttpsServer> {
  const initial = await loadServingTls(options.source);
  const server = createServer(secureContextOptions(initial), listener);
  const watcher = watchServingTls(
    options.source,
    initial,
    (tls) => server.setSecureContext(secureContextOptions(tls)),
    {
      ...(options.reloadIntervalMs !== undefined ? { intervalMs: options.reloadIntervalMs } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
    },
  );
  server.once("close", () => watcher.close());
  return { server, watcher };
}
