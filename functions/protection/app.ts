// The protection function: POST / takes PersistentVolumeClaim,
// PersistentVolume and Pod events and checks the claims and PVs they touch
// for their protection finalizers; POST /resync checks every claim and PV
// being deleted or lacking its finalizer. Decisions live in shared/protection.
import { createControllerFunction } from "../../shared/http/controller-function.ts";
import type { FunctionApp } from "../../shared/http/function-app.ts";
import type { Logger } from "../../shared/log.ts";
import type { Registry } from "../../shared/metrics.ts";
import type { ProtectionController } from "../../shared/protection/runtime/protection-controller.ts";

export interface ProtectionAppOptions {
  controller: ProtectionController;
  logger?: Logger;
  metrics?: Registry;
}

export function createProtectionApp(options: ProtectionAppOptions): FunctionApp {
  return createControllerFunction({
    name: "protection",
    controller: options.controller,
    ...(options.logger ? { logger: options.logger } : {}),
    ...(options.metrics ? { metrics: options.metrics } : {}),
  });
}
