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
}

export interface CsiDriverHandle {
  /** `unix:///absolute/path`, as CSI_ENDPOINT takes it. */
  endpoint: string;
  socketPath: string;
  adminUrl: string;
  driver: CsiDriver;
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
  await new Promise<void>((done, fail) =>
    server.bindAsync(endpoint, ServerCredentials.createInsecure(), (err) => (err ? fail(err) : done())),
  );
  let admin: AdminServer;
  try {
    admin = await startAdminServer(
      driver,
      () => ({ name: driver.config.name, nodeId: driver.config.nodeId, endpoint, dir }),
      options.adminPort ?? 0,
    );
  } catch (err) {
    server.forceShutdown();
    throw err;
  }

  let closing: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      await Promise.all([shutdown(server), admin.close(), driver.close()]);
      await rm(socketPath, { force: true });
    })();
    return closing;
  };
  return { endpoint, socketPath, adminUrl: admin.url, driver, close };
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
