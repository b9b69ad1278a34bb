// Entry of the attach/detach function: `FUNCTION=attach-detach npm run serve`,
// or the container command. Configuration: KUBECONFIG, PORT, LOG_LEVEL.

import { eventSource } from "../../shared/attach-detach/constants.ts";
import { AttachDetachController } from "../../shared/attach-detach/runtime/attach-detach-controller.ts";
import { serveFunction } from "../../shared/http/serve.ts";
import { loadKubeConfig } from "../../shared/kube/client.ts";
import { EventRecorder } from "../../shared/kube/event-recorder.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { createLogger } from "../../shared/log.ts";
import { createAttachDetachApp } from "./app.ts";

export async function main(): Promise<void> {
  const logger = createLogger({ name: "attach-detach" });
  const kube = new KubeJsonClient(loadKubeConfig());
  const events = new EventRecorder(kube, {
    component: eventSource,
    logger: { warn: (details, message) => logger.warn(details, message) },
  });
  const controller = new AttachDetachController({ kube, events });
  await serveFunction(createAttachDetachApp({ controller, logger }), {
    name: "attach-detach",
    logger,
    onClose: [() => kube.close()],
  });
}

if (import.meta.main) await main();
