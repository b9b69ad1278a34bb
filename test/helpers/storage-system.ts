// The binder and the provisioner wired to a test sandbox in-process, the way
// their functions wire them, plus `settle`: deliver every claim and volume to
// both controllers, round after round, until a round writes nothing (what
// events plus the periodic resync achieve in a cluster).
import { BinderController } from "../../shared/binder/runtime/binder-controller.ts";
import { CsiClient } from "../../shared/csi/client.ts";
import { EventRecorder } from "../../shared/kube/event-recorder.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { persistentVolumeClaims, persistentVolumes } from "../../shared/kube/resources.ts";
import type { PersistentVolume, PersistentVolumeClaim } from "../../shared/kube/types.ts";
import { createMetricsRegistry } from "../../shared/metrics.ts";
import { defaultProvisionerOptions, type ProvisionerOptions } from "../../shared/provisioner/options.ts";
import { ProvisionerController } from "../../shared/provisioner/runtime/provisioner-controller.ts";
import { provisionerMetrics } from "../../shared/provisioner/runtime/provisioner-metrics.ts";
import type { TestSandbox } from "./sandbox.ts";

export const driverName = "hostpath.csi.k8s.io";

export interface StorageSystem {
  kube: KubeJsonClient;
  csi: CsiClient;
  binder: BinderController;
  /** A provisioner instance; `newProvisioner()` stands for a restarted process. */
  provisioner: ProvisionerController;
  newProvisioner(): ProvisionerController;
  settle(options?: { maxRounds?: number }): Promise<{ rounds: number; errors: string[] }>;
  close(): Promise<void>;
}

const writeVerbs = ["create ", "update ", "patch ", "delete "];

function objectWrites(counters: Record<string, number>): number {
  let n = 0;
  for (const [k, v] of Object.entries(counters)) {
    if (writeVerbs.some((w) => k.startsWith(w)) && !k.includes(" events")) n += v;
  }
  return n;
}

export async function startStorageSystem(
  sandbox: TestSandbox,
  options: Partial<ProvisionerOptions> = {},
): Promise<StorageSystem> {
  const kube = new KubeJsonClient(sandbox.kubeConfig);
  const csi = await CsiClient.connect({ endpoint: sandbox.csiEndpoint, timeoutMs: 2000 });
  const quiet = { warn: () => undefined };
  const binder = new BinderController({
    kube,
    events: new EventRecorder(kube, { component: "persistentvolume-controller", logger: quiet }),
  });
  const metrics = provisionerMetrics(createMetricsRegistry({ defaultMetrics: false }));
  const newProvisioner = (): ProvisionerController =>
    new ProvisionerController({
      kube,
      csi,
      events: new EventRecorder(kube, { component: `${driverName}_test`, logger: quiet }),
      driverName,
      options: { ...defaultProvisionerOptions(driverName), ...options },
      metrics,
    });
  const system: StorageSystem = {
    kube,
    csi,
    binder,
    provisioner: newProvisioner(),
    newProvisioner,
    async settle({ maxRounds = 40 } = {}) {
      const errors: string[] = [];
      let quietRounds = 0;
      for (let round = 1; round <= maxRounds; round++) {
        const before = objectWrites(await sandbox.admin.counters());
        const [claims, volumes] = await Promise.all([
          kube.list<PersistentVolumeClaim>(persistentVolumeClaims),
          kube.list<PersistentVolume>(persistentVolumes),
        ]);
        const deliveries: (() => Promise<unknown>)[] = [];
        for (const c of claims.items) {
          const e = {
            action: "update" as const,
            kind: "PersistentVolumeClaim",
            apiVersion: "v1",
            name: c.metadata.name,
            namespace: c.metadata.namespace ?? "",
          };
          deliveries.push(
            () => system.binder.handleEvent(e),
            () => system.provisioner.handleEvent(e),
          );
        }
        for (const v of volumes.items) {
          const e = {
            action: "update" as const,
            kind: "PersistentVolume",
            apiVersion: "v1",
            name: v.metadata.name,
          };
          deliveries.push(
            () => system.binder.handleEvent(e),
            () => system.provisioner.handleEvent(e),
          );
        }
        for (const d of deliveries) {
          try {
            await d();
          } catch (err) {
            errors.push(err instanceof Error ? err.message : String(err));
          }
        }
        const after = objectWrites(await sandbox.admin.counters());
        quietRounds = after === before ? quietRounds + 1 : 0;
        if (quietRounds >= 2) return { rounds: round, errors };
      }
      throw new Error(`no steady state after ${maxRounds} rounds; errors: ${errors.slice(-5).join(" | ")}`);
    },
    async close() {
      csi.close();
      await kube.close();
    },
  };
  return system;
}
