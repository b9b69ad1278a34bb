// The whole system on the embedded sandbox, as `npm start` runs it and the
// end-to-end tests drive it: the sandbox cluster (API server, CSI driver,
// scheduler, kubelets), every function as its own process the way `npm run
// serve` runs it (admission over HTTPS, registered as webhooks with a
// caBundle), the watch forwarder feeding the controllers, and a resync tick
// (what PingSources do in a cluster).
import { type ChildProcess, spawn } from "node:child_process";
import { mkdir, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { KubeConfig } from "@kubernetes/client-node";
import { type Forwarder, startForwarder } from "../shared/forwarder/index.ts";
import { KubeJsonClient } from "../shared/kube/json-client.ts";
import { namespaces } from "../shared/kube/resources.ts";
import { createLogger } from "../shared/log.ts";
import { generateCertificates } from "../shared/tls/certificates.ts";
import { registerAdmissionWebhooks } from "./admission-webhooks.ts";
import { type Sandbox, type SandboxOptions, startSandbox } from "./start.ts";

export interface RunningFunction {
  name: string;
  url: string;
  child: ChildProcess;
}

/** Each function, in start order, with the kinds the forwarder sends it. */
export const systemFunctions: readonly { name: string; kinds: readonly string[] }[] = [
  { name: "admission", kinds: [] },
  { name: "binder", kinds: ["PersistentVolumeClaim", "PersistentVolume"] },
  {
    name: "provisioner",
    // The rest feed capacity tracking (ENABLE_CAPACITY below).
    kinds: [
      "PersistentVolumeClaim",
      "PersistentVolume",
      "StorageClass",
      "Node",
      "CSINode",
      "CSIStorageCapacity",
    ],
  },
  {
    name: "attach-detach",
    kinds: ["Pod", "Node", "PersistentVolumeClaim", "PersistentVolume", "VolumeAttachment"],
  },
  { name: "attacher", kinds: ["VolumeAttachment", "PersistentVolume"] },
  { name: "protection", kinds: ["PersistentVolumeClaim", "PersistentVolume", "Pod"] },
  { name: "resizer", kinds: ["PersistentVolumeClaim", "PersistentVolume"] },
];

/**
 * What runs where kube-controller-manager's binder and attach/detach
 * controller cannot be turned off (managed clusters): only the functions that
 * replace a driver's CSI sidecars, and admission.
 */
export const sidecarFunctions: readonly string[] = ["admission", "provisioner", "attacher", "resizer"];

/** Where the sandbox's provisioner publishes CSIStorageCapacity objects. */
export const capacityNamespace = "kube-storage-functions";

export interface SystemOptions {
  /** Sandbox directory (kubeconfig, driver state, certificates). */
  dir: string;
  /** API server port; 0 picks a free one. */
  port?: number;
  /** Seconds between resync passes of every controller; 0 turns the tick off. */
  resyncSeconds: number;
  /** Sandbox settings (driver, nodes, scheduler, kubelets). */
  sandbox?: Omit<SandboxOptions, "dir" | "port">;
  /**
   * Capacity tracking: the provisioner publishes CSIStorageCapacity objects
   * (in namespace `capacityNamespace`) and the CSIDriver asks the scheduler
   * to honour them. Default true.
   */
  capacity?: boolean;
  /** Which of systemFunctions to run (default all); e.g. sidecarFunctions for managed-cluster mode. */
  functions?: readonly string[];
  /** Extra environment for every function process. */
  env?: Record<string, string>;
  /** LOG_LEVEL of the functions and the forwarder. Default warn. */
  logLevel?: string;
  /** Called as each piece comes up (npm start prints these). */
  progress?: (what: string, detail: string) => void;
  /** A function process that exits while the system runs. */
  onFunctionExit?: (name: string, code: number | null) => void;
}

export interface RunningSystem {
  sandbox: Sandbox;
  driverName: string;
  functions: RunningFunction[];
  /** A client of the sandbox API server. */
  kube: KubeJsonClient;
  kubeConfig: KubeConfig;
  url(name: string): string;
  /** Every controller's POST /resync, now. */
  resyncAll(): Promise<void>;
  stop(): Promise<void>;
}

function startFunction(
  name: string,
  env: Record<string, string>,
  logLevel: string,
): Promise<RunningFunction> {
  const child = spawn(process.execPath, ["functions/serve.ts"], {
    cwd: resolve(import.meta.dirname, ".."),
    env: { ...process.env, ...env, FUNCTION: name, PORT: "0", LOG_LEVEL: logLevel },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const lines = createInterface({ input: child.stdout! });
  return new Promise((resolvePromise, reject) => {
    const onExit = (code: number | null): void =>
      reject(new Error(`function ${name} exited with ${code} before it was ready`));
    child.once("exit", onExit);
    lines.once("line", (line) => {
      child.off("exit", onExit);
      const ready = JSON.parse(line) as { url?: string };
      resolvePromise({ name, url: String(ready.url), child });
    });
  });
}

function stopChild(child: ChildProcess): Promise<void> {
  return new Promise((done) => {
    if (child.exitCode !== null || child.signalCode !== null) return done();
    child.once("exit", () => done());
    child.kill("SIGTERM");
  });
}

/** What deploy/namespace.yaml creates in a cluster: where the functions' own objects live. */
async function createNamespace(kubeconfigPath: string, name: string): Promise<void> {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfigPath);
  const client = new KubeJsonClient(kc);
  try {
    await client.create(namespaces, { apiVersion: "v1", kind: "Namespace", metadata: { name } });
  } finally {
    await client.close();
  }
}

export async function startSystem(options: SystemOptions): Promise<RunningSystem> {
  const dir = resolve(options.dir);
  const logLevel = options.logLevel ?? "warn";
  const progress = options.progress ?? (() => undefined);
  const capacity = options.capacity ?? true;
  const sandbox = await startSandbox({
    storageCapacity: capacity,
    ...options.sandbox,
    port: options.port ?? 0,
    dir,
  });
  const driverName = sandbox.csi.driver.config.name;
  progress("API server", sandbox.apiServer.url);
  progress("kubeconfig", sandbox.kubeconfigPath);
  progress("CSI driver", `${sandbox.csi.endpoint} (${driverName})`);
  const functions: RunningFunction[] = [];
  let forwarder: Forwarder | undefined;
  let stopping = false;
  const stopAll = async (): Promise<void> => {
    stopping = true;
    await forwarder?.close();
    await Promise.all(functions.map((f) => stopChild(f.child)));
    await sandbox.close();
  };
  try {
    // The webhook needs HTTPS with a certificate the API server trusts through caBundle.
    const certs = generateCertificates({
      service: "admission",
      namespace: "sandbox",
      extraDnsNames: ["localhost", "127.0.0.1"],
    });
    const certDir = join(dir, "certs");
    await mkdir(certDir, { recursive: true });
    await writeFile(join(certDir, "tls.crt"), certs.cert);
    await writeFile(join(certDir, "tls.key"), certs.key, { mode: 0o600 });

    if (capacity) await createNamespace(sandbox.kubeconfigPath, capacityNamespace);
    const env = {
      KUBECONFIG: sandbox.kubeconfigPath,
      CSI_ENDPOINT: sandbox.csi.endpoint,
      DRIVER_NAME: driverName,
      PROVISIONER_DRIVERS: driverName,
      ...options.env,
    };
    const selected = systemFunctions.filter((f) => !options.functions || options.functions.includes(f.name));
    // All at once: each is its own process, and none needs another to start.
    const started = await Promise.allSettled(
      selected.map((f) => {
        const extra: Record<string, string> =
          f.name === "admission"
            ? { TLS_CERT_FILE: join(certDir, "tls.crt"), TLS_KEY_FILE: join(certDir, "tls.key") }
            : f.name === "provisioner" && capacity
              ? { ENABLE_CAPACITY: "true", NAMESPACE: capacityNamespace }
              : {};
        return startFunction(f.name, { ...env, ...extra }, logLevel);
      }),
    );
    for (const result of started) if (result.status === "fulfilled") functions.push(result.value);
    const failed = started.find((r) => r.status === "rejected");
    if (failed) throw failed.reason;
    for (const running of functions) {
      running.child.once("exit", (code) => {
        if (!stopping) options.onFunctionExit?.(running.name, code);
      });
      progress(running.name, running.url);
    }
    const admission = functions.find((r) => r.name === "admission");
    if (admission) {
      registerAdmissionWebhooks(sandbox.apiServer.registry, admission.url, certs.caCert);
      progress("webhooks", "registered with the sandbox API server (HTTPS, caBundle)");
    }

    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(sandbox.kubeconfigPath);
    forwarder = startForwarder({
      kubeConfig,
      routes: functions.flatMap((r) => {
        const kinds = systemFunctions.find((f) => f.name === r.name)!.kinds;
        return kinds.length > 0 ? [{ url: `${r.url}/`, kinds: [...kinds] }] : [];
      }),
      logger: createLogger({ name: "forwarder", level: logLevel }),
      shutdownGraceMs: 1000,
    });
    await forwarder.ready;
    const kinds = [...new Set(selected.flatMap((f) => f.kinds))];
    progress("forwarder", `watching ${kinds.join(", ")}`);

    const controllers = functions.filter((f) => f.name !== "admission");
    const resyncAll = async (): Promise<void> => {
      await Promise.all(
        controllers.map((r) =>
          fetch(`${r.url}/resync`, { method: "POST" })
            .then((res) => res.arrayBuffer())
            .catch(() => undefined),
        ),
      );
    };
    const timer =
      options.resyncSeconds > 0
        ? setInterval(() => void resyncAll(), options.resyncSeconds * 1000)
        : undefined;
    const kube = new KubeJsonClient(kubeConfig);
    let stopped: Promise<void> | undefined;
    return {
      sandbox,
      driverName,
      functions,
      kube,
      kubeConfig,
      url: (name) => {
        const f = functions.find((r) => r.name === name);
        if (!f) throw new Error(`no function ${name} in the system`);
        return f.url;
      },
      resyncAll,
      stop: () => {
        stopped ??= (async () => {
          if (timer) clearInterval(timer);
          await kube.close();
          await stopAll();
        })();
        return stopped;
      },
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}
