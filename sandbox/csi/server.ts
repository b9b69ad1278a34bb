// Starts the sandbox CSI driver: gRPC on a unix socket plus the loopback
// admin endpoint. Used by the sandbox, the standalone entry and the tests.
import { lstat, mkdir, rm } from "node:fs/promises";
import { createConnection } from "node:net";
import { join, resolve } from "node:path";
import { Server, ServerCredentials } from "@grpc/grpc-js";
import { type AdminServer, startAdminServer } from "./admin.ts";
import type { CsiDriverOptions } from "./config.ts";
import { CsiDriver } from "./driver.ts";
import { addCsiServices } from "./grpc.ts";

export interface StartCsiDriverOptions extends CsiDriverOptions {
  /** Unix socket to serve on; default <dir>/csi.sock. */
  socketPath?: string;
  /** Admin HTTP port on 127.0.0.1; 0 (default) picks a free one. */
  adminPort?: number;
  /**
   * Further nodes, each with a node plugin of its own (Identity and Node
   * services on <dir>/node-<name>.sock), as a DaemonSet runs one per node.
   * The driver's own node (nodeId) is served on the main socket.
   */
  nodes?: readonly string[];
}

export interface CsiDriverHandle {
  /** `unix:///absolute/path`, as CSI_ENDPOINT takes it. */
  endpoint: string;
  socketPath: string;
  adminUrl: string;
  driver: CsiDriver;
  /** Node name → the endpoint of the node plugin running there (the driver's own node: `endpoint`). */
  nodeEndpoints: Record<string, string>;
  close(): Promise<void>;
}

/** sun_path holds 108 bytes including the terminating NUL on Linux. */
const maxSocketPathBytes = 107;
const shutdownGraceMs = 2000;

export async function startCsiDriver(options: StartCsiDriverOptions): Promise<CsiDriverHandle> {
  const dir = resolve(options.dir);
  await mkdir(dir, { recursive: true });
  const socketPath = resolve(options.socketPath ?? join(dir, "csi.sock"));
  if (Buffer.byteLength(socketPath) > maxSocketPathBytes) {
    throw new Error(`CSI socket path is longer than ${maxSocketPathBytes} bytes: ${socketPath}`);
  }
  await removeStaleSocket(socketPath);

  const driver = await CsiDriver.open({ ...options, dir });
  const server = new Server();
  addCsiServices(server, driver);
  const endpoint = `unix://${socketPath}`;
  await bind(server, endpoint);
  const nodeEndpoints: Record<string, string> = { [driver.config.nodeId]: endpoint };
  const nodeServers: { server: Server; socketPath: string }[] = [];
  let admin: AdminServer;
  try {
    for (const node of options.nodes ?? []) {
      if (node in nodeEndpoints) continue;
      const nodeSocket = join(dir, `node-${node}.sock`);
      if (Buffer.byteLength(nodeSocket) > maxSocketPathBytes) {
        throw new Error(`CSI socket path is longer than ${maxSocketPathBytes} bytes: ${nodeSocket}`);
      }
      await removeStaleSocket(nodeSocket);
      const nodeServer = new Server();
      addCsiServices(nodeServer, driver, { node, controller: false });
      nodeServers.push({ server: nodeServer, socketPath: nodeSocket });
      await bind(nodeServer, `unix://${nodeSocket}`);
      nodeEndpoints[node] = `unix://${nodeSocket}`;
    }
    admin = await startAdminServer(
      driver,
      () => ({ name: driver.config.name, nodeId: driver.config.nodeId, endpoint, nodeEndpoints, dir }),
      options.adminPort ?? 0,
    );
  } catch (err) {
    server.forceShutdown();
    for (const n of nodeServers) n.server.forceShutdown();
    throw err;
  }

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      await Promise.all([
        shutdown(server),
        ...nodeServers.map((n) => shutdown(n.server)),
        admin.close(),
        driver.close(),
      ]);
      await Promise.all(
        [socketPath, ...nodeServers.map((n) => n.socketPath)].map((p) => rm(p, { force: true })),
      );
    })();
    return closing;
  };
  return { endpoint, socketPath, adminUrl: admin.url, driver, nodeEndpoints, close };
}

function bind(server: Server, endpoint: string): Promise<void> {
  return new Promise<void>((done, fail) =>
    server.bindAsync(endpoint, ServerCredentials.createInsecure(), (err) => (err ? fail(err) : done())),
  );
}

/** Lets in-flight calls finish, but not forever (a call may sleep in injected latency). */
function shutdown(server: Server): Promise<void> {
  return new Promise((done) => {
    const timer = setTimeout(() => {
      server.forceShutdown();
      done();
    }, shutdownGraceMs);
    server.tryShutdown(() => {
      clearTimeout(timer);
      done();
    });
  });
}

/**
 * A socket file left by a driver that was killed blocks bind. Remove it, but
 * only if it is a socket nobody answers on: never steal a live driver's
 * socket or delete some other file.
 */
async function removeStaleSocket(path: string): Promise<void> {
  let isSocket: boolean;
  try {
    isSocket = (await lstat(path)).isSocket();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
    throw err;
  }
  if (!isSocket) throw new Error(`${path} exists and is not a socket; refusing to replace it`);
  const live = await new Promise<boolean>((done) => {
    const probe = createConnection(path);
    probe.once("connect", () => {
      probe.destroy();
      done(true);
    });
    probe.once("error", () => done(false));
  });
  if (live) throw new Error(`${path} is in use by a running process`);
  await rm(path, { force: true });
}
