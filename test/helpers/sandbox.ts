// Starts a private sandbox (API server and CSI driver) for one test file and
// talks to their test hooks over real HTTP, the way an out-of-process test
// would.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import type { FaultSettings } from "../../sandbox/apiserver/faults.ts";
import { MUTATING_STORAGE_PLUGINS } from "../../sandbox/apiserver/storage-admission.ts";
import type { CapacityReport } from "../../sandbox/csi/capacity.ts";
import type { BackingSnapshot, BackingVolume, DriverStats } from "../../sandbox/csi/driver.ts";
import type { CsiFaultSettings } from "../../sandbox/csi/faults.ts";
import { type SandboxOptions, startSandbox } from "../../sandbox/start.ts";

export interface SandboxAdmin {
  seed(objects: object[]): Promise<void>;
  counters(): Promise<Record<string, number>>;
  resetCounters(): Promise<void>;
  setFaults(f: FaultSettings): Promise<void>;
  clearFaults(): Promise<void>;
  reset(): Promise<void>;
  compact(): Promise<void>;
}

/** The sandbox CSI driver's admin endpoint. */
export interface CsiAdmin {
  /** Every backing volume the driver holds (for leak checks). */
  volumes(): Promise<BackingVolume[]>;
  snapshots(): Promise<BackingSnapshot[]>;
  setFaults(f: CsiFaultSettings): Promise<void>;
  clearFaults(): Promise<void>;
  /** What the driver's Probe answers. */
  setReady(ready: boolean): Promise<void>;
  /** Calls per CSI method and injected errors. */
  stats(): Promise<DriverStats>;
  resetStats(): Promise<void>;
  /** The driver-wide pool and each topology segment's (size, used, available). */
  capacity(): Promise<CapacityReport>;
  /**
   * Sets a segment's pool (segment: the topology key's value, the node name),
   * or the default pool of every segment without one of its own; null puts
   * the segment back on the default.
   */
  setCapacity(totalBytes: number | null, segment?: string): Promise<CapacityReport>;
}

export interface TestSandbox {
  url: string;
  kubeconfigPath: string;
  kubeConfig: KubeConfig;
  admin: SandboxAdmin;
  /** `unix:///...` socket of the sandbox CSI driver. */
  csiEndpoint: string;
  csiAdminUrl: string;
  csi: CsiAdmin;
  close(): Promise<void>;
}

async function call(url: string, method: string, body?: unknown): Promise<unknown> {
  const res = await fetch(url, {
    method,
    headers: { "Content-Type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`sandbox hook ${method} ${url}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

export function sandboxAdmin(url: string): SandboxAdmin {
  const hook = (path: string) => `${url}/_sandbox/${path}`;
  return {
    seed: async (objects) => void (await call(hook("seed"), "POST", { objects })),
    counters: async () => (await call(hook("counters"), "GET")) as Record<string, number>,
    resetCounters: async () => void (await call(hook("counters"), "DELETE")),
    setFaults: async (f) => void (await call(hook("faults"), "PUT", f)),
    clearFaults: async () => void (await call(hook("faults"), "DELETE")),
    reset: async () => void (await call(hook("reset"), "POST")),
    compact: async () => void (await call(hook("compact"), "POST")),
  };
}

export function csiAdmin(url: string): CsiAdmin {
  return {
    volumes: async () => ((await call(`${url}/volumes`, "GET")) as { volumes: BackingVolume[] }).volumes,
    snapshots: async () =>
      ((await call(`${url}/snapshots`, "GET")) as { snapshots: BackingSnapshot[] }).snapshots,
    setFaults: async (f) => void (await call(`${url}/faults`, "PUT", f)),
    clearFaults: async () => void (await call(`${url}/faults`, "DELETE")),
    setReady: async (ready) => void (await call(`${url}/probe`, "PUT", { ready })),
    stats: async () => (await call(`${url}/stats`, "GET")) as DriverStats,
    resetStats: async () => void (await call(`${url}/stats`, "DELETE")),
    capacity: async () => (await call(`${url}/capacity`, "GET")) as CapacityReport,
    setCapacity: async (totalBytes, segment) =>
      (await call(`${url}/capacity`, "PUT", {
        totalBytes,
        ...(segment === undefined ? {} : { segment }),
      })) as CapacityReport,
  };
}

/**
 * Options: CSI driver settings, e.g. `{ csi: { controllerCapabilities: [...] } }`.
 * No scheduler and no kubelets unless asked for: most tests play those parts
 * themselves (pods created on a node, deleted at once).
 */
export async function startTestSandbox(options: Omit<SandboxOptions, "dir"> = {}): Promise<TestSandbox> {
  const dir = await mkdtemp(join(tmpdir(), "ksf-sandbox-"));
  // Tests play kube-controller-manager's protection controllers themselves, or run without them,
  // and count the sandbox's requests: no expand-controller stand-in watching beside them.
  const sandbox = await startSandbox({
    scheduler: false,
    kubelets: false,
    expander: false,
    disableAdmissionPlugins: MUTATING_STORAGE_PLUGINS,
    ...options,
    dir,
  });
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(sandbox.kubeconfigPath);
  return {
    url: sandbox.apiServer.url,
    kubeconfigPath: sandbox.kubeconfigPath,
    kubeConfig,
    admin: sandboxAdmin(sandbox.apiServer.url),
    csiEndpoint: sandbox.csi.endpoint,
    csiAdminUrl: sandbox.csi.adminUrl,
    csi: csiAdmin(sandbox.csi.adminUrl),
    close: async () => {
      await sandbox.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
