// `npm run forwarder`: the event forwarder as a process. Configured by the
// environment (config.ts; KUBECONFIG or the in-cluster service account),
// serves /healthz, /readyz and /metrics on PORT, prints one JSON line on
// stdout once every informer has synced, and on SIGTERM stops watching,
// delivers what is queued within SHUTDOWN_GRACE_MS and exits 0.

import { loadKubeConfig } from "../kube/client.ts";
import { createLogger } from "../log.ts";
import { processMetrics } from "../metrics.ts";
import { forwarderConfigFromEnv } from "./config.ts";
import { startForwarder } from "./forwarder.ts";
import { startProbeServer } from "./probe-server.ts";

const log = createLogger({ name: "forwarder" });

async function main(): Promise<void> {
  const config = forwarderConfigFromEnv();
  const kubeConfig = loadKubeConfig();
  const registry = processMetrics();
  const { port, host, ...forwarderOptions } = config;
  const forwarder = startForwarder({ ...forwarderOptions, kubeConfig, logger: log, metrics: registry });
  const probes = await startProbeServer(forwarder, registry, host === undefined ? { port } : { port, host });

  let stopping = false;
  const stop = (signal: NodeJS.Signals): void => {
    if (stopping) return;
    stopping = true;
    log.info({ signal, graceMs: config.shutdownGraceMs }, "shutting down");
    probes.drain();
    forwarder
      .close()
      .then(() => probes.close())
      .then(
        () => process.exit(0),
        (err: unknown) => {
          log.error({ err }, "shutdown failed");
          process.exit(1);
        },
      );
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);

  try {
    await forwarder.ready;
  } catch {
    return; // closed by a signal before it was ready; stop() exits
  }
  log.info({ url: probes.url }, "ready");
  process.stdout.write(`${JSON.stringify({ ready: true, forwarder: true, url: probes.url })}\n`);
}

main().catch((err: unknown) => {
  log.fatal({ err }, "forwarder failed to start");
  process.exit(1);
});
