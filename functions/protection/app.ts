// The protection function: POST / takes PersistentVolumeClaim,
// PersistentVolume and Pod events and checks the claims and PVs they touch
// for their protection finalizers; POST /resync checks every claim and PV
// being deleted or lacking its finalizer. Decisions live in shared/protection.
import {
  type ControllerAppOptions,
  createControllerFunction,
} from "../../shared/http/controller-function.ts";
import type { FunctionApp } from "../../shared/http/function-app.ts";
import type { ProtectionController } from "../../shared/protection/runtime/protection-controller.ts";

export function createProtectionApp(options: ControllerAppOptions<ProtectionController>): FunctionApp {
  return createControllerFunction({ ...options, name: "protection" });
}
