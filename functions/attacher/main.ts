// Entry of the attacher function: `FUNCTION=attacher npm run serve`, or the
// container command. Configuration (README): KUBECONFIG, CSI_ENDPOINT,
// DRIVER_NAME, CSI_TIMEOUT_SECONDS (upstream --timeout, default 15),
// DEFAULT_FSTYPE (upstream --default-fstype, default none), PORT, LOG_LEVEL.
import { defaultTimeoutSeconds } from "../../shared/attacher/constants.ts";
import { AttacherController } from "../../shared/attacher/runtime/attacher-controller.ts";
import { CsiClient } from "../../shared/csi/client.ts";
import { csiEndpointFromEnv } from "../../shared/csi/endpoint.ts";
import { serveFunction } from "../../shared/http/serve.ts";
import { loadKubeConfig } from "../../shared/kube/client.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { createLogger } from "../../shared/log.ts";
import { createAttacherApp } from "./app.ts";

function positiveInteger(env: NodeJS.ProcessEnv, key: string, fallback: number): number {
  const v = env[key]?.trim();
  if (v === undefined || v === "") return fallback;
  if (!/^\d+$/.test(v) || Number(v) <= 0)
    throw new Error(`${key} must be a positive integer, got ${JSON.stringify(v)}`);
  return Number(v);
}

export async function main(): Promise<void> {
  const logger = createLogger({ name: "attacher" });
  const timeoutSeconds = positiveInteger(process.env, "CSI_TIMEOUT_SECONDS", defaultTimeoutSeconds);
  const csi = await CsiClient.connect({ endpoint: csiEndpointFromEnv(), timeoutMs: timeoutSeconds * 1000 });
  const driverName = csi.driverName ?? (await csi.getPluginInfo()).name;
  const wanted = process.env.DRIVER_NAME?.trim();
  if (wanted && wanted !== driverName) {
    throw new Error(`DRIVER_NAME is ${wanted} but the driver at CSI_ENDPOINT is ${driverName}`);
  }
  const kube = new KubeJsonClient(loadKubeConfig());
  const controller = new AttacherController({
    kube,
    csi,
    driverName,
    defaultFsType: process.env.DEFAULT_FSTYPE?.trim() ?? "",
  });
  // Chosen once, at start, as upstream does: a driver that cannot answer its capabilities is not served.
  const handler = await controller.handler();
  logger.info(
    { driver: driverName, handler: handler.kind, reconciles: handler.reconciles },
    "attacher handler chosen",
  );
  await serveFunction(createAttacherApp({ controller, csi, logger }), {
    name: "attacher",
    logger,
    onClose: [() => kube.close(), () => csi.close()],
  });
}

if (import.meta.main) await main();
