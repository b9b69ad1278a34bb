// The kinds the forwarder can watch, and where each lives on the REST API.
// The descriptors come from shared/kube/resources.ts so the forwarder and the
// functions agree on plurals and scope.

import {
  csiDrivers,
  csiNodes,
  csiStorageCapacities,
  nodes,
  persistentVolumeClaims,
  persistentVolumes,
  pods,
  type ResourceDescriptor,
  storageClasses,
  volumeAttachments,
  volumeAttributesClasses,
} from "../kube/resources.ts";

/** By kind name, the way FORWARDER_ROUTES spells them. */
export const WATCHABLE_KINDS: ReadonlyMap<string, ResourceDescriptor> = new Map(
  [
    persistentVolumeClaims,
    persistentVolumes,
    pods,
    nodes,
    volumeAttachments,
    storageClasses,
    csiDrivers,
    csiNodes,
    csiStorageCapacities,
    volumeAttributesClasses,
  ].map((r) => [r.kind, r]),
);
