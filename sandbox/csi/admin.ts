// A tiny HTTP admin endpoint on loopback, so out-of-process tests and chaos
// runs can inspect the driver and inject faults. Deliberately not part of
// the gRPC surface: a CSI client must not be able to reach it by accident.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { CsiDriver } from "./driver.ts";
import type { CsiFaultSettings } from "./faults.ts";

const maxBodyBytes = 64 * 1024;

export interface AdminServer {
  url: string;
  server: Server;
  close(): Promise<void>;
}

class HttpError extends Error {
  readonly status: number;
  constructor(status: number, message: string) {
    super(message);
    this.status = status;
  }
}

function send(res: ServerResponse, code: number, body?: unknown): void {
  if (body === undefined) {
    res.writeHead(code).end();
    return;
  }
  const text = `${JSON.stringify(body)}\n`;
  res.writeHead(code, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text) });
  res.end(text);
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > maxBodyBytes) throw new HttpError(413, `body larger than ${maxBodyBytes} bytes`);
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    throw new HttpError(400, "body is not valid JSON");
  }
}

type Route = (req: IncomingMessage, parts: string[]) => Promise<[number, unknown?]>;

function routes(driver: CsiDriver, info: () => Record<string, unknown>): Record<string, Route> {
  return {
    "GET /": async () => [200, { ...info(), ready: driver.isReady }],
    "GET /volumes": async () => [200, { volumes: driver.listBackingVolumes() }],
    "GET /volumes/*": async (_req, parts) => {
      const volume = driver.listBackingVolumes().find((v) => v.volumeId === parts[1]);
      if (!volume) throw new HttpError(404, `volume ${parts[1]} does not exist`);
      return [200, volume];
    },
    "GET /snapshots": async () => [200, { snapshots: driver.listBackingSnapshots() }],
    "GET /capacity": async () => [200, driver.capacity()],
    // {"totalBytes": n} sets the default pool of every segment; with
    // "segment": "<node>" that segment's only; "totalBytes": null puts a segment back on the default.
    "PUT /capacity": async (req) => {
      const body = await readJson(req);
      if (!body || typeof body !== "object" || Array.isArray(body)) {
        throw new HttpError(400, 'body must be {"segment"?: string, "totalBytes": number | null}');
      }
      const { segment, totalBytes, ...rest } = body as Record<string, unknown>;
      const unknown = Object.keys(rest);
      if (unknown.length > 0) throw new HttpError(400, `unknown field ${JSON.stringify(unknown[0])}`);
      if (segment !== undefined && (typeof segment !== "string" || segment === "")) {
        throw new HttpError(400, "segment must be a non-empty string (the topology key's value)");
      }
      if (totalBytes !== null && typeof totalBytes !== "number") {
        throw new HttpError(400, "totalBytes must be a number of bytes, or null");
      }
      try {
        driver.setSegmentCapacity(segment, totalBytes);
      } catch (err) {
        throw new HttpError(400, (err as Error).message);
      }
      return [200, driver.capacity()];
    },
    "GET /faults": async () => [200, driver.faults],
    "PUT /faults": async (req) => {
      const body = await readJson(req);
      try {
        driver.setFaults(body as CsiFaultSettings);
      } catch (err) {
        throw new HttpError(400, (err as Error).message);
      }
      return [200, driver.faults];
    },
    "DELETE /faults": async () => {
      driver.clearFaults();
      return [204];
    },
    "PUT /probe": async (req) => {
      const body = (await readJson(req)) as { ready?: unknown } | undefined;
      if (typeof body?.ready !== "boolean") throw new HttpError(400, 'body must be {"ready": true|false}');
      driver.setReady(body.ready);
      return [200, { ready: driver.isReady }];
    },
    "GET /stats": async () => [200, driver.getStats()],
    "DELETE /stats": async () => {
      driver.resetStats();
      return [204];
    },
  };
}

export async function startAdminServer(
  driver: CsiDriver,
  info: () => Record<string, unknown>,
  port = 0,
): Promise<AdminServer> {
  const table = routes(driver, info);
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://admin").pathname;
    const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
    const shape = parts.length === 0 ? "/" : `/${parts[0]}${parts.length > 1 ? "/*" : ""}`;
    const route = table[`${req.method} ${shape}`];
    if (!route) {
      const known = Object.keys(table).some((k) => k.endsWith(` ${shape}`));
      send(res, known ? 405 : 404, {
        error: `${known ? "method not allowed" : "not found"}: ${req.method} ${path}`,
      });
      return;
    }
    route(req, parts).then(
      ([code, body]) => send(res, code, body),
      (err: unknown) =>
        send(res, err instanceof HttpError ? err.status : 500, {
          error: (err as Error).message ?? String(err),
        }),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve());
  });
  const { port: bound } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${bound}`,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
