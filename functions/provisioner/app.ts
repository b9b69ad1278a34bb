// The provisioner function: POST / takes forwarded PVC and PV events (and,
// with capacity tracking, StorageClass, Node, CSINode and CSIStorageCapacity
// events), POST /resync re-examines every claim and PV of this driver. Ready
// when the CSI driver answers Probe. All decisions live in shared/provisioner
// (shared/provisioner/capacity for capacity tracking).

import type { Controller } from "../../shared/http/controller-function.ts";
import type { FunctionApp } from "../../shared/http/function-app.ts";
import { type CsiControllerAppOptions, createCsiControllerApp } from "../csi-controller-app.ts";

export function createProvisionerApp(options: CsiControllerAppOptions<Controller>): FunctionApp {
  return createCsiControllerApp("provisioner", options);
}
