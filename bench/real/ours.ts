// Our control plane on a real API server, as deployed: each function the
// bundle of `npm run build:functions` in the image's environment (every one the workloads use: BENCH_FUNCTIONS), the
// admission function over HTTPS registered with kube-apiserver by
// `clientConfig.url` + `caBundle` (deploy/webhooks.yaml's hooks and
// failure policies), the bundled forwarder as its own process feeding the
// controllers the kinds deploy/sources.yaml gives them, a /resync call to
// every controller each minute (the PingSources), and the sandbox CSI
// driver as a standalone gRPC server standing in for the storage backend.

import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { CONTROLLERS_NODE_OPTIONS } from "../../functions/node-options.ts";
import { systemFunctions } from "../../sandbox/system.ts";
import { webhookConfigurations } from "../../scripts/webhook-configurations.ts";
import { isNotFound } from "../../shared/kube/api-errors.ts";
import type { KubeJsonClient } from "../../shared/kube/json-client.ts";
import {
  mutatingWebhookConfigurations,
  persistentVolumeClaims,
  type ResourceDescriptor,
  validatingWebhookConfigurations,
} from "../../shared/kube/resources.ts";
import type { KubeObject } from "../../shared/kube/types.ts";
import { generateCertificates } from "../../shared/tls/certificates.ts";
import {
  peakRssMiB,
  progress,
  REPO,
  type SpawnedFunction,
  shippedFunction,
  spawnFunction,
} from "../support.ts";
import type { NamedProcess } from "./cpu-meter.ts";
import { type Child, readyLine, startChild } from "./processes.ts";

export const WEBHOOK_CONFIG_NAME = "kube-storage-functions-bench";

/**
 * The workloads run no pods and the bench's node is not controller-managed
 * (no volumes.kubernetes.io/controller-managed-attach-detach), so the
 * attach/detach controller has nothing to do; it runs on neither side.
 */
export const BENCH_FUNCTIONS = systemFunctions
  .filter((f) => f.name !== "attach-detach" && f.name !== "resizer")
  // No capacity tracking on either side (upstream's provisioner runs without --enable-capacity here).
  .map((f) =>
    f.name === "provisioner" ? { ...f, kinds: f.kinds.filter((k) => k.startsWith("PersistentVolume")) } : f,
  );

/** A function the bench starts: the kinds the forwarder sends it, and environment of its own. */
export interface BenchFunction {
  name: string;
  kinds: readonly string[];
  env?: Record<string, string>;
}

/** With --one-process: admission, and the same controllers in one process fed the union of their kinds. */
export function oneProcessFunctions(): BenchFunction[] {
  const controllers = BENCH_FUNCTIONS.filter((f) => f.kinds.length > 0);
  return [
    ...BENCH_FUNCTIONS.filter((f) => f.kinds.length === 0),
    {
      name: "controllers",
      kinds: [...new Set(controllers.flatMap((f) => f.kinds))],
      env: { CONTROLLERS: controllers.map((f) => f.name).join(","), NODE_OPTIONS: CONTROLLERS_NODE_OPTIONS },
    },
  ];
}

/** NODE_OPTIONS with a V8 CPU profile of the process written to <dir>/<name>/ as it exits; unchanged without a dir. */
export function withCpuProfile(
  nodeOptions: string | undefined,
  dir: string | undefined,
  name: string,
): string | undefined {
  if (dir === undefined) return nodeOptions;
  return [nodeOptions, "--cpu-prof", `--cpu-prof-dir=${join(dir, name)}`].filter(Boolean).join(" ");
}

export interface StackOptions {
  kubeconfig: string;
  kube: KubeJsonClient;
  dir: string;
  driverName: string;
  /** The CSI node id the driver answers for (the bench's node). */
  nodeId: string;
  /** A StorageClass of the driver: the webhook is ready once a dry-run claim of it comes back mutated. */
  probeClass: string;
  resyncSeconds: number;
  forwarderConcurrency?: number;
  /** WORKERS of every controller function; undefined: each function's default. */
  workers?: number;
  /** The controllers in one process (FUNCTION=controllers). */
  oneProcess?: boolean;
  /** Each of our processes writes a V8 CPU profile to <cpuProfDir>/<name>/ as it stops. */
  cpuProfDir?: string;
}

