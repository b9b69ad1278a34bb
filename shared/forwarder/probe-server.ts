// The forwarder's own HTTP endpoints: /healthz (alive), /readyz (every
// informer synced and not shutting down), /metrics (Prometheus). Plain
// node:http: three GET routes do not need express.

import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { isIP } from "node:net";
import type { Registry } from "../metrics.ts";
import type { Forwarder } from "./forwarder.ts";

export interface ProbeServer {
  url: string;
  server: Server;
  /** /readyz answers 503 from now on (shutdown started). */
  drain(): void;
  close(): Promise<void>;
}

export async function startProbeServer(
  forwarder: Pick<Forwarder, "stats">,
  registry: Registry,
  options: { port: number; host?: string },
): Promise<ProbeServer> {
  let draining = false;
  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    const send = (status: number, body: unknown): void => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    if (req.method !== "GET" && req.method !== "HEAD") return send(405, { error: "only GET" });
    if (path === "/healthz") return send(200, { ok: true });
    if (path === "/readyz") {
      if (draining) return send(503, { ready: false, reason: "shutting down" });
      const stats = forwarder.stats();
      if (stats.synced) return send(200, { ready: true });
      const waiting = Object.entries(stats.kinds)
        .filter(([, k]) => !k.synced)
        .map(([kind]) => kind);
      return send(503, { ready: false, reason: `informers not synced: ${waiting.join(", ")}` });
    }
    if (path === "/metrics") {
      registry.metrics().then(
        (text) => {
          res.writeHead(200, { "content-type": registry.contentType });
          res.end(text);
        },
        (err: unknown) => send(500, { error: err instanceof Error ? err.message : String(err) }),
      );
      return;
    }
    if (path === "/stats") return send(200, forwarder.stats());
    return send(404, { error: `no route for ${req.method} ${path}` });
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ port: options.port, host: options.host }, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const host = options.host;
  const url =
    host === undefined || host === "0.0.0.0" || host === "::"
      ? `http://127.0.0.1:${port}`
      : isIP(host) === 6
        ? `http://[${host}]:${port}`
        : `http://${host}:${port}`;
  return {
    url,
    server,
    drain: () => {
      draining = true;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
