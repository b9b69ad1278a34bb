// The provisioner function: POST / takes forwarded PVC and PV events, POST
// /resync re-examines every claim and PV of this driver. Ready when the CSI
// driver answers Probe. All decisions live in shared/provisioner.

import type { FunctionApp } from "../../shared/http/function-app.ts";
import type { ProvisionerController } from "../../shared/provisioner/runtime/provisioner-controller.ts";
import { type CsiControllerAppOptions, createCsiControllerApp } from "../csi-controller-app.ts";

export function createProvisionerApp(options: CsiControllerAppOptions<ProvisionerController>): FunctionApp {
  return createCsiControllerApp("provisioner", options);
}
