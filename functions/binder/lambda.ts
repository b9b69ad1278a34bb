// AWS Lambda entry of the binder (serverless.yml): the app of main.ts, built
// once per cold start and wrapped by ../lambda-adapter.ts for function URL
// events; a schedule invocation becomes POST /resync.
import { BinderController } from "../../shared/binder/runtime/binder-controller.ts";
import { loadKubeConfig } from "../../shared/kube/client.ts";
import { EventRecorder } from "../../shared/kube/event-recorder.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { createLogger } from "../../shared/log.ts";
import { lambdaHandler } from "../lambda-adapter.ts";
import { createBinderApp } from "./app.ts";

export const handler = lambdaHandler("binder", async () => {
  const logger = createLogger({ name: "binder" });
  const kube = new KubeJsonClient(loadKubeConfig());
  const events = new EventRecorder(kube, {
    component: "persistentvolume-controller",
    logger: { warn: (details, message) => logger.warn(details, message) },
  });
  return createBinderApp({ controller: new BinderController({ kube, events }), logger });
});
