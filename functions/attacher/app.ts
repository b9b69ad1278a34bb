// The attacher function: POST / takes forwarded VolumeAttachment and PV
// events, POST /resync re-syncs every VolumeAttachment of this driver and,
// when the driver lists published nodes, repairs what the driver contradicts.
// Ready when the CSI driver answers Probe. All decisions live in shared/attacher.
import type { AttacherController } from "../../shared/attacher/runtime/attacher-controller.ts";
import type { FunctionApp } from "../../shared/http/function-app.ts";
import { type CsiControllerAppOptions, createCsiControllerApp } from "../csi-controller-app.ts";

export function createAttacherApp(options: CsiControllerAppOptions<AttacherController>): FunctionApp {
  return createCsiControllerApp("attacher", options);
}
