// Entry of the attacher function: `FUNCTION=attacher npm run serve`, or the
// container command. Configuration (README): KUBECONFIG, CSI_ENDPOINT,
// DRIVER_NAME, CSI_TIMEOUT_SECONDS (upstream --timeout, default 15),
// DEFAULT_FSTYPE (upstream --default-fstype, default none), WORKERS (upstream
// --worker-threads, default 10), RETRY_INTERVAL_START_SECONDS,
// RETRY_INTERVAL_MAX_SECONDS, KUBE_API_QPS, KUBE_API_BURST, PORT, LOG_LEVEL.
import { defaultTimeoutSeconds } from "../../shared/attacher/constants.ts";
import { AttacherController } from "../../shared/attacher/runtime/attacher-controller.ts";
import { booleanFromEnv, controllerKnobsFromEnv } from "../../shared/config.ts";
import { connectDriver } from "../../shared/csi/connect-driver.ts";
import { loadKubeConfig } from "../../shared/kube/client.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { csiNodes, persistentVolumes } from "../../shared/kube/resources.ts";
import type { CSINode, PersistentVolume } from "../../shared/kube/types.ts";
import { lazyWatchedStore } from "../../shared/kube/watched-store.ts";
import { createLogger } from "../../shared/log.ts";
import { type BuildContext, type BuiltFunction, closeParts, serveBuilt } from "../built-function.ts";
import { csiReady } from "../csi-controller-app.ts";
import { createAttacherApp } from "./app.ts";

/** The attacher from the environment, not yet serving (lambda.ts serves its app too). */
export async function build(env = process.env, context: BuildContext = {}): Promise<BuiltFunction> {
  const logger = createLogger({ name: "attacher" });
  // The external-attacher's --worker-threads default is 10.
  const knobs = controllerKnobsFromEnv(env, { workers: 10 });
  // Read before connecting, so a missing kubeconfig fails without a CSI channel to close.
  const kubeConfig = loadKubeConfig(env);
  // No capability is required: a driver that cannot publish gets the trivial handler.
  const { csi, driverName } = await connectDriver({ env, defaultTimeoutSeconds });
  const kube = new KubeJsonClient(kubeConfig, { rate: knobs.kubeApiRate });
  // The node ID of each attach from a watched copy of the CSINodes, started with a driver that publishes.
  const csiNodeCopy = booleanFromEnv(env, "ATTACHER_CSINODE_CACHE", true)
    ? lazyWatchedStore<CSINode>({
        kubeConfig,
        json: kube,
        resource: csiNodes,
        log: logger.child({ cache: "csinodes" }),
      })
    : undefined;
  // The PV of each attach from a watched copy of the PVs, started with a driver that publishes.
  const pvCopy = booleanFromEnv(env, "ATTACHER_PV_CACHE", true)
    ? (context.copies?.persistentVolumes ??
      lazyWatchedStore<PersistentVolume>({
        kubeConfig,
        json: kube,
        resource: persistentVolumes,
        log: logger.child({ cache: "persistentvolumes" }),
      }))
    : undefined;
  const controller = new AttacherController({
    kube,
    csi,
    driverName,
    defaultFsType: env.DEFAULT_FSTYPE?.trim() ?? "",
    workers: knobs.workers,
    retryInterval: knobs.retryInterval,
    ...(csiNodeCopy ? { csiNodes: csiNodeCopy.get } : {}),
    ...(pvCopy ? { persistentVolumes: pvCopy.get } : {}),
  });
  // Chosen once, at start (each cold start on Lambda), as upstream does. It
  // cannot fail here: connectDriver has already read the capabilities it uses.
  const handler = await controller.handler();
  logger.info(
    { driver: driverName, handler: handler.kind, reconciles: handler.reconciles },
    "attacher handler chosen",
  );
  // Attaching is this process's whole job: the copies start now, as upstream's informers do, so the
  // first attaches after a start read them instead of the API. A driver that does not publish needs neither.
  if (handler.kind === "csi") {
    csiNodeCopy?.get();
    pvCopy?.get();
  }
  const app = createAttacherApp({ controller, csi, logger });
  return {
    name: "attacher",
    app,
    controller,
    ready: csiReady(csi),
    logger,
    // A shared copy is the host's to stop.
    close: closeParts({ copies: [csiNodeCopy, context.copies ? undefined : pvCopy], kube, csi }),
  };
}

export async function main(): Promise<void> {
  await serveBuilt(await build());
}
