// The resizer function: POST / takes PersistentVolumeClaim and PersistentVolume
// events and expands or modifies the claims they name; POST /resync goes over
// every claim bound to a volume of this driver. Ready while the CSI driver
// answers Probe. All decisions live in shared/resizer.
import type { FunctionApp } from "../../shared/http/function-app.ts";
import type { ResizerController } from "../../shared/resizer/runtime/resizer-controller.ts";
import { type CsiControllerAppOptions, createCsiControllerApp } from "../csi-controller-app.ts";

export function createResizerApp(options: CsiControllerAppOptions<ResizerController>): FunctionApp {
  return createCsiControllerApp("resizer", options);
}
