// The attach/detach function: POST / takes Pod, Node, PVC, PV and
// VolumeAttachment events and reconciles the nodes they touch; POST /resync
// reconciles every node. Decisions live in shared/attach-detach.
import type { AttachDetachController } from "../../shared/attach-detach/runtime/attach-detach-controller.ts";
import {
  type ControllerAppOptions,
  createControllerFunction,
} from "../../shared/http/controller-function.ts";
import type { FunctionApp } from "../../shared/http/function-app.ts";

export function createAttachDetachApp(options: ControllerAppOptions<AttachDetachController>): FunctionApp {
  return createControllerFunction({ ...options, name: "attach-detach" });
}
