// The app of a controller function that talks to a CSI driver (provisioner,
// attacher): ready only while the driver answers Probe, since every sync may
// need it.
import type { CsiClient } from "../shared/csi/client.ts";
import {
  type Controller,
  type ControllerAppOptions,
  createControllerFunction,
} from "../shared/http/controller-function.ts";
import type { FunctionApp } from "../shared/http/function-app.ts";

export interface CsiControllerAppOptions<C extends Controller> extends ControllerAppOptions<C> {
  csi: CsiClient;
}

export function createCsiControllerApp<C extends Controller>(
  name: string,
  options: CsiControllerAppOptions<C>,
): FunctionApp {
  return createControllerFunction({
    ...options,
    name,
    ready: csiReady(options.csi),
  });
}

/** Ready while the driver answers Probe. */
export function csiReady(csi: CsiClient): () => Promise<boolean> {
  return () => csi.probeOnce().catch(() => false);
}
