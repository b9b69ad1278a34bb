// The system shape `npm start` runs (sandbox/run-system.ts), for the
// throughput and bind-latency benches: the sandbox, each function its own
// process as the image runs it (bundled, with the image's environment), admission over HTTPS registered as
// mutating and validating webhooks (caBundle), and the watch forwarder
// feeding the controllers, as its own process (`npm run forwarder`) the way
// it is deployed: in the bench's process it would share one event loop with
// the sandbox API server, which is what the figures are limited by. No resync tick: every change reaches the
// controllers as a forwarded watch event.
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { registerAdmissionWebhooks } from "../sandbox/admission-webhooks.ts";
import { KubeJsonClient } from "../shared/kube/json-client.ts";
import { generateCertificates } from "../shared/tls/certificates.ts";
import {
  type BenchSandbox,
  DRIVER_NAME,
  peakRssMiB,
  REPO,
  rssMiB,
  type SpawnedFunction,
  shippedFunction,
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

/** Totals over every destination, from the forwarder's /metrics. */
export interface ForwarderTotals {
  delivered: number;
  retried: number;
  failed: number;
  dropped: number;
  coalesced: number;
}

export interface BenchSystem {
  bs: BenchSandbox;
  /** A client of the sandbox API (the bench's own requests: count them out of the figures). */
  kube: KubeJsonClient;
  functions: SpawnedFunction[];
  forwarder: SpawnedFunction;
  forwarderTotals(): Promise<ForwarderTotals>;
  /** VmHWM of each function process now, MiB. */
  peakRss(): Record<string, number>;
  /** VmRSS of each function process once the system was up, before any load, MiB. */
  idleRss: Record<string, number>;
  close(): Promise<void>;
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
  const shipped = await shippedFunction();
  const admission = await spawnFunction({
    name: "admission",
    args: shipped.args,
    env: {
      ...shipped.env,
      ...bs.env,
      FUNCTION: "admission",
      TLS_CERT_FILE: join(certDir, "tls.crt"),
      TLS_KEY_FILE: join(certDir, "tls.key"),
      PROVISIONER_DRIVERS: DRIVER_NAME,
    },
  });
  // As `npm start` registers them; failures are counted (sandbox admission.ignoredFailures).
  registerAdmissionWebhooks(bs.sandbox.apiServer.registry, admission.url, certs.caCert);
  return admission;
}

/** Sums a Prometheus counter's samples, optionally only those whose labels match. */
function sumCounter(text: string, name: string, labels?: RegExp): number {
  let total = 0;
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (labels && !labels.test(line)) continue;
    const value = Number(line.slice(line.lastIndexOf(" ") + 1));
    if (Number.isFinite(value)) total += value;
  }
  return total;
}

async function forwarderTotals(url: string): Promise<ForwarderTotals> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const dropReasons = /reason="(queue_full|shutdown)"/;
  const dropped = sumCounter(text, "forwarder_events_failed_total", dropReasons);
  return {
    delivered: sumCounter(text, "forwarder_events_delivered_total"),
    retried: sumCounter(text, "forwarder_delivery_retries_total"),
    failed: sumCounter(text, "forwarder_events_failed_total") - dropped,
    dropped,
    coalesced: sumCounter(text, "forwarder_events_coalesced_total"),
  };
}

export async function startSystem(options: SystemOptions): Promise<BenchSystem> {
  const bs = await startBenchSandbox();
  const functions: SpawnedFunction[] = [];
  let forwarder: SpawnedFunction | undefined;
  let kube: KubeJsonClient | undefined;
  try {
    await options.before?.(bs);
    if (options.admission) functions.push(await startAdmission(bs));
    const shipped = await shippedFunction();
    const controllers = await Promise.all(
      options.controllers.map((name) =>
        spawnFunction({ name, args: shipped.args, env: { ...shipped.env, ...bs.env, FUNCTION: name } }),
      ),
    );
    functions.push(...controllers);
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(bs.sandbox.kubeconfigPath);
    // Ready once every informer has synced (its ready line), like forwarder.ready in process.
    forwarder = await spawnFunction({
      name: "forwarder",
      args: [join(REPO, "shared", "forwarder", "main.ts")],
      env: {
        KUBECONFIG: bs.sandbox.kubeconfigPath,
        FORWARDER_ROUTES: controllers
          .map((f) => `${f.url}/=${KINDS[f.name as ControllerName].join(",")}`)
          .join(";"),
        ...(options.concurrency ? { FORWARDER_CONCURRENCY: String(options.concurrency) } : {}),
        ...(options.replayExisting === false ? { FORWARDER_REPLAY_EXISTING: "false" } : {}),
        SHUTDOWN_GRACE_MS: "1000",
      },
    });
    kube = new KubeJsonClient(kubeConfig);
  } catch (err) {
    await forwarder?.stop();
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
    forwarderTotals: () => forwarderTotals(fwd.url),
    peakRss: () => Object.fromEntries(functions.map((f) => [f.name, peakRssMiB(f.child.pid)])),
    idleRss: Object.fromEntries(functions.map((f) => [f.name, rssMiB(f.child.pid)])),
    close: async () => {
      await fwd.stop();
      await client.close();
      await Promise.all(functions.map((f) => f.stop()));
      await bs.close();
    },
  };
}
