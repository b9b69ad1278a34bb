// Starts the embedded sandbox (the API server and the CSI driver) and writes
// its kubeconfig. Shared by `npm run sandbox`, `npm start` and the tests.
import { join, resolve } from "node:path";
import { type ApiServerHandle, startApiServer } from "./apiserver/server.ts";
import { type CsiDriverHandle, type StartCsiDriverOptions, startCsiDriver } from "./csi/server.ts";
import { writeSandboxKubeconfig } from "./kubeconfig.ts";

export interface SandboxOptions {
  /** API server port; 0 picks a free one. */
  port?: number;
  /** Where the kubeconfig goes; the CSI driver's socket, state and volumes go in <dir>/csi. */
  dir: string;
  /** CSI driver settings (name, capabilities, capacity limits, ...). */
  csi?: Omit<StartCsiDriverOptions, "dir">;
}

export interface Sandbox {
  apiServer: ApiServerHandle;
  kubeconfigPath: string;
  /** The CSI driver: `endpoint` (unix:///...), `adminUrl`, and the in-process `driver`. */
  csi: CsiDriverHandle;
  close(): Promise<void>;
}

export async function startSandbox(options: SandboxOptions): Promise<Sandbox> {
  const dir = resolve(options.dir);
  const apiServer = await startApiServer({ port: options.port ?? 0 });
  const kubeconfigPath = join(dir, "kubeconfig");
  await writeSandboxKubeconfig(kubeconfigPath, apiServer.url);
  let csi: CsiDriverHandle;
  try {
    csi = await startCsiDriver({ ...options.csi, dir: join(dir, "csi") });
  } catch (err) {
    await apiServer.close();
    throw err;
  }
  apiServer.setBaseline(clusterNodeObjects(csi.driver.config));
  return {
    apiServer,
    kubeconfigPath,
    csi,
    close: async () => {
      await Promise.all([csi.close(), apiServer.close()]);
    },
  };
}

/**
 * The one node of the sandbox cluster, as kubelet, the CSI
 * node-driver-registrar and the driver's deployment would leave it: a Ready
 * Node labelled with the driver's topology key, the driver's CSIDriver
 * object, and a CSINode naming the driver's node id.
 */
export function clusterNodeObjects(config: { name: string; nodeId: string; topologyKey: string }): object[] {
  return [
    {
      apiVersion: "v1",
      kind: "Node",
      metadata: {
        name: config.nodeId,
        labels: { "kubernetes.io/hostname": config.nodeId, [config.topologyKey]: config.nodeId },
      },
      spec: {},
      status: { conditions: [{ type: "Ready", status: "True" }] },
    },
    {
      // What the driver's deployment installs: attach is required (the external-attacher publishes).
      apiVersion: "storage.k8s.io/v1",
      kind: "CSIDriver",
      metadata: { name: config.name },
      spec: { attachRequired: true, podInfoOnMount: false, volumeLifecycleModes: ["Persistent"] },
    },
    {
      apiVersion: "storage.k8s.io/v1",
      kind: "CSINode",
      metadata: { name: config.nodeId },
      spec: { drivers: [{ name: config.name, nodeID: config.nodeId, topologyKeys: [config.topologyKey] }] },
    },
  ];
}