/** A control plane under test: ours or upstream's. */
export interface Stack {
  name: "ours" | "upstream";
  csiEndpoint: string;
  /** Names of the volumes the driver holds, when it can tell (the sandbox driver's admin endpoint). */
  backingVolumes?(): Promise<string[]>;
  /** Peak RSS of each function process so far (VmHWM), MiB; ours only. */
  peakRssMiB?(): Record<string, number>;
  /** The stack's processes, named as the CPU figures name them. */
  processes(): NamedProcess[];
  /** The last output of each process, for a failed workload's report. */
  diagnostics(): Record<string, string>;
  stop(): Promise<void>;
}

async function deleteIfThere(kube: KubeJsonClient, r: ResourceDescriptor, name: string): Promise<void> {
  await kube.delete(r, name).catch((err: unknown) => {
    if (!isNotFound(err)) throw err;
  });
}

export async function removeWebhooks(kube: KubeJsonClient): Promise<void> {
  await deleteIfThere(kube, mutatingWebhookConfigurations, WEBHOOK_CONFIG_NAME);
  await deleteIfThere(kube, validatingWebhookConfigurations, WEBHOOK_CONFIG_NAME);
}

async function registerWebhooks(options: StackOptions, url: string, caCert: string): Promise<void> {
  const { kube } = options;
  await removeWebhooks(kube);
  for (const config of await webhookConfigurations(WEBHOOK_CONFIG_NAME, url, caCert))
    await kube.create(
      config.kind === "MutatingWebhookConfiguration"
        ? mutatingWebhookConfigurations
        : validatingWebhookConfigurations,
      config,
    );
  // kube-apiserver learns of webhook configurations from a watch: wait until a dry run is mutated.
  const deadline = performance.now() + 30_000;
  for (;;) {
    const dry = await kube.create<KubeObject>(
      persistentVolumeClaims,
      {
        apiVersion: "v1",
        kind: "PersistentVolumeClaim",
        metadata: { name: "ksf-bench-webhook-probe", namespace: "default" },
        spec: {
          accessModes: ["ReadWriteOnce"],
          resources: { requests: { storage: "1Gi" } },
          storageClassName: options.probeClass,
        },
      },
      { dryRun: true },
    );
    if (dry.metadata.annotations?.["volume.kubernetes.io/storage-provisioner"] !== undefined) return;
    if (performance.now() > deadline)
      throw new Error("kube-apiserver did not call our mutating webhook within 30 s");
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The sandbox CSI driver as its own process; resolves with its endpoint and admin URL. */
export async function startSandboxDriver(
  dir: string,
  driverName: string,
  nodeId: string,
): Promise<{ child: Child; endpoint: string; adminUrl: string }> {
  const child = startChild(
    "sandbox CSI driver",
    process.execPath,
    [join(REPO, "sandbox", "csi", "main.ts")],
    {
      CSI_DIR: join(dir, "csi"),
      CSI_SOCKET: join(dir, "csi.sock"),
      DRIVER_NAME: driverName,
      CSI_NODE_ID: nodeId,
    },
  );
  const ready = await readyLine(child, (l) =>
    typeof l.csiEndpoint === "string" && typeof l.csiAdmin === "string"
      ? { endpoint: l.csiEndpoint, adminUrl: l.csiAdmin }
      : undefined,
  );
  return { child, ...ready };
}

export async function startOurStack(options: StackOptions): Promise<Stack> {
  const driver = await startSandboxDriver(options.dir, options.driverName, options.nodeId);
  const functions: SpawnedFunction[] = [];
  let forwarder: SpawnedFunction | undefined;
  let resync: NodeJS.Timeout | undefined;
  const stop = async (): Promise<void> => {
    clearInterval(resync);
    await forwarder?.stop();
    await Promise.all(functions.map((f) => f.stop()));
    await removeWebhooks(options.kube).catch(() => undefined);
    await driver.child.stop();
  };
  try {
    const certs = generateCertificates({
      service: "kube-storage-functions-admission",
      namespace: "kube-storage-functions",
      extraDnsNames: ["localhost", "127.0.0.1"],
    });
    const certDir = join(options.dir, "certs");
    await mkdir(certDir, { recursive: true });
    await writeFile(join(certDir, "tls.crt"), certs.cert);
    await writeFile(join(certDir, "tls.key"), certs.key, { mode: 0o600 });
    const shipped = await shippedFunction();
    const env = {
      ...shipped.env,
      KUBECONFIG: options.kubeconfig,
      CSI_ENDPOINT: driver.endpoint,
      DRIVER_NAME: options.driverName,
      PROVISIONER_DRIVERS: options.driverName,
      ...(options.workers ? { WORKERS: String(options.workers) } : {}),
    };
    const functionsRun: BenchFunction[] = options.oneProcess ? oneProcessFunctions() : [...BENCH_FUNCTIONS];
    const profiled = (nodeOptions: string | undefined, name: string): { NODE_OPTIONS?: string } => {
      const value = withCpuProfile(nodeOptions, options.cpuProfDir, name);
      return value === undefined ? {} : { NODE_OPTIONS: value };
    };
    const started = await Promise.all(
      functionsRun.map((f) =>
        spawnFunction({
          name: f.name,
          args: shipped.args,
          env: {
            ...env,
            ...f.env,
            ...profiled(f.env?.NODE_OPTIONS ?? shipped.env.NODE_OPTIONS, f.name),
            FUNCTION: f.name,
            // Under the bench's 5 s stop: a kube-apiserver connection that never goes idle would
            // otherwise hold the process past it, and a SIGKILL writes no --cpu-prof profile.
            SHUTDOWN_GRACE_MS: "2000",
            ...(f.name === "admission"
              ? { TLS_CERT_FILE: join(certDir, "tls.crt"), TLS_KEY_FILE: join(certDir, "tls.key") }
              : {}),
          },
          readyTimeoutMs: 60_000,
        }),
      ),
    );
    functions.push(...started);
    const admission = started.find((f) => f.name === "admission")!;
    await registerWebhooks(options, admission.url, certs.caCert);
    const controllers = started.filter((f) => f.name !== "admission");
    const routes = controllers
      .map((f) => `${f.url}/=${functionsRun.find((s) => s.name === f.name)!.kinds.join(",")}`)
      .join(";");
    forwarder = await spawnFunction({
      name: "forwarder",
      args: [join(REPO, "shared", "forwarder", "main.ts")],
      env: {
        KUBECONFIG: options.kubeconfig,
        FORWARDER_ROUTES: routes,
        ...profiled(process.env.NODE_OPTIONS, "forwarder"),
        ...(options.forwarderConcurrency
          ? { FORWARDER_CONCURRENCY: String(options.forwarderConcurrency) }
          : {}),
        SHUTDOWN_GRACE_MS: "1000",
      },
      readyTimeoutMs: 60_000,
    });
    resync = setInterval(() => {
      for (const f of controllers)
        void fetch(`${f.url}/resync`, { method: "POST" })
          .then((r) => r.arrayBuffer())
          .catch(() => undefined);
    }, options.resyncSeconds * 1000);
    progress(`ours: ${started.map((f) => f.name).join(", ")}, forwarder and the sandbox CSI driver are up`);
  } catch (err) {
    await stop();
    throw err;
  }
  return {
    name: "ours",
    csiEndpoint: driver.endpoint,
    backingVolumes: async () => {
      const body = (await (await fetch(`${driver.adminUrl}/volumes`)).json()) as {
        volumes?: { volumeId?: string }[];
      };
      return (body.volumes ?? []).map((v) => String(v.volumeId));
    },
    peakRssMiB: () => Object.fromEntries(functions.map((f) => [f.name, peakRssMiB(f.child.pid)])),
    processes: () => [
      ...functions.map((f) => ({ name: f.name, pid: f.child.pid })),
      ...(forwarder ? [{ name: "forwarder", pid: forwarder.child.pid }] : []),
      { name: "csi-driver", pid: driver.child.child.pid },
    ],
    diagnostics: () => ({
      ...Object.fromEntries(functions.map((f) => [f.name, f.stderr().slice(-2000)])),
      ...(forwarder ? { forwarder: forwarder.stderr().slice(-2000) } : {}),
      csiDriver: driver.child.output().slice(-2000),
    }),
    stop,
  };
}
