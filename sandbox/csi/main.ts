// The sandbox CSI driver on its own, until SIGINT/SIGTERM: for chaos runs
// that kill and restart the driver. Prints one JSON line on stdout when
// ready; `npm run sandbox` starts the same driver next to the API server.
import { resolve } from "node:path";
import type { ControllerCapability, NodeCapability, PluginCapability } from "./capabilities.ts";
import { startCsiDriver } from "./server.ts";

const list = (v: string | undefined): string[] | undefined =>
  v === undefined
    ? undefined
    : v
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean);

/** A byte count from the environment; a typo stops the driver rather than meaning a default. */
function bytesEnv(name: string): number | undefined {
  const v = process.env[name];
  if (v === undefined || v === "") return undefined;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 0)
    throw new Error(`${name} must be a non-negative integer of bytes, got ${v}`);
  return n;
}

/** "node-a=1073741824,node-b=0" → per-segment pools. */
function poolsEnv(name: string): Record<string, number> | undefined {
  const entries = list(process.env[name]);
  if (!entries) return undefined;
  return Object.fromEntries(
    entries.map((e) => {
      const [segment, bytes] = e.split("=");
      const n = Number(bytes);
      if (!segment || bytes === undefined || !Number.isSafeInteger(n) || n < 0) {
        throw new Error(`${name}: expected <segment>=<bytes>, got ${e}`);
      }
      return [segment, n];
    }),
  );
}

const optional = <K extends string, V>(key: K, value: V | undefined): Partial<Record<K, V>> =>
  value === undefined ? {} : ({ [key]: value } as Record<K, V>);

const handle = await startCsiDriver({
  dir: resolve(process.env.CSI_DIR ?? ".sandbox/csi"),
  ...(process.env.CSI_SOCKET ? { socketPath: process.env.CSI_SOCKET } : {}),
  ...(process.env.DRIVER_NAME ? { name: process.env.DRIVER_NAME } : {}),
  ...(process.env.CSI_NODE_ID ? { nodeId: process.env.CSI_NODE_ID } : {}),
  ...(process.env.CSI_ADMIN_PORT ? { adminPort: Number(process.env.CSI_ADMIN_PORT) } : {}),
  controllerCapabilities: list(process.env.CSI_CONTROLLER_CAPABILITIES) as ControllerCapability[] | undefined,
  pluginCapabilities: list(process.env.CSI_PLUGIN_CAPABILITIES) as PluginCapability[] | undefined,
  nodeCapabilities: list(process.env.CSI_NODE_CAPABILITIES) as NodeCapability[] | undefined,
  ...optional("maxVolumeBytes", bytesEnv("CSI_MAX_VOLUME_BYTES")),
  ...optional("totalCapacityBytes", bytesEnv("CSI_TOTAL_CAPACITY_BYTES")),
  ...optional("segmentCapacityBytes", bytesEnv("CSI_SEGMENT_CAPACITY_BYTES")),
  ...optional("segmentCapacityOverrides", poolsEnv("CSI_SEGMENT_CAPACITIES")),
  ...optional(
    "nodeExpansionKinds",
    list(process.env.CSI_NODE_EXPANSION_KINDS) as ("mount" | "block")[] | undefined,
  ),
  ...optional(
    "volumeExpansion",
    process.env.CSI_VOLUME_EXPANSION as "ONLINE" | "OFFLINE" | "NONE" | undefined,
  ),
  // Further nodes, each with a node plugin on <dir>/node-<name>.sock.
  ...(process.env.CSI_NODES ? { nodes: list(process.env.CSI_NODES) } : {}),
});
process.stdout.write(
  `${JSON.stringify({ ready: true, csiEndpoint: handle.endpoint, csiAdmin: handle.adminUrl, csiNodeEndpoints: handle.nodeEndpoints })}\n`,
);

let stopping = false;
function stop(signal: string): void {
  if (stopping) return;
  stopping = true;
  process.stderr.write(`sandbox CSI driver: ${signal}, stopping\n`);
  handle.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
}
process.on("SIGINT", () => stop("SIGINT"));
process.on("SIGTERM", () => stop("SIGTERM"));
