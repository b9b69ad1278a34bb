// `node scripts/prime-code-cache.ts <bundle dir>`: writes the V8 code cache of
// each function bundle of build:functions (<name>/index.cjs.v8cache, see
// functions/load-bundle.ts), so a process that starts from the bundle skips
// compiling what loading its modules runs (bench figure 1). The image does
// this at build time.
//
// Each bundle is loaded by the bundled serve.mjs --write-code-cache, in its
// own process with the environment the functions run with
// (functions/node-options.ts): V8 takes a cache only from the same node
// binary with the same V8 flags, and NODE_OPTIONS sets some. So prime with
// the node binary that will run the functions; unlike Node's compile cache,
// the user id and the bundles' paths do not matter.
//
// serve.mjs also builds each function before it writes the cache, so what
// starting compiles is cached too: connecting to the driver was a quarter
// of a CSI function's cold start. For that, this script gives them a kubeconfig
// naming an API server nobody calls (build() does not), and a CSI driver on
// a unix socket that only introduces itself (Identity, and the controller's
// capabilities).

import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Server, ServerCredentials, type UntypedServiceImplementation } from "@grpc/grpc-js";
import { FUNCTION_PROCESS_ENV } from "../functions/node-options.ts";
import { csiServiceDefinition } from "../shared/csi/proto.ts";
import { bundleFileName, SERVE_BUNDLE } from "./build-lambda.ts";

/** The functions built under `bundleDir`: each directory holding an index.cjs. */
export async function bundledFunctions(bundleDir: string): Promise<string[]> {
  const entries = await readdir(bundleDir, { withFileTypes: true });
  return entries
    .filter((e) => e.isDirectory() && existsSync(join(bundleDir, e.name, bundleFileName("cjs"))))
    .map((e) => e.name)
    .sort();
}

/** A kubeconfig whose server is never called: build() reads it, only serving talks to the API. */
const UNCALLED_KUBECONFIG = `apiVersion: v1
kind: Config
clusters:
  - name: prime
    cluster: { server: "https://127.0.0.1:9" }
users:
  - name: prime
    user: { token: prime }
contexts:
  - name: prime
    context: { cluster: prime, user: prime }
current-context: prime
`;

/** What the CSI functions ask a driver while they build: its name, that it is ready, what it can do. */
const IDENTITY_ANSWERS: Readonly<Record<string, object>> = {
  GetPluginInfo: { name: "prime.code-cache.invalid", vendorVersion: "0" },
  Probe: { ready: { value: true } },
  GetPluginCapabilities: {
    capabilities: ["CONTROLLER_SERVICE", "VOLUME_ACCESSIBILITY_CONSTRAINTS"].map((type) => ({
      service: { type },
    })),
  },
  ControllerGetCapabilities: {
    // Whatever any CSI function requires to start (the resizer: expansion or modification).
    capabilities: [
      "CREATE_DELETE_VOLUME",
      "PUBLISH_UNPUBLISH_VOLUME",
      "LIST_VOLUMES_PUBLISHED_NODES",
      "EXPAND_VOLUME",
      "MODIFY_VOLUME",
    ].map((type) => ({ rpc: { type } })),
  },
};

/**
 * A CSI driver on `socket` that answers IDENTITY_ANSWERS (and UNIMPLEMENTED to
 * anything else), counting the calls into `calls`.
 */
async function startIntroducingDriver(socket: string, calls: Record<string, number>): Promise<Server> {
  const server = new Server();
  const answering = (names: string[]): UntypedServiceImplementation =>
    Object.fromEntries(
      names.map((name) => [
        name,
        (_call: unknown, callback: (err: null, answer: object) => void) => {
          calls[name] = (calls[name] ?? 0) + 1;
          callback(null, IDENTITY_ANSWERS[name] ?? {});
        },
      ]),
    );
  server.addService(
    csiServiceDefinition("Identity"),
    answering(["GetPluginInfo", "Probe", "GetPluginCapabilities"]),
  );
  server.addService(csiServiceDefinition("Controller"), answering(["ControllerGetCapabilities"]));
  await new Promise<void>((resolvePromise, reject) =>
    server.bindAsync(`unix:${socket}`, ServerCredentials.createInsecure(), (err) =>
      err ? reject(err) : resolvePromise(),
    ),
  );
  return server;
}

function writeCodeCache(bundleDir: string, name: string, env: Record<string, string>): Promise<void> {
  const child = spawn(process.execPath, [join(bundleDir, SERVE_BUNDLE), "--write-code-cache"], {
    env: { ...process.env, ...FUNCTION_PROCESS_ENV, ...env, FUNCTION: name },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (d: Buffer) => {
    stderr = (stderr + d.toString()).slice(-4096);
  });
  return new Promise((resolvePromise, reject) => {
    // A build that never ends, or a handle close() left open, must fail an image build, not hang it.
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`writing the code cache of ${name} took over ${PRIME_TIMEOUT_MS} ms: ${stderr}`));
    }, PRIME_TIMEOUT_MS);
    child.once("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolvePromise();
      else reject(new Error(`writing the code cache of ${name} failed (${code ?? signal}): ${stderr}`));
    });
  });
}

/** Far longer than a build() takes with the introducing driver (well under a second). */
const PRIME_TIMEOUT_MS = 60_000;

export interface PrimedCodeCaches {
  /** The functions whose bundle has a code cache now. */
  functions: string[];
  /** Calls the CSI functions made to the introducing driver while they built, by method. */
  driverCalls: Record<string, number>;
}

/** Writes the code cache of every function bundle under `bundleDir`. */
export async function primeCodeCache(bundleDir: string): Promise<PrimedCodeCaches> {
  const dir = resolve(bundleDir);
  const names = await bundledFunctions(dir);
  const scratch = await mkdtemp(join(tmpdir(), "ksf-prime-"));
  const kubeconfig = join(scratch, "kubeconfig");
  const socket = join(scratch, "csi.sock");
  await writeFile(kubeconfig, UNCALLED_KUBECONFIG);
  const driverCalls: Record<string, number> = {};
  const driver = await startIntroducingDriver(socket, driverCalls);
  try {
    // Only what build() reads: everything else keeps its default, as in a deployment.
    const env = { KUBECONFIG: kubeconfig, CSI_ENDPOINT: `unix://${socket}`, LOG_LEVEL: "error" };
    for (const name of names) await writeCodeCache(dir, name, env);
  } finally {
    driver.forceShutdown();
    await rm(scratch, { recursive: true, force: true });
  }
  return { functions: names, driverCalls };
}

if (import.meta.main) {
  const [bundleDir] = process.argv.slice(2);
  if (!bundleDir) {
    process.stderr.write("usage: node scripts/prime-code-cache.ts <bundle dir>\n");
    process.exit(2);
  }
  const primed = await primeCodeCache(bundleDir);
  process.stdout.write(`${JSON.stringify({ bundleDir, ...primed })}\n`);
}
