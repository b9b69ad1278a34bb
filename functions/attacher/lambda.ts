// AWS Lambda entry of the attacher (serverless.yml): the app of main.ts,
// built once per cold start and wrapped by ../lambda-adapter.ts; a schedule
// invocation becomes POST /resync. CSI_ENDPOINT must be a host:port the
// Lambda reaches (the driver's controller service over TCP, in the VPC).
import { defaultTimeoutSeconds } from "../../shared/attacher/constants.ts";
import { AttacherController } from "../../shared/attacher/runtime/attacher-controller.ts";
import { CsiClient } from "../../shared/csi/client.ts";
import { csiEndpointFromEnv } from "../../shared/csi/endpoint.ts";
import { loadKubeConfig } from "../../shared/kube/client.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { createLogger } from "../../shared/log.ts";
import { lambdaHandler, positiveIntegerFromEnv } from "../lambda-adapter.ts";
import { createAttacherApp } from "./app.ts";

export const handler = lambdaHandler("attacher", async () => {
  const logger = createLogger({ name: "attacher" });
  const timeoutSeconds = positiveIntegerFromEnv("CSI_TIMEOUT_SECONDS", defaultTimeoutSeconds);
  const csi = await CsiClient.connect({ endpoint: csiEndpointFromEnv(), timeoutMs: timeoutSeconds * 1000 });
  const driverName = csi.driverName ?? (await csi.getPluginInfo()).name;
  const wanted = process.env.DRIVER_NAME?.trim();
  // As main.ts: serving the wrong driver's attachments is worse than not starting.
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
  // Chosen once per cold start, as main.ts does at process start.
  await controller.handler();
  return createAttacherApp({ controller, csi, logger });
});
