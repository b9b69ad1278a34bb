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

/** What the node plugin running on `node` answers: its own id and topology segment. */
export function nodeInfo(config: DriverConfig, node: string): NodeGetInfoResponse {
  return {
    node_id: node,
    max_volumes_per_node: config.maxVolumesPerNode,
    accessible_topology: config.pluginCapabilities.has("VOLUME_ACCESSIBILITY_CONSTRAINTS")
      ? { segments: { [config.topologyKey]: node } }
      : null,
  };
}

export function nodeCapabilities(config: DriverConfig): NodeGetCapabilitiesResponse {
  return { capabilities: [...config.nodeCapabilities].map((type) => ({ rpc: { type } })) };
}
