// Runs a function app as a process the way Knative (and `npm start`) expect:
// listen on $PORT, announce readiness with one JSON line on stdout, and on
// SIGTERM stop taking connections, let in-flight requests finish within a
// bounded grace period, close clients (gRPC channels, ...) and exit 0.
//
// HTTPS when asked (options.tls, or TLS_CERT_FILE/TLS_KEY_FILE or
// TLS_SECRET_NAME/TLS_SECRET_NAMESPACE in the environment, see shared/tls/env.ts):
// admission webhooks must be HTTPS, and event endpoints outside a mesh should
// be. The certificate is reloaded on change without a restart.

import type { RequestListener, Server } from "node:http";
import { createServer } from "node:http";
import type { Server as HttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { isIP } from "node:net";
import { integerFromEnv } from "../config.ts";
import type { Logger } from "../log.ts";
import { createLogger } from "../log.ts";
import { tlsFromEnv } from "../tls/env.ts";
import { createReloadingHttpsServer } from "../tls/https.ts";
import type { TlsSource } from "../tls/serving.ts";
import type { FunctionApp } from "./function-app.ts";

type CloseHook = () => void | Promise<void>;

interface ServeOptions {
  /** Defaults to app.runtime.name for apps from createFunctionApp. */
  name?: string;
  /** Defaults to PORT, then 0 (any free port). */
  port?: number;
  /** Defaults to HOST, then all interfaces (what Knative needs). */
  host?: string;
  /** How long in-flight requests get after SIGTERM. Defaults to SHUTDOWN_GRACE_MS, then 10 s. */
  shutdownGraceMs?: number;
  /** Run after the server has closed, in order (e.g. close gRPC clients). */
  onClose?: CloseHook[];
  /** Install SIGTERM/SIGINT handlers that shut down and exit. Default true. */
  handleSignals?: boolean;
  logger?: Logger;
  /** Where the ready line goes. Defaults to process.stdout. */
  stdout?: { write(line: string): unknown };
  /**
   * Serve HTTPS with this certificate source (reloaded on change). Defaults to
   * the TLS_* environment (shared/tls/env.ts); `false` forces plain HTTP.
   */
  tls?: TlsSource | false;
  /** Poll period of the TLS source. Defaults to TLS_RELOAD_INTERVAL_SECONDS, then 10 s (files) / 60 s (Secret). */
  tlsReloadIntervalMs?: number;
}

export interface ServedFunction {
  /** http://... or https://... */
  url: string;
  port: number;
  server: Server | HttpsServer;
  addCloseHook(hook: CloseHook): void;
  /** Stop accepting, drain in-flight requests (bounded), run close hooks. Idempotent. */
  close(): Promise<void>;
}

export const DEFAULT_SHUTDOWN_GRACE_MS = 10_000;
/** Longer than any client's idle timeout we know of (Go's http.Transport: 90 s). */
const KEEP_ALIVE_TIMEOUT_MS = 120_000;
const CLOSE_HOOK_TIMEOUT_MS = 5_000;

function hasRuntime(app: RequestListener | FunctionApp): app is FunctionApp {
  return "runtime" in app && typeof app.runtime === "object";
}

/** The URL a local client uses: loopback unless bound to one specific address. */
function localUrl(scheme: "http" | "https", host: string | undefined, port: number): string {
  if (host === undefined || host === "" || host === "0.0.0.0" || host === "::")
    return `${scheme}://127.0.0.1:${port}`;
  return isIP(host) === 6 ? `${scheme}://[${host}]:${port}` : `${scheme}://${host}:${port}`;
}

function withTimeout(promise: Promise<void>, ms: number): Promise<"done" | "timeout"> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<"timeout">((resolve) => {
    timer = setTimeout(() => resolve("timeout"), ms);
  });
  return Promise.race([promise.then(() => "done" as const), timeout]).finally(() => clearTimeout(timer));
}

function isHttps(server: Server | HttpsServer): server is HttpsServer {
  return "setSecureContext" in server;
}

