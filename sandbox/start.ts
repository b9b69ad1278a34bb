// Starts the embedded sandbox, a small cluster: the API server, the CSI
// driver (its controller plus one node plugin per node), the cluster's
// nodes, a scheduler, one kubelet per node and a pod garbage collector; and
// writes its kubeconfig.
// Shared by `npm run sandbox`, `npm start` and the tests.
import { join, resolve } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import { KubeJsonClient } from "../shared/kube/json-client.ts";
import { annControllerManagedAttachDetach } from "../shared/kube/well-known.ts";
import { createLogger } from "../shared/log.ts";
import { type ApiServerHandle, startApiServer } from "./apiserver/server.ts";
import type { StorageAdmissionPlugin } from "./apiserver/storage-admission.ts";
import { WatchCache } from "./cluster/watch-cache.ts";
import { type CsiDriverHandle, type StartCsiDriverOptions, startCsiDriver } from "./csi/server.ts";
import { expanderKinds, SandboxExpander } from "./expander/expander.ts";
import { writeSandboxKubeconfig } from "./kubeconfig.ts";
import { type KubeletStep, kubeletKinds, kubeletRootDir, SandboxKubelet } from "./kubelet/kubelet.ts";
import { podGcKinds, SandboxPodGc } from "./podgc/podgc.ts";
import { SandboxScheduler, schedulerKinds } from "./scheduler/scheduler.ts";

export type { KubeletStep } from "./kubelet/kubelet.ts";

export interface SandboxOptions {
  /** API server port; 0 picks a free one. */
  port?: number;
  /** Where the kubeconfig goes; the CSI driver's socket, state and volumes go in <dir>/csi, kubelets' paths in <dir>/kubelet. */
  dir: string;
  /** CSI driver settings (name, capabilities, capacity limits, ...). */
  csi?: Omit<StartCsiDriverOptions, "dir" | "nodes">;
  /** How many nodes; default 2. The first is named by the driver's nodeId. */
  nodes?: number;
  /** Run the scheduler; default true. Off for tests that bind pods themselves. */
  scheduler?: boolean;
  /**
   * Run a kubelet per node; default true. Off for tests that play the
   * kubelet themselves: then a DELETE removes a pod at once, as nobody
   * would finish a graceful deletion.
   */
  kubelets?: boolean;
  /**
   * Run the pod garbage collector (force deletes pods on out-of-service or
   * vanished nodes); default: when kubelets run.
   */
  podGc?: boolean;
  /** Every step a kubelet takes (volumesInUse, stage, publish, pod Running, ...). */
  onKubeletStep?: (step: KubeletStep) => void;
  /**
   * The CSIDriver asks the scheduler to check storage capacity
   * (spec.storageCapacity: true); default false. Only where capacity
   * tracking runs, or WaitForFirstConsumer pods wait for objects nobody makes.
   */
  storageCapacity?: boolean;
  /**
   * Run the stand-in for kube-controller-manager's volume expand controller
   * (ExternalExpanding Events on claims the resizer is to grow); default true.
   */
  expander?: boolean;
  /** Storage admission plugins the API server runs without, as kube-apiserver's --disable-admission-plugins. */
  disableAdmissionPlugins?: readonly StorageAdmissionPlugin[];
}

export interface Sandbox {
  apiServer: ApiServerHandle;
  kubeconfigPath: string;
  /** The CSI driver: `endpoint` (unix:///...), `nodeEndpoints`, `adminUrl`, and the in-process `driver`. */
  csi: CsiDriverHandle;
  /** The cluster's node names, the driver's own node first. */
  nodeNames: string[];
  scheduler: SandboxScheduler | undefined;
  kubelets: SandboxKubelet[];
  podGc: SandboxPodGc | undefined;
  close(): Promise<void>;
}

