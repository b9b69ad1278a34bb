// The attach/detach function: POST / takes Pod, Node, PVC, PV and
// VolumeAttachment events and reconciles the nodes they touch; POST /resync
// reconciles every node. Decisions live in shared/attach-detach.
import type { AttachDetachController } from "../../shared/attach-detach/runtime/attach-detach-controller.ts";
import { createControllerFunction } from "../../shared/http/controller-function.ts";
import type { FunctionApp } from "../../shared/http/function-app.ts";
import type { Logger } from "../../shared/log.ts";
import type { Registry } from "../../shared/metrics.ts";

export interface AttachDetachAppOptions {
  controller: AttachDetachController;
  logger?: Logger;
  metrics?: Registry;
}

export function createAttachDetachApp(options: AttachDetachAppOptions): FunctionApp {
  return createControllerFunction({
    name: "attach-detach",
    controller: options.controller,
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.metrics ? { metrics: options.metrics } : {}),
  });
}
