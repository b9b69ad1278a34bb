// Test helpers for the forwarder: small real HTTP receivers that parse what
// they get with the functions' own parser (shared/events), a TCP proxy that
// can cut the forwarder off from the API server, and object builders.

import type { IncomingHttpHeaders, ServerResponse } from "node:http";
import { createServer } from "node:http";
import { type AddressInfo, connect, createServer as createTcpServer, type Socket } from "node:net";
import { KubeConfig } from "@kubernetes/client-node";
import { type ParsedEvent, parseEventRequest, type ResourceEvent } from "../../shared/events/index.ts";
import { type Forwarder, type ForwarderOptions, startForwarder } from "../../shared/forwarder/index.ts";
import type { KubeObject } from "../../shared/kube/types.ts";
import { createLogger } from "../../shared/log.ts";
import { createMetricsRegistry } from "../../shared/metrics.ts";

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  /** What the functions' parser made of it (one event for binary mode). */
  event?: ResourceEvent;
  /** The parser's complaint, if it refused the request. */
  parseError?: string;
  at: number;
  /** 1-based position among all requests this receiver got. */
  seq: number;
}

/** What the receiver answers; `destroy` cuts the connection without an answer. */
export interface Answer {
  status?: number;
  headers?: Record<string, string>;
  delayMs?: number;
  destroy?: boolean;
}

export type Responder = (req: Received) => Answer | Promise<Answer>;

export interface Receiver {
  url: string;
  port: number;
  requests: Received[];
  /** Requests answered 2xx, i.e. delivered events. */
  delivered(): ResourceEvent[];
  respond: Responder;
  /** Most requests seen under way at once, overall and per object key. */
  maxConcurrent: number;
  maxConcurrentPerObject: number;
  close(): Promise<void>;
}

export async function startReceiver(respond: Responder = () => ({}), port = 0): Promise<Receiver> {
  const requests: Received[] = [];
  const accepted: ResourceEvent[] = [];
  const active = new Map<string, number>();
  let current = 0;
  const receiver: Receiver = {
    url: "",
    port: 0,
    requests,
    delivered: () => accepted,
    respond,
    maxConcurrent: 0,
    maxConcurrentPerObject: 0,
    close: async () => {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const received: Received = { headers: req.headers, body: body.toString("utf8"), at: Date.now(), seq: 0 };
    try {
      const events: ParsedEvent[] = parseEventRequest(req.headers, body);
      const event = events[0];
      if (events.length === 1 && event?.kind === "resource") received.event = event;
      else received.parseError = `unexpected events ${JSON.stringify(events)}`;
    } catch (err) {
      received.parseError = err instanceof Error ? err.message : String(err);
    }
    requests.push(received);
    received.seq = requests.length;
    const key = keyOf(received.event);
    current++;
    active.set(key, (active.get(key) ?? 0) + 1);
    receiver.maxConcurrent = Math.max(receiver.maxConcurrent, current);
    receiver.maxConcurrentPerObject = Math.max(receiver.maxConcurrentPerObject, active.get(key) ?? 0);
    try {
      const answer = await receiver.respond(received);
      if (answer.delayMs) await new Promise((r) => setTimeout(r, answer.delayMs));
      if (answer.destroy) {
        req.socket.destroy();
        return;
      }
      const status = answer.status ?? (received.parseError ? 400 : 200);
      if (status >= 200 && status < 300 && received.event) accepted.push(received.event);
      reply(res, status, answer.headers);
    } finally {
      current--;
      active.set(key, (active.get(key) ?? 1) - 1);
    }
  });
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  receiver.port = (server.address() as AddressInfo).port;
  receiver.url = `http://127.0.0.1:${receiver.port}/`;
  return receiver;
}

function reply(res: ServerResponse, status: number, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify({ status }));
}

export function keyOf(event: ResourceEvent | undefined): string {
  if (!event) return "?";
  return `${event.ref.kind}/${event.ref.namespace ?? ""}/${event.ref.name}`;
}

export async function waitFor(
  check: () => boolean | Promise<boolean>,
  what: string,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** startForwarder with a private metrics registry, quiet logs (LOG_LEVEL to see them) and fast backoff. */
/** A forwarder for tests; one change per request unless `maxBatch` says otherwise (batches.test.ts does). */
export function startTestForwarder(options: ForwarderOptions): Forwarder {
  return startForwarder({
    logger: createLogger({ name: "forwarder", level: process.env.LOG_LEVEL ?? "silent" }),
    metrics: createMetricsRegistry({ defaultMetrics: false }),
    informerBackoff: { baseMs: 20, maxMs: 200 },
    shutdownGraceMs: 2_000,
    maxBatch: 1,
    ...options,
    retry: { baseMs: 10, maxMs: 100, ...options.retry },
  });
}

/** A port nothing listens on (yet). */
export async function freePort(): Promise<number> {
  const server = createTcpServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** A TCP proxy in front of the API server that can drop every connection and refuse new ones. */
export interface CuttableProxy {
  url: string;
  kubeConfig: KubeConfig;
  cut(): void;
  restore(): void;
  close(): Promise<void>;
}

export async function startCuttableProxy(target: string): Promise<CuttableProxy> {
  const { hostname, port } = new URL(target);
  const sockets = new Set<Socket>();
  let isCut = false;
  const server = createTcpServer((client) => {
    if (isCut) {
      client.destroy();
      return;
    }
    const upstream = connect(Number(port), hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => undefined);
    }
    client.pipe(upstream);
    upstream.pipe(client);
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: "proxy", server: url, skipTLSVerify: true }],
    users: [{ name: "proxy", token: "sandbox" }],
    contexts: [{ name: "proxy", cluster: "proxy", user: "proxy" }],
    currentContext: "proxy",
  });
  return {
    url,
    kubeConfig,
    cut: () => {
      isCut = true;
      for (const s of sockets) s.destroy();
    },
    restore: () => {
      isCut = false;
    },
    close: async () => {
      isCut = true;
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export function pvc(name: string, namespace = "default", labels: Record<string, string> = {}): KubeObject {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace, labels },
    spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
  };
}

export function pv(name: string): KubeObject {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name },
    spec: {
      capacity: { storage: "1Gi" },
      accessModes: ["ReadWriteOnce"],
      persistentVolumeReclaimPolicy: "Delete",
      csi: { driver: "hostpath.csi.k8s.io", volumeHandle: `vol-${name}` },
    },
  };
}

export function storageClass(name: string): KubeObject {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: { name },
    provisioner: "hostpath.csi.k8s.io",
  };
}

/**
 * Waits until no delivery is waiting or in flight. A receiver records an
 * event before its answer reaches the forwarder, so the forwarder's counters
 * lag the receiver's view by one round trip.
 */
export async function waitForIdle(forwarder: Forwarder, timeoutMs = 10_000): Promise<void> {
  await waitFor(
    () => forwarder.stats().destinations.every((d) => d.waiting === 0 && d.inFlight === 0),
    "idle delivery queues",
    timeoutMs,
  );
}
