// AWS Lambda entry of the provisioner (serverless.yml): the app of main.ts,
// built once per cold start and wrapped by ../lambda-adapter.ts; a schedule
// invocation becomes POST /resync. CSI_ENDPOINT must be a host:port the
// Lambda reaches (the driver's controller service over TCP, in the VPC).
import { CsiClient } from "../../shared/csi/client.ts";
import { csiEndpointFromEnv } from "../../shared/csi/endpoint.ts";
import { loadKubeConfig } from "../../shared/kube/client.ts";
import { EventRecorder } from "../../shared/kube/event-recorder.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { createLogger } from "../../shared/log.ts";
import { ProvisionerController } from "../../shared/provisioner/runtime/provisioner-controller.ts";
import { lambdaHandler, positiveIntegerFromEnv } from "../lambda-adapter.ts";
import { createProvisionerApp } from "./app.ts";
import { provisionerOptionsFromEnv } from "./main.ts";

export const handler = lambdaHandler("provisioner", async () => {
  const logger = createLogger({ name: "provisioner" });
  const timeoutSeconds = positiveIntegerFromEnv("CSI_TIMEOUT_SECONDS", 10);
  const csi = await CsiClient.connect({ endpoint: csiEndpointFromEnv(), timeoutMs: timeoutSeconds * 1000 });
  const driverName = csi.driverName ?? (await csi.getPluginInfo()).name;
  const wanted = process.env.DRIVER_NAME?.trim();
  // As main.ts: serving the wrong driver's volumes is worse than not starting.
  if (wanted && wanted !== driverName) {
    throw new Error(`DRIVER_NAME is ${wanted} but the driver at CSI_ENDPOINT is ${driverName}`);
  }
  const capabilities = await csi.capabilities();
  if (!capabilities.controllerService || !capabilities.createDeleteVolume) {
    throw new Error(`driver ${driverName} does not support CREATE_DELETE_VOLUME; nothing to provision`);
  }
  const kube = new KubeJsonClient(loadKubeConfig());
  const events = new EventRecorder(kube, {
    component: `${driverName}_kube-storage-functions`,
    logger: { warn: (details, message) => logger.warn(details, message) },
  });
  const controller = new ProvisionerController({
    kube,
    csi,
    events,
    driverName,
    options: provisionerOptionsFromEnv(driverName),
  });
  return createProvisionerApp({ controller, csi, logger });
});
