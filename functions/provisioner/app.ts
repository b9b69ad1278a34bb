// The provisioner function: POST / takes forwarded PVC and PV events, POST
// /resync re-examines every claim and PV of this driver. Ready when the CSI
// driver answers Probe. All decisions live in shared/provisioner.
import type { CsiClient } from "../../shared/csi/client.ts";
import { createControllerFunction } from "../../shared/http/controller-function.ts";
import type { FunctionApp } from "../../shared/http/function-app.ts";
import type { Logger } from "../../shared/log.ts";
import type { Registry } from "../../shared/metrics.ts";
import type { ProvisionerController } from "../../shared/provisioner/runtime/provisioner-controller.ts";

export interface ProvisionerAppOptions {
  controller: ProvisionerController;
  csi: CsiClient;
  logger?: Logger;
  metrics?: Registry;
}

export function createProvisionerApp(options: ProvisionerAppOptions): FunctionApp {
  return createControllerFunction({
    name: "provisioner",
    controller: options.controller,
    ready: () => options.csi.probeOnce().catch(() => false),
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.metrics ? { metrics: options.metrics } : {}),
  });
}
