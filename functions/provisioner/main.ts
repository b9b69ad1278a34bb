// Entry of the provisioner function: `FUNCTION=provisioner npm run serve`, or
// the container command. Configuration (README): KUBECONFIG, CSI_ENDPOINT,
// DRIVER_NAME, CSI_TIMEOUT_SECONDS, VOLUME_NAME_PREFIX, VOLUME_NAME_UUID_LENGTH,
// DEFAULT_FSTYPE, EXTRA_CREATE_METADATA, STRICT_TOPOLOGY, IMMEDIATE_TOPOLOGY,
// PROVISIONER_IDENTITY, PROVISIONER_TOPOLOGY_CACHE, STORAGE_CLASS_CACHE,
// PROVISIONER_ATTACHMENT_CACHE, CONTROLLER_PUBLISH_READONLY, WORKERS, RETRY_INTERVAL_START_SECONDS,
// RETRY_INTERVAL_MAX_SECONDS, KUBE_API_QPS, KUBE_API_BURST, PORT, LOG_LEVEL.

import {
  booleanFromEnv,
  controllerKnobsFromEnv,
  integerFromEnv,
  retryIntervalFromEnv,
} from "../../shared/config.ts";
import { connectDriver } from "../../shared/csi/connect-driver.ts";
import { combineControllers } from "../../shared/http/combined-controller.ts";
import { loadKubeConfig } from "../../shared/kube/client.ts";
import { EventRecorder } from "../../shared/kube/event-recorder.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { storageClassCopyFromEnv } from "../../shared/kube/storage-class-copy.ts";
import { createLogger } from "../../shared/log.ts";
import { CapacityController } from "../../shared/provisioner/capacity/runtime/capacity-controller.ts";
import { defaultProvisionerOptions, type ProvisionerOptions } from "../../shared/provisioner/options.ts";
import { attachmentCopyFromEnv } from "../../shared/provisioner/runtime/attachment-copy.ts";
import { ProvisionerController } from "../../shared/provisioner/runtime/provisioner-controller.ts";
import { lazyTopologyCopies } from "../../shared/provisioner/runtime/topology-copies.ts";
import { type BuildContext, type BuiltFunction, closeParts, serveBuilt } from "../built-function.ts";
import { csiReady } from "../csi-controller-app.ts";
import { createProvisionerApp } from "./app.ts";

/** The external-provisioner's --timeout default. */
const defaultTimeoutSeconds = 10;
/** The external-provisioner's --worker-threads default. */
const defaultWorkers = 100;

export function provisionerOptionsFromEnv(
  driverName: string,
  env: NodeJS.ProcessEnv = process.env,
): ProvisionerOptions {
  const defaults = defaultProvisionerOptions(driverName);
  return {
    volumeNamePrefix: env.VOLUME_NAME_PREFIX?.trim() || defaults.volumeNamePrefix,
    volumeNameUuidLength: integerFromEnv(env, "VOLUME_NAME_UUID_LENGTH", defaults.volumeNameUuidLength),
    defaultFsType: env.DEFAULT_FSTYPE?.trim() ?? defaults.defaultFsType,
    extraCreateMetadata: booleanFromEnv(env, "EXTRA_CREATE_METADATA", defaults.extraCreateMetadata),
    strictTopology: booleanFromEnv(env, "STRICT_TOPOLOGY", defaults.strictTopology),
    immediateTopology: booleanFromEnv(env, "IMMEDIATE_TOPOLOGY", defaults.immediateTopology),
    identity: env.PROVISIONER_IDENTITY?.trim() || defaults.identity,
    retryInterval: retryIntervalFromEnv(env),
    controllerPublishReadOnly: booleanFromEnv(
      env,
      "CONTROLLER_PUBLISH_READONLY",
      defaults.controllerPublishReadOnly,
    ),
  };
}

/**
 * Capacity tracking (upstream --enable-capacity, off by default): ENABLE_CAPACITY,
 * NAMESPACE (where the CSIStorageCapacity objects live, required with it, as
 * upstream) and CAPACITY_FOR_IMMEDIATE_BINDING. A driver without GET_CAPACITY
 * cannot be tracked: refuse to start rather than publish nothing.
 */
