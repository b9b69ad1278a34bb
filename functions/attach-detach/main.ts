// Entry of the attach/detach function: `FUNCTION=attach-detach npm run serve`,
// or the container command. Configuration: KUBECONFIG, PORT, LOG_LEVEL.

import { eventSource } from "../../shared/attach-detach/constants.ts";
import { AttachDetachController } from "../../shared/attach-detach/runtime/attach-detach-controller.ts";
import { loadKubeConfig } from "../../shared/kube/client.ts";
import { EventRecorder } from "../../shared/kube/event-recorder.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { createLogger } from "../../shared/log.ts";
import { type BuiltFunction, serveBuilt } from "../built-function.ts";
import { createAttachDetachApp } from "./app.ts";

/** The attach/detach function from the environment, not yet serving (lambda.ts serves its app too). */
export async function build(env = process.env): Promise<BuiltFunction> {
  const logger = createLogger({ name: "attach-detach" });
  const kube = new KubeJsonClient(loadKubeConfig(env));
  const events = new EventRecorder(kube, {
    component: eventSource,
    logger: { warn: (details, message) => logger.warn(details, message) },
  });
  const controller = new AttachDetachController({ kube, events });
  const app = createAttachDetachApp({ controller, logger });
  return { name: "attach-detach", app, logger, close: () => kube.close() };
}

export async function main(): Promise<void> {
  await serveBuilt(await build());
}
