// Identity and Node service answers, and ControllerGetCapabilities: all
// read straight from the configuration.
import type {
  ControllerGetCapabilitiesResponse,
  GetPluginCapabilitiesResponse,
  GetPluginInfoResponse,
  NodeGetCapabilitiesResponse,
  NodeGetInfoResponse,
  PluginCapability,
  ProbeResponse,
} from "../../shared/csi/types.ts";
import type { DriverConfig } from "./config.ts";

export function pluginInfo(config: DriverConfig): GetPluginInfoResponse {
  return { name: config.name, vendorVersion: config.vendorVersion, manifest: { sandbox: "true" } };
}

export function pluginCapabilities(config: DriverConfig): GetPluginCapabilitiesResponse {
  const capabilities: PluginCapability[] = [...config.pluginCapabilities].map((type) => ({
    service: { type },
  }));
  if (config.volumeExpansion !== "NONE")
    capabilities.push({ volumeExpansion: { type: config.volumeExpansion } });
  return { capabilities };
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
    nodeId: node,
    maxVolumesPerNode: BigInt(config.maxVolumesPerNode),
    accessibleTopology: config.pluginCapabilities.has("VOLUME_ACCESSIBILITY_CONSTRAINTS")
      ? { segments: { [config.topologyKey]: node } }
      : undefined,
  };
}

export function nodeCapabilities(config: DriverConfig): NodeGetCapabilitiesResponse {
  return { capabilities: [...config.nodeCapabilities].map((type) => ({ rpc: { type } })) };
}
