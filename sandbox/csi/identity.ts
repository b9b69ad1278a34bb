// Identity and Node service answers, and ControllerGetCapabilities: all
// read straight from the configuration.
import type { DriverConfig } from "./config.ts";
import type {
  ControllerGetCapabilitiesResponse,
  GetPluginCapabilitiesResponse,
  GetPluginInfoResponse,
  NodeGetCapabilitiesResponse,
  NodeGetInfoResponse,
  ProbeResponse,
} from "./messages.ts";

export function pluginInfo(config: DriverConfig): GetPluginInfoResponse {
  return { name: config.name, vendor_version: config.vendorVersion, manifest: { sandbox: "true" } };
}

export function pluginCapabilities(config: DriverConfig): GetPluginCapabilitiesResponse {
  return { capabilities: [...config.pluginCapabilities].map((type) => ({ service: { type } })) };
}

export function probe(ready: boolean): ProbeResponse {
  return { ready: { value: ready } };
}

export function controllerCapabilities(config: DriverConfig): ControllerGetCapabilitiesResponse {
  return { capabilities: [...config.controllerCapabilities].map((type) => ({ rpc: { type } })) };
}

export function nodeInfo(config: DriverConfig): NodeGetInfoResponse {
  return {
    node_id: config.nodeId,
    max_volumes_per_node: config.maxVolumesPerNode,
    accessible_topology: config.pluginCapabilities.has("VOLUME_ACCESSIBILITY_CONSTRAINTS")
      ? { segments: { [config.topologyKey]: config.nodeId } }
      : null,
  };
}

/** The sandbox has no node-side staging, stats or expansion. */
export function nodeCapabilities(): NodeGetCapabilitiesResponse {
  return { capabilities: [] };
}
