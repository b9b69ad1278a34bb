// Entry of the resizer function: `FUNCTION=resizer npm run serve`, or the
// container command. Configuration (README): KUBECONFIG, CSI_ENDPOINT,
// DRIVER_NAME, CSI_TIMEOUT_SECONDS (upstream --timeout, default 10),
// EXTRA_MODIFY_METADATA (--extra-modify-metadata, default false),
// HANDLE_VOLUME_INUSE_ERROR (--handle-volume-inuse-error, default true),
// WORKERS (--workers, default 10), RETRY_INTERVAL_START_SECONDS /
// RETRY_INTERVAL_MAX_SECONDS, KUBE_API_QPS / KUBE_API_BURST, PORT, LOG_LEVEL.
import { booleanFromEnv, controllerKnobsFromEnv } from "../../shared/config.ts";
import { connectDriver } from "../../shared/csi/connect-driver.ts";
import { loadKubeConfig } from "../../shared/kube/client.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { createLogger } from "../../shared/log.ts";
import { defaultTimeoutSeconds } from "../../shared/resizer/constants.ts";
import { ResizerController, readAbilities } from "../../shared/resizer/runtime/resizer-controller.ts";
import { type BuiltFunction, closeParts, serveBuilt } from "../built-function.ts";
import { csiReady } from "../csi-controller-app.ts";
import { createResizerApp } from "./app.ts";

/** The resizer from the environment, not yet serving (lambda.ts serves its app too). */
export async function build(env = process.env): Promise<BuiltFunction> {
  const logger = createLogger({ name: "resizer" });
  // Read before connecting, so a bad setting fails without a CSI channel to close.
  const kubeConfig = loadKubeConfig(env);
  const knobs = controllerKnobsFromEnv(env, { workers: 10 });
  const extraModifyMetadata = booleanFromEnv(env, "EXTRA_MODIFY_METADATA", false);
  const handleVolumeInUseError = booleanFromEnv(env, "HANDLE_VOLUME_INUSE_ERROR", true);
  // Upstream exits without a controller service: there is nothing to expand or modify then.
  const { csi, driverName } = await connectDriver({
    env,
    defaultTimeoutSeconds,
    require: (c) => (c.controllerService ? undefined : "does not provide the CONTROLLER_SERVICE capability"),
  });
  try {
    // Read once, at start (each cold start on Lambda), as upstream does.
    const abilities = await readAbilities(csi);
    if (!abilities.controllerExpand && !abilities.nodeExpand && !abilities.modify)
      throw new Error(`driver ${driverName} supports neither volume expansion nor MODIFY_VOLUME`);
    const kube = new KubeJsonClient(kubeConfig, { rate: knobs.kubeApiRate });
    const controller = new ResizerController({
      kube,
      csi,
      driverName,
      abilities,
      extraModifyMetadata,
      handleVolumeInUseError,
      retryInterval: knobs.retryInterval,
      workers: knobs.workers,
    });
    logger.info({ driver: driverName, ...abilities }, "resizer started");
    const app = createResizerApp({ controller, csi, logger });
    return {
      name: "resizer",
      app,
      controller,
      ready: csiReady(csi),
      logger,
      close: closeParts({ kube, csi }),
    };
  } catch (err) {
    csi.close();
    throw err;
  }
}

export async function main(): Promise<void> {
  await serveBuilt(await build());
}
