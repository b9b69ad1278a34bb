// The system shape `npm start` runs (sandbox/run-system.ts), for the
// throughput and bind-latency benches: the sandbox, each function its own
// process as `npm run serve` starts it, admission over HTTPS registered as
// mutating and validating webhooks (caBundle), and the watch forwarder
// (in this process) feeding the controllers. No resync tick: every change
// reaches the controllers as a forwarded watch event.
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { type Forwarder, startForwarder } from "../shared/forwarder/index.ts";
import { KubeJsonClient } from "../shared/kube/json-client.ts";
import { createLogger } from "../shared/log.ts";
import { generateCertificates } from "../shared/tls/certificates.ts";
import {
  type BenchSandbox,
  DRIVER_NAME,
  peakRssMiB,
  rssMiB,
  type SpawnedFunction,
  serveArgs,
  spawnFunction,
  startBenchSandbox,
} from "./support.ts";

type ControllerName = "binder" | "provisioner";

const KINDS: Record<ControllerName, string[]> = {
  binder: ["PersistentVolumeClaim", "PersistentVolume"],
  provisioner: ["PersistentVolumeClaim", "PersistentVolume"],
};

export interface SystemOptions {
  controllers: readonly ControllerName[];
  admission: boolean;
  /** Forwarder deliveries in flight per function. Default the forwarder's (16). */
  concurrency?: number;
  /** Replay every existing object to the functions at start. Default true (the forwarder's default). */
  replayExisting?: boolean;
  /** Runs on the sandbox before any function starts (seeding). */
  before?: (bs: BenchSandbox) => void | Promise<void>;
}

export interface BenchSystem {
  bs: BenchSandbox;
  /** A client of the sandbox API (the bench's own requests: count them out of the figures). */
  kube: KubeJsonClient;
  functions: SpawnedFunction[];
  forwarder: Forwarder;
  /** VmHWM of each function process now, MiB. */
  peakRss(): Record<string, number>;
  /** VmRSS of each function process once the system was up, before any load, MiB. */
  idleRss: Record<string, number>;
  close(): Promise<void>;
}

function webhook(
  name: string,
  url: string,
  caBundle: string,
  group: string,
  resource: string,
  operations: string[],
) {
  return {
    name,
    clientConfig: { url, caBundle },
    rules: [{ operations, apiGroups: [group], apiVersions: ["v1"], resources: [resource] }],
    sideEffects: "None",
    admissionReviewVersions: ["v1"],
    // As `npm start` registers them; failures are counted (sandbox admission.ignoredFailures).
    failurePolicy: "Ignore",
    timeoutSeconds: 5,
  };
}

async function startAdmission(bs: BenchSandbox): Promise<SpawnedFunction> {
  const certs = generateCertificates({
    service: "admission",
    namespace: "sandbox",
    extraDnsNames: ["127.0.0.1"],
  });
  const certDir = join(bs.dir, "certs");
  await mkdir(certDir, { recursive: true });
  await writeFile(join(certDir, "tls.crt"), certs.cert);
  await writeFile(join(certDir, "tls.key"), certs.key, { mode: 0o600 });
  const admission = await spawnFunction({
    name: "admission",
    args: serveArgs(),
    env: {
      ...bs.env,
      FUNCTION: "admission",
      TLS_CERT_FILE: join(certDir, "tls.crt"),
      TLS_KEY_FILE: join(certDir, "tls.key"),
      PROVISIONER_DRIVERS: DRIVER_NAME,
    },
  });
  const ca = Buffer.from(certs.caCert).toString("base64");
  const url = admission.url;
  const registry = bs.sandbox.apiServer.registry;
  registry.seed({
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "MutatingWebhookConfiguration",
    metadata: { name: "kube-storage-functions" },
    webhooks: [
      webhook(
        "pvc.mutate.storage.kube-storage-functions.io",
        `${url}/mutate/persistentvolumeclaims`,
        ca,
        "",
        "persistentvolumeclaims",
        ["CREATE"],
      ),
      webhook(
        "pv.mutate.storage.kube-storage-functions.io",
        `${url}/mutate/persistentvolumes`,
        ca,
        "",
        "persistentvolumes",
        ["CREATE"],
      ),
    ],
  });
  registry.seed({
    apiVersion: "admissionregistration.k8s.io/v1",
    kind: "ValidatingWebhookConfiguration",
    metadata: { name: "kube-storage-functions" },
    webhooks: [
      webhook(
        "pvc.validate.storage.kube-storage-functions.io",
        `${url}/validate/persistentvolumeclaims`,
        ca,
        "",
        "persistentvolumeclaims",
        ["UPDATE"],
      ),
      webhook(
        "va.validate.storage.kube-storage-functions.io",
        `${url}/validate/volumeattachments`,
        ca,
        "storage.k8s.io",
        "volumeattachments",
        ["CREATE"],
      ),
    ],
  });
  return admission;
}

export async function startSystem(options: SystemOptions): Promise<BenchSystem> {
  const bs = await startBenchSandbox();
  const functions: SpawnedFunction[] = [];
  let forwarder: Forwarder | undefined;
  let kube: KubeJsonClient | undefined;
  try {
    await options.before?.(bs);
    if (options.admission) functions.push(await startAdmission(bs));
    const controllers = await Promise.all(
      options.controllers.map((name) =>
        spawnFunction({ name, args: serveArgs(), env: { ...bs.env, FUNCTION: name } }),
      ),
    );
    functions.push(...controllers);
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(bs.sandbox.kubeconfigPath);
    forwarder = startForwarder({
      kubeConfig,
      routes: controllers.map((f) => ({ url: `${f.url}/`, kinds: KINDS[f.name as ControllerName] })),
      logger: createLogger({ name: "forwarder", level: "warn" }),
      ...(options.concurrency ? { concurrency: options.concurrency } : {}),
      ...(options.replayExisting === false ? { replayExisting: false } : {}),
      shutdownGraceMs: 1000,
    });
    await forwarder.ready;
    kube = new KubeJsonClient(kubeConfig);
  } catch (err) {
    await forwarder?.close();
    await Promise.all(functions.map((f) => f.stop()));
    await bs.close();
    throw err;
  }
  const fwd = forwarder;
  const client = kube;
  return {
    bs,
    kube: client,
    functions,
    forwarder: fwd,
    peakRss: () => Object.fromEntries(functions.map((f) => [f.name, peakRssMiB(f.child.pid)])),
    idleRss: Object.fromEntries(functions.map((f) => [f.name, rssMiB(f.child.pid)])),
    close: async () => {
      await fwd.close();
      await client.close();
      await Promise.all(functions.map((f) => f.stop()));
      await bs.close();
    },
  };
}