export function capacityFromEnv(
  env: NodeJS.ProcessEnv,
  driverHasGetCapacity: boolean,
): { namespace: string; forImmediateBinding: boolean } | undefined {
  if (!booleanFromEnv(env, "ENABLE_CAPACITY", false)) return undefined;
  const namespace = env.NAMESPACE?.trim();
  if (!namespace)
    throw new Error("ENABLE_CAPACITY=true needs NAMESPACE (where CSIStorageCapacity objects go)");
  if (!driverHasGetCapacity)
    throw new Error("ENABLE_CAPACITY=true, but the CSI driver does not support GET_CAPACITY");
  return { namespace, forImmediateBinding: booleanFromEnv(env, "CAPACITY_FOR_IMMEDIATE_BINDING", false) };
}

/** The provisioner from the environment, not yet serving (lambda.ts serves its app too). */
export async function build(env = process.env, context: BuildContext = {}): Promise<BuiltFunction> {
  const logger = createLogger({ name: "provisioner" });
  // Parsed before connecting, so a bad value fails without a CSI channel to close.
  const knobs = controllerKnobsFromEnv(env, { workers: defaultWorkers });
  // Read before connecting, so a missing kubeconfig fails without a CSI channel to close.
  const kubeConfig = loadKubeConfig(env);
  const { csi, driverName, capabilities } = await connectDriver({
    env,
    defaultTimeoutSeconds,
    require: (capabilities) =>
      capabilities.controllerService && capabilities.createDeleteVolume
        ? undefined
        : "does not support CREATE_DELETE_VOLUME; nothing to provision",
  });
  const kube = new KubeJsonClient(kubeConfig, { rate: knobs.kubeApiRate });
  const events = new EventRecorder(kube, {
    component: `${driverName}_kube-storage-functions`,
    logger: { warn: (details, message) => logger.warn(details, message) },
  });
  // A driver with topology needs every Node and CSINode for volumes that may go anywhere; a
  // process serving many events keeps watched copies of them (see load-request.ts).
  const topology =
    capabilities.accessibilityConstraints && booleanFromEnv(env, "PROVISIONER_TOPOLOGY_CACHE", true)
      ? lazyTopologyCopies({ kubeConfig, json: kube, log: logger })
      : undefined;
  // And of the StorageClasses, started by the first claim sync that reads one (storage-class-copy.ts).
  const classCopy = storageClassCopyFromEnv(
    env,
    { kubeConfig, json: kube, log: logger },
    context.copies?.storageClasses,
  );
  // And of the VolumeAttachments a deletion checks, started by the first one (attachment-copy.ts).
  const attachmentCopy = capabilities.publishUnpublishVolume
    ? attachmentCopyFromEnv(env, { kubeConfig, json: kube, log: logger })
    : undefined;
  const controller = new ProvisionerController({
    kube,
    csi,
    events,
    driverName,
    options: provisionerOptionsFromEnv(driverName, env),
    workers: knobs.workers,
    ...(topology ? { topology: topology.get } : {}),
    ...(classCopy ? { storageClasses: classCopy.get } : {}),
    ...(attachmentCopy ? { attachments: attachmentCopy.get } : {}),
  });
  const capacity = capacityFromEnv(env, capabilities.getCapacity);
  const served = capacity
    ? combineControllers(controller, {
        capacity: new CapacityController({
          kube,
          csi,
          driverName,
          ...capacity,
          ...(topology ? { topology: topology.get } : {}),
          ...(classCopy ? { storageClasses: classCopy.get } : {}),
        }),
      })
    : controller;
  const app = createProvisionerApp({ controller: served, csi, logger });
  return {
    name: "provisioner",
    app,
    controller: served,
    ready: csiReady(csi),
    logger,
    // A shared copy is the host's to stop.
    close: closeParts({
      copies: [topology, context.copies ? undefined : classCopy, attachmentCopy],
      kube,
      csi,
    }),
  };
}

export async function main(): Promise<void> {
  await serveBuilt(await build());
}
