// The handler is chosen once from the driver's capabilities, as upstream's
// main does (cmd/csi-attacher/main.go): a driver without a controller
// service, or without PUBLISH_UNPUBLISH_VOLUME, has nothing to attach, so
// every VolumeAttachment is simply marked attached (trivial handler);
// otherwise each one is published and unpublished through CSI (CSI handler).
import type { CsiCapabilities } from "../csi/capabilities.ts";
import { CsiHandler } from "./csi-handler.ts";
import type { AttachHandler } from "./handler.ts";
import { TrivialHandler } from "./trivial-handler.ts";

interface HandlerOptions {
  driverName: string;
  /** --default-fstype; upstream's default is "" (send no fsType). */
  defaultFsType?: string;
}

export function chooseHandler(capabilities: CsiCapabilities, options: HandlerOptions): AttachHandler {
  const publishes = capabilities.controllerService && capabilities.publishUnpublishVolume;
  // Observed: no controller service or no PUBLISH_UNPUBLISH_VOLUME: nothing to publish.
  if (!publishes) return new TrivialHandler(options.driverName);
  return new CsiHandler(options.driverName, {
    publish: {
      publishReadonly: capabilities.publishReadonly,
      singleNodeMultiWriter: capabilities.singleNodeMultiWriter,
      defaultFsType: options.defaultFsType ?? "",
    },
    reconciles: capabilities.listVolumes && capabilities.listVolumesPublishedNodes,
  });
}
