// The driver's plugin and controller capabilities as plain booleans, which is
// how the sidecars decide what to do (provision at all, attach or treat
// attachment as trivial, honour readonly, run the ListVolumes reconciler...).

import type {
  ControllerRpcType,
  ControllerServiceCapability,
  PluginCapability,
  PluginServiceType,
} from "./types.ts";

export interface CsiCapabilities {
  // Plugin capabilities (Identity.GetPluginCapabilities).
  controllerService: boolean;
  accessibilityConstraints: boolean;
  groupControllerService: boolean;
  onlineExpansion: boolean;
  offlineExpansion: boolean;
  // Controller capabilities (Controller.ControllerGetCapabilities); all
  // false when the plugin has no controller service.
  createDeleteVolume: boolean;
  publishUnpublishVolume: boolean;
  listVolumes: boolean;
  getCapacity: boolean;
  createDeleteSnapshot: boolean;
  listSnapshots: boolean;
  cloneVolume: boolean;
  publishReadonly: boolean;
  expandVolume: boolean;
  listVolumesPublishedNodes: boolean;
  volumeCondition: boolean;
  getVolume: boolean;
  singleNodeMultiWriter: boolean;
  modifyVolume: boolean;
  getSnapshot: boolean;
}

export function capabilitiesFrom(
  plugin: readonly PluginCapability[],
  controller: readonly ControllerServiceCapability[],
): CsiCapabilities {
  const services = new Set<PluginServiceType>();
  const expansion = new Set<string>();
  for (const capability of plugin) {
    if (capability.service) services.add(capability.service.type);
    if (capability.volumeExpansion) expansion.add(capability.volumeExpansion.type);
  }
  const controllerService = services.has("CONTROLLER_SERVICE");
  const rpcs = new Set<ControllerRpcType>();
  if (controllerService) {
    for (const capability of controller) if (capability.rpc) rpcs.add(capability.rpc.type);
  }
  return {
    controllerService,
    accessibilityConstraints: services.has("VOLUME_ACCESSIBILITY_CONSTRAINTS"),
    groupControllerService: services.has("GROUP_CONTROLLER_SERVICE"),
    onlineExpansion: expansion.has("ONLINE"),
    offlineExpansion: expansion.has("OFFLINE"),
    createDeleteVolume: rpcs.has("CREATE_DELETE_VOLUME"),
    publishUnpublishVolume: rpcs.has("PUBLISH_UNPUBLISH_VOLUME"),
    listVolumes: rpcs.has("LIST_VOLUMES"),
    getCapacity: rpcs.has("GET_CAPACITY"),
    createDeleteSnapshot: rpcs.has("CREATE_DELETE_SNAPSHOT"),
    listSnapshots: rpcs.has("LIST_SNAPSHOTS"),
    cloneVolume: rpcs.has("CLONE_VOLUME"),
    publishReadonly: rpcs.has("PUBLISH_READONLY"),
    expandVolume: rpcs.has("EXPAND_VOLUME"),
    listVolumesPublishedNodes: rpcs.has("LIST_VOLUMES_PUBLISHED_NODES"),
    volumeCondition: rpcs.has("VOLUME_CONDITION"),
    getVolume: rpcs.has("GET_VOLUME"),
    singleNodeMultiWriter: rpcs.has("SINGLE_NODE_MULTI_WRITER"),
    modifyVolume: rpcs.has("MODIFY_VOLUME"),
    getSnapshot: rpcs.has("GET_SNAPSHOT"),
  };
}
