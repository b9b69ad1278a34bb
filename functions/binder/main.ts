// Entry of the binder function: `FUNCTION=binder npm run serve`, or the
// container command. Configuration: KUBECONFIG (or the in-cluster service
// account), PORT, LOG_LEVEL.
import { BinderController } from "../../shared/binder/runtime/binder-controller.ts";
import { serveFunction } from "../../shared/http/serve.ts";
import { loadKubeConfig } from "../../shared/kube/client.ts";
import { EventRecorder } from "../../shared/kube/event-recorder.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { createLogger } from "../../shared/log.ts";
import { createBinderApp } from "./app.ts";

export async function main(): Promise<void> {
  const logger = createLogger({ name: "binder" });
  const kube = new KubeJsonClient(loadKubeConfig());
  const events = new EventRecorder(kube, {
    component: "persistentvolume-controller",
    logger: { warn: (details, message) => logger.warn(details, message) },
  });
  const controller = new BinderController({ kube, events });
  await serveFunction(createBinderApp({ controller, logger }), {
    name: "binder",
    logger,
    onClose: [() => kube.close()],
  });
}

if (import.meta.main) await main();
