// Entry of the binder function: `FUNCTION=binder npm run serve`, or the
// container command. Configuration: KUBECONFIG (or the in-cluster service
// account), PORT, LOG_LEVEL, BINDER_VOLUME_CACHE, BINDER_CLAIM_CACHE, STORAGE_CLASS_CACHE, WORKERS,
// KUBE_API_QPS, KUBE_API_BURST.
import { BinderController } from "../../shared/binder/runtime/binder-controller.ts";
import { DELETED_CLAIMS_REMEMBERED } from "../../shared/binder/runtime/watched-reads.ts";
import { volumeClaimIndexKey } from "../../shared/binder/volume-helpers.ts";
import { booleanFromEnv, controllerKnobsFromEnv } from "../../shared/config.ts";
import { loadKubeConfig } from "../../shared/kube/client.ts";
import { EventRecorder } from "../../shared/kube/event-recorder.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { persistentVolumeClaims, persistentVolumes } from "../../shared/kube/resources.ts";
import { storageClassCopyFromEnv } from "../../shared/kube/storage-class-copy.ts";
import type { PersistentVolume, PersistentVolumeClaim } from "../../shared/kube/types.ts";
import { startWatchedStore } from "../../shared/kube/watched-store.ts";
import { createLogger } from "../../shared/log.ts";
import { type BuildContext, type BuiltFunction, closeParts, serveBuilt } from "../built-function.ts";
import { createBinderApp } from "./app.ts";

/** The binder from the environment, not yet serving (lambda.ts serves its app too). */
export async function build(env = process.env, context: BuildContext = {}): Promise<BuiltFunction> {
  const logger = createLogger({ name: "binder" });
  // kube-controller-manager's binder has no worker flag: no cap unless WORKERS says one.
  const knobs = controllerKnobsFromEnv(env);
  const kubeConfig = loadKubeConfig(env);
  const kube = new KubeJsonClient(kubeConfig, { rate: knobs.kubeApiRate });
  const events = new EventRecorder(kube, {
    component: "persistentvolume-controller",
    logger: { warn: (details, message) => logger.warn(details, message) },
  });
  // A process serving many events keeps a watched copy of the volumes; see load-views.ts for what it may decide.
  const volumeCache = booleanFromEnv(env, "BINDER_VOLUME_CACHE", true)
    ? (context.copies?.persistentVolumes.get() ??
      startWatchedStore<PersistentVolume>({
        kubeConfig,
        json: kube,
        resource: persistentVolumes,
        indexBy: volumeClaimIndexKey,
        log: logger.child({ cache: "persistentvolumes" }),
      }))
    : undefined;
  // And of the claims: an event's object, or a bound volume's claim, read from it (watched-reads.ts).
  const claimCache = booleanFromEnv(env, "BINDER_CLAIM_CACHE", true)
    ? startWatchedStore<PersistentVolumeClaim>({
        kubeConfig,
        json: kube,
        resource: persistentVolumeClaims,
        log: logger.child({ cache: "persistentvolumeclaims" }),
        // A deleted claim's UID proves its bound volume's release without a live read (load-views.ts).
        rememberDeleted: DELETED_CLAIMS_REMEMBERED,
      })
    : undefined;
  // And of the StorageClasses, started by the first claim sync that reads one (storage-class-copy.ts).
  const classCopy = storageClassCopyFromEnv(
    env,
    { kubeConfig, json: kube, log: logger },
    context.copies?.storageClasses,
  );
  const controller = new BinderController({
    kube,
    events,
    workers: knobs.workers,
    ...(volumeCache ? { volumeCache } : {}),
    ...(claimCache ? { claimCache } : {}),
    ...(classCopy ? { storageClasses: classCopy.get } : {}),
  });
  const app = createBinderApp({ controller, logger });
  return {
    name: "binder",
    app,
    controller,
    logger,
    // A shared copy is the host's to stop.
    close: closeParts({
      copies: context.copies ? [claimCache] : [volumeCache, claimCache, classCopy],
      kube,
    }),
  };
}

export async function main(): Promise<void> {
  await serveBuilt(await build());
}
