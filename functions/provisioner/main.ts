// Entry of the provisioner function: `FUNCTION=provisioner npm run serve`, or
// the container command. Configuration (README): KUBECONFIG, CSI_ENDPOINT,
// DRIVER_NAME, CSI_TIMEOUT_SECONDS, VOLUME_NAME_PREFIX, VOLUME_NAME_UUID_LENGTH,
// DEFAULT_FSTYPE, EXTRA_CREATE_METADATA, STRICT_TOPOLOGY, IMMEDIATE_TOPOLOGY,
// PROVISIONER_IDENTITY, PORT, LOG_LEVEL.
import { CsiClient } from "../../shared/csi/client.ts";
import { csiEndpointFromEnv } from "../../shared/csi/endpoint.ts";
import { serveFunction } from "../../shared/http/serve.ts";
import { loadKubeConfig } from "../../shared/kube/client.ts";
import { EventRecorder } from "../../shared/kube/event-recorder.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { createLogger } from "../../shared/log.ts";
import { defaultProvisionerOptions, type ProvisionerOptions } from "../../shared/provisioner/options.ts";
import { ProvisionerController } from "../../shared/provisioner/runtime/provisioner-controller.ts";
import { createProvisionerApp } from "./app.ts";

function flag(env: NodeJS.ProcessEnv, key: string, fallback: boolean): boolean {
  const v = env[key]?.trim().toLowerCase();
  if (v === undefined || v === "") return fallback;
  if (v === "true" || v === "1") return true;
  if (v === "false" || v === "0") return false;
  throw new Error(`${key} must be true or false, got ${JSON.stringify(env[key])}`);
}

function integer(env: NodeJS.ProcessEnv, key: string, fallback: number): number {
  const v = env[key]?.trim();
  if (v === undefined || v === "") return fallback;
  if (!/^-?\d+$/.test(v)) throw new Error(`${key} must be an integer, got ${JSON.stringify(v)}`);
  return Number(v);
}

export function provisionerOptionsFromEnv(
  driverName: string,
  env: NodeJS.ProcessEnv = process.env,
): ProvisionerOptions {
  const defaults = defaultProvisionerOptions(driverName);
  return {
    volumeNamePrefix: env.VOLUME_NAME_PREFIX?.trim() || defaults.volumeNamePrefix,
    volumeNameUuidLength: integer(env, "VOLUME_NAME_UUID_LENGTH", defaults.volumeNameUuidLength),
    defaultFsType: env.DEFAULT_FSTYPE?.trim() ?? defaults.defaultFsType,
    extraCreateMetadata: flag(env, "EXTRA_CREATE_METADATA", defaults.extraCreateMetadata),
    strictTopology: flag(env, "STRICT_TOPOLOGY", defaults.strictTopology),
    immediateTopology: flag(env, "IMMEDIATE_TOPOLOGY", defaults.immediateTopology),
    identity: env.PROVISIONER_IDENTITY?.trim() || defaults.identity,
  };
}

export async function main(): Promise<void> {
  const logger = createLogger({ name: "provisioner" });
  const timeoutSeconds = integer(process.env, "CSI_TIMEOUT_SECONDS", 10);
  const csi = await CsiClient.connect({ endpoint: csiEndpointFromEnv(), timeoutMs: timeoutSeconds * 1000 });
  const driverName = csi.driverName ?? (await csi.getPluginInfo()).name;
  const wanted = process.env.DRIVER_NAME?.trim();
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
  await serveFunction(createProvisionerApp({ controller, csi, logger }), {
    name: "provisioner",
    logger,
    onClose: [() => kube.close(), () => csi.close()],
  });
}

if (import.meta.main) await main();
