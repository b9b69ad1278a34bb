// The attacher function: POST / takes forwarded VolumeAttachment and PV
// events, POST /resync re-syncs every VolumeAttachment of this driver and,
// when the driver lists published nodes, repairs what the driver contradicts.
// Ready when the CSI driver answers Probe. All decisions live in shared/attacher.
import type { AttacherController } from "../../shared/attacher/runtime/attacher-controller.ts";
import type { CsiClient } from "../../shared/csi/client.ts";
import { createControllerFunction } from "../../shared/http/controller-function.ts";
import type { FunctionApp } from "../../shared/http/function-app.ts";
import type { Logger } from "../../shared/log.ts";
import type { Registry } from "../../shared/metrics.ts";

export interface AttacherAppOptions {
  controller: AttacherController;
  csi: CsiClient;
  logger?: Logger;
  metrics?: Registry;
}

export function createAttacherApp(options: AttacherAppOptions): FunctionApp {
  return createControllerFunction({
    name: "attacher",
    controller: options.controller,
    ready: () => options.csi.probeOnce().catch(() => false),
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.metrics ? { metrics: options.metrics } : {}),
  });
}
