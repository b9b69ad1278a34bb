// Entry of the binder function: `FUNCTION=binder npm run serve`, or the
// container command. Configuration: KUBECONFIG (or the in-cluster service
// account), PORT, LOG_LEVEL.
import { BinderController } from "../../shared/binder/runtime/binder-controller.ts";
import { loadKubeConfig } from "../../shared/kube/client.ts";
import { EventRecorder } from "../../shared/kube/event-recorder.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { createLogger } from "../../shared/log.ts";
import { type BuiltFunction, serveBuilt } from "../built-function.ts";
import { createBinderApp } from "./app.ts";

/** The binder from the environment, not yet serving (lambda.ts serves its app too). */
export async function build(env = process.env): Promise<BuiltFunction> {
  const logger = createLogger({ name: "binder" });
  const kube = new KubeJsonClient(loadKubeConfig(env));
  const events = new EventRecorder(kube, {
    component: "persistentvolume-controller",
    logger: { warn: (details, message) => logger.warn(details, message) },
  });
  const controller = new BinderController({ kube, events });
  const app = createBinderApp({ controller, logger });
  return { name: "binder", app, logger, close: () => kube.close() };
}

export async function main(): Promise<void> {
  await serveBuilt(await build());
}

if (import.meta.main) await main();
