// A tiny CSI driver for the client tests: a real grpc-js server on a real
// unix socket, built from csi.proto with loader options different from
// ours (snake_case fields, no defaults), so the tests check what goes over
// the wire rather than our own conversions against themselves.
//
// Every method answers from a default handler unless a test overrides it;
// calls and requests are recorded per method.

import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { ServiceDefinition, UntypedServiceImplementation } from "@grpc/grpc-js";
import { type Metadata, Server, ServerCredentials } from "@grpc/grpc-js";
import type { PackageDefinition } from "@grpc/proto-loader";
import { loadSync } from "@grpc/proto-loader";
import { CSI_PROTO } from "../../scripts/generate-csi.ts";

export const FAKE_DRIVER_NAME = "fake.csi.example.com";

/** A snake_case message as the server's loader sees it. */
export type WireMessage = Record<string, unknown>;
export type Handler = (request: WireMessage) => WireMessage | Promise<WireMessage>;

/** Throw from a handler to answer with this gRPC status. */
export class StatusError extends Error {
  readonly code: number;
  readonly details: string;
  readonly metadata: Metadata | undefined;
  constructor(code: number, details: string, metadata?: Metadata) {
    super(details);
    this.code = code;
    this.details = details;
    this.metadata = metadata;
  }
}

const serverDefinition: PackageDefinition = loadSync(CSI_PROTO, {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: false,
  oneofs: true,
});

function service(name: string): ServiceDefinition {
  return serverDefinition[`csi.v1.${name}`] as ServiceDefinition;
}

const defaultHandlers: Record<string, Handler> = {
  GetPluginInfo: () => ({ name: FAKE_DRIVER_NAME, vendor_version: "0.0.1", manifest: { build: "test" } }),
  GetPluginCapabilities: () => ({
    capabilities: [
      { service: { type: "CONTROLLER_SERVICE" } },
      { service: { type: "VOLUME_ACCESSIBILITY_CONSTRAINTS" } },
      { volume_expansion: { type: "ONLINE" } },
    ],
  }),
  Probe: () => ({ ready: { value: true } }),
  ControllerGetCapabilities: () => ({
    capabilities: ["CREATE_DELETE_VOLUME", "PUBLISH_UNPUBLISH_VOLUME", "LIST_VOLUMES", "EXPAND_VOLUME"].map(
      (type) => ({ rpc: { type } }),
    ),
  }),
  CreateVolume: (request) => ({
    volume: { volume_id: `vol-${String(request.name)}`, capacity_bytes: "1073741824" },
  }),
  DeleteVolume: () => ({}),
  ControllerPublishVolume: () => ({ publish_context: { devicePath: "/dev/fake0" } }),
  ControllerUnpublishVolume: () => ({}),
  NodeGetInfo: () => ({ node_id: "node-1" }),
};

export interface FakeDriver {
  /** unix:///... */
  endpoint: string;
  socketPath: string;
  /** Calls per method name (e.g. "Probe"). */
  calls(method: string): number;
  /** Requests per method, as the server decoded them. */
  requests(method: string): WireMessage[];
  /** Replace the handler of one method. */
  handle(method: string, handler: Handler): void;
  /** Make one method wait before answering. */
  delay(method: string, ms: number): void;
  /** Back to the default handlers, without delays. */
  reset(): void;
  close(): Promise<void>;
}

export interface FakeDriverOptions {
  /** Bind this socket instead of a fresh temp one. */
  socketPath?: string;
}

export async function startFakeDriver(options: FakeDriverOptions = {}): Promise<FakeDriver> {
  const dir = options.socketPath === undefined ? await mkdtemp(join(tmpdir(), "csi-fake-")) : undefined;
  const socketPath = options.socketPath ?? join(dir ?? "", "csi.sock");
  const counts = new Map<string, number>();
  const received = new Map<string, WireMessage[]>();
  const overrides = new Map<string, Handler>();
  const delays = new Map<string, number>();

  const server = new Server();
  for (const name of ["Identity", "Controller", "Node"]) {
    const definition = service(name);
    const implementation: UntypedServiceImplementation = {};
    for (const method of Object.keys(definition)) {
      implementation[method] = (
        call: { request: WireMessage },
        callback: (err: object | null, value?: WireMessage) => void,
      ) => {
        counts.set(method, (counts.get(method) ?? 0) + 1);
        received.set(method, [...(received.get(method) ?? []), call.request]);
        const handler = overrides.get(method) ?? defaultHandlers[method];
        const run = async (): Promise<WireMessage> => {
          const wait = delays.get(method);
          if (wait !== undefined) await sleep(wait);
          if (handler === undefined) throw new StatusError(12, `${method} is not implemented by the fake`);
          return handler(call.request);
        };
        run().then(
          (value) => callback(null, value),
          (err: unknown) =>
            callback(
              err instanceof StatusError
                ? { code: err.code, details: err.details, metadata: err.metadata }
                : { code: 2, details: String(err) },
            ),
        );
      };
    }
    server.addService(definition, implementation);
  }

  await new Promise<void>((resolve, reject) => {
    server.bindAsync(`unix://${socketPath}`, ServerCredentials.createInsecure(), (err) =>
      err ? reject(err) : resolve(),
    );
  });

  return {
    endpoint: `unix://${socketPath}`,
    socketPath,
    calls: (method) => counts.get(method) ?? 0,
    requests: (method) => received.get(method) ?? [],
    handle: (method, handler) => overrides.set(method, handler),
    delay: (method, ms) => delays.set(method, ms),
    reset() {
      overrides.clear();
      delays.clear();
    },
    async close() {
      server.forceShutdown();
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    },
  };
}