/** Plain HTTP, or HTTPS with a reloading certificate when options or environment ask for it. */
async function createListener(
  app: RequestListener | FunctionApp,
  options: ServeOptions,
  log: Logger,
  hooks: CloseHook[],
): Promise<Server | HttpsServer> {
  if (options.tls === false) return createServer(app);
  let source = options.tls;
  let reloadIntervalMs = options.tlsReloadIntervalMs;
  if (source === undefined) {
    const fromEnv = tlsFromEnv(process.env);
    if (fromEnv === undefined) return createServer(app);
    source = fromEnv.source;
    reloadIntervalMs ??= fromEnv.reloadIntervalMs;
    hooks.push(() => fromEnv.close());
  }
  const { server } = await createReloadingHttpsServer(app, {
    source,
    ...(reloadIntervalMs !== undefined ? { reloadIntervalMs } : {}),
    logger: {
      info: (details, message) => log.info(details, message),
      warn: (details, message) => log.warn(details, message),
    },
  });
  // A client that fails the handshake (wrong CA, plain HTTP to this port) is
  // the client's problem: log it quietly instead of as a server error.
  server.on("tlsClientError", (err) => log.debug({ err }, "TLS handshake failed"));
  return server;
}

export async function serveFunction(
  app: RequestListener | FunctionApp,
  options: ServeOptions = {},
): Promise<ServedFunction> {
  const runtime = hasRuntime(app) ? app.runtime : undefined;
  const name = options.name ?? runtime?.name;
  if (name === undefined || name === "") throw new Error("serveFunction: a function name is required");
  const log = options.logger ?? runtime?.log ?? createLogger({ name });
  const port = options.port ?? integerFromEnv(process.env, "PORT", 0, { min: 0, max: 65535 });
  const host = options.host ?? (process.env.HOST?.trim() || undefined);
  const graceMs =
    options.shutdownGraceMs ??
    integerFromEnv(process.env, "SHUTDOWN_GRACE_MS", DEFAULT_SHUTDOWN_GRACE_MS, { min: 0, max: 3_600_000 });
  const hooks: CloseHook[] = [...(options.onClose ?? []), ...(runtime?.closeHooks ?? [])];
  const stdout = options.stdout ?? process.stdout;

  const server = await createListener(app, options, log, hooks);
  // Idle keep-alive connections outlive the clients' own idle timeouts (Go's, kube-apiserver's webhook
  // client, 90 s), so the client always closes first: a server closing one as the client reuses it turns
  // the client's next POST (not retried: not idempotent) into a failed webhook call.
  server.keepAliveTimeout = KEEP_ALIVE_TIMEOUT_MS;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ port, host }, () => {
      server.off("error", reject);
      resolve();
    });
  });
  // After start, socket-level errors are logged, never fatal.
  server.on("error", (err) => log.error({ err }, "server error"));
  server.on("clientError", (err, socket) => {
    log.debug({ err }, "client error");
    if (socket.writable) socket.end("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n");
    else socket.destroy();
  });

  const boundPort = (server.address() as AddressInfo).port;
  const url = localUrl(isHttps(server) ? "https" : "http", host, boundPort);

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      if (runtime) runtime.draining = true;
      removeSignalHandlers();
      // close() stops accepting and resolves once every connection is gone.
      // A keep-alive connection whose request finishes during the drain would
      // otherwise idle until keepAliveTimeout, so idle ones are swept often.
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const sweep = setInterval(() => server.closeIdleConnections(), 50);
      try {
        if ((await withTimeout(closed, graceMs)) === "timeout") {
          log.warn({ graceMs }, "grace period over, closing remaining connections");
          server.closeAllConnections();
          await closed;
        }
      } finally {
        clearInterval(sweep);
      }
      for (const hook of hooks) {
        try {
          if ((await withTimeout(Promise.resolve(hook()), CLOSE_HOOK_TIMEOUT_MS)) === "timeout") {
            log.warn({ timeoutMs: CLOSE_HOOK_TIMEOUT_MS }, "close hook did not finish in time");
          }
        } catch (err) {
          log.error({ err }, "close hook failed");
        }
      }
      log.info("stopped");
    })();
    return closing;
  };

  let signalled = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (signalled) return;
    signalled = true;
    log.info({ signal, graceMs }, "shutting down");
    close().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, "shutdown failed");
        process.exit(1);
      },
    );
  };
  const handleSignals = options.handleSignals !== false;
  function removeSignalHandlers(): void {
    process.off("SIGTERM", onSignal);
    process.off("SIGINT", onSignal);
  }
  if (handleSignals) {
    process.on("SIGTERM", onSignal);
    process.on("SIGINT", onSignal);
  }

  log.info({ url, port: boundPort }, "ready");
  stdout.write(`${JSON.stringify({ ready: true, function: name, url })}\n`);

  return {
    url,
    port: boundPort,
    server,
    addCloseHook: (hook) => void hooks.push(hook),
    close,
  };
}