export async function startSandbox(options: SandboxOptions): Promise<Sandbox> {
  const dir = resolve(options.dir);
  const runKubelets = options.kubelets ?? true;
  const apiServer = await startApiServer({
    port: options.port ?? 0,
    gracefulPodDeletion: runKubelets,
    ...(options.disableAdmissionPlugins ? { disableAdmissionPlugins: options.disableAdmissionPlugins } : {}),
  });
  const kubeconfigPath = join(dir, "kubeconfig");
  await writeSandboxKubeconfig(kubeconfigPath, apiServer.url);
  const count = options.nodes ?? 2;
  if (!Number.isInteger(count) || count < 1)
    throw new Error(`nodes must be a positive integer, got ${count}`);
  const first = options.csi?.nodeId ?? "sandbox-node";
  const nodeNames = Array.from({ length: count }, (_, i) => (i === 0 ? first : `${first}-${i + 1}`));
  let csi: CsiDriverHandle;
  try {
    csi = await startCsiDriver({ ...options.csi, dir: join(dir, "csi"), nodes: nodeNames });
  } catch (err) {
    await apiServer.close();
    throw err;
  }
  apiServer.setBaseline(
    clusterObjects(csi.driver.config, nodeNames, { storageCapacity: options.storageCapacity ?? false }),
  );

  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath);
  const runScheduler = options.scheduler ?? true;
  const runPodGc = options.podGc ?? runKubelets;
  const runExpander = options.expander ?? true;
  // One watch per kind for all of them, as a shared informer factory would give: the
  // sandbox's own API server serves every watch, and the benches run on it.
  const kinds = new Set([
    ...(runScheduler ? schedulerKinds : []),
    ...(runKubelets ? kubeletKinds : []),
    ...(runPodGc ? podGcKinds : []),
    ...(runExpander ? expanderKinds : []),
  ]);
  const cacheClient = new KubeJsonClient(kubeConfig, { userAgent: "sandbox-informers" });
  const cache = new WatchCache({
    kubeConfig,
    json: cacheClient,
    resources: [...kinds],
    log: createLogger({ name: "sandbox-informers", level: "warn" }),
  });
  const scheduler = runScheduler ? new SandboxScheduler({ kubeConfig, cache }) : undefined;
  const kubelets = runKubelets
    ? nodeNames.map(
        (node, i) =>
          new SandboxKubelet({
            nodeName: node,
            kubeConfig,
            csiEndpoint: csi.nodeEndpoints[node]!,
            rootDir: kubeletRootDir(dir, node),
            podIpPrefix: `10.244.${i + 1}`,
            cache,
            ...(options.onKubeletStep ? { onStep: options.onKubeletStep } : {}),
          }),
      )
    : [];
  const podGc = runPodGc ? new SandboxPodGc({ kubeConfig, cache }) : undefined;
  const expander = runExpander ? new SandboxExpander({ kubeConfig, cache }) : undefined;
  const close = async (): Promise<void> => {
    await Promise.all([scheduler?.stop(), podGc?.stop(), expander?.stop(), ...kubelets.map((k) => k.stop())]);
    await cache.stop();
    await cacheClient.close();
    await Promise.all([csi.close(), apiServer.close()]);
  };
  try {
    await Promise.all([
      scheduler?.start(),
      podGc?.start(),
      expander?.start(),
      ...kubelets.map((k) => k.start()),
    ]);
  } catch (err) {
    await close();
    throw err;
  }
  return { apiServer, kubeconfigPath, csi, nodeNames, scheduler, kubelets, podGc, close };
}

/**
 * The sandbox cluster's nodes as kubelet, the CSI node-driver-registrar and
 * the driver's deployment leave them: Ready Nodes with hostname, driver
 * topology and zone labels and attach/detach left to the controller, one
 * CSINode each naming the driver's node id there, and the CSIDriver.
 */
export function clusterObjects(
  config: { name: string; nodeId: string; topologyKey: string },
  nodeNames: readonly string[] = [config.nodeId],
  driver: { storageCapacity?: boolean } = {},
): object[] {
  const nodeObjects = nodeNames.flatMap((node, i) => [
    {
      apiVersion: "v1",
      kind: "Node",
      metadata: {
        name: node,
        labels: {
          "kubernetes.io/hostname": node,
          "kubernetes.io/os": "linux",
          "topology.kubernetes.io/zone": `sandbox-zone-${String.fromCharCode(97 + (i % 26))}`,
          [config.topologyKey]: node,
        },
        annotations: { [annControllerManagedAttachDetach]: "true" },
      },
      spec: {},
      status: {
        conditions: [
          {
            type: "Ready",
            status: "True",
            reason: "KubeletReady",
            message: "kubelet is posting ready status",
          },
        ],
        addresses: [
          { type: "InternalIP", address: `10.0.0.${i + 2}` },
          { type: "Hostname", address: node },
        ],
        capacity: { cpu: "4", memory: "8Gi", pods: "110" },
        allocatable: { cpu: "4", memory: "8Gi", pods: "110" },
      },
    },
    {
      apiVersion: "storage.k8s.io/v1",
      kind: "CSINode",
      metadata: { name: node },
      spec: { drivers: [{ name: config.name, nodeID: node, topologyKeys: [config.topologyKey] }] },
    },
  ]);
  return [
    ...nodeObjects,
    {
      // What the driver's deployment installs: attach is required (the external-attacher publishes).
      apiVersion: "storage.k8s.io/v1",
      kind: "CSIDriver",
      metadata: { name: config.name },
      spec: {
        attachRequired: true,
        podInfoOnMount: false,
        volumeLifecycleModes: ["Persistent"],
        storageCapacity: driver.storageCapacity ?? false,
      },
    },
  ];
}

/** The driver's own node only, as the single-node sandbox had it. */
export function clusterNodeObjects(config: { name: string; nodeId: string; topologyKey: string }): object[] {
  return clusterObjects(config, [config.nodeId]);
}
