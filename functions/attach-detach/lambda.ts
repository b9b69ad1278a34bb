// AWS Lambda entry of the attach/detach function (serverless.yml): the app of
// main.ts, built once per cold start and wrapped by ../lambda-adapter.ts for
// function URL events; a schedule invocation becomes POST /resync.
import { eventSource } from "../../shared/attach-detach/constants.ts";
import { AttachDetachController } from "../../shared/attach-detach/runtime/attach-detach-controller.ts";
import { loadKubeConfig } from "../../shared/kube/client.ts";
import { EventRecorder } from "../../shared/kube/event-recorder.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { createLogger } from "../../shared/log.ts";
import { lambdaHandler } from "../lambda-adapter.ts";
import { createAttachDetachApp } from "./app.ts";

export const handler = lambdaHandler("attach-detach", async () => {
  const logger = createLogger({ name: "attach-detach" });
  const kube = new KubeJsonClient(loadKubeConfig());
  const events = new EventRecorder(kube, {
    component: eventSource,
    logger: { warn: (details, message) => logger.warn(details, message) },
  });
  return createAttachDetachApp({ controller: new AttachDetachController({ kube, events }), logger });
});
