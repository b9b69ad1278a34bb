// The binder and the provisioner wired to a test sandbox in-process, the way
// their functions wire them, plus `settle`: deliver every claim and volume to
// both controllers, round after round, until a round writes nothing (what
// events plus the periodic resync achieve in a cluster).
import { AttachDetachController } from "../../shared/attach-detach/runtime/attach-detach-controller.ts";
import { AttacherController } from "../../shared/attacher/runtime/attacher-controller.ts";
import { BinderController } from "../../shared/binder/runtime/binder-controller.ts";
import { CsiClient } from "../../shared/csi/client.ts";
import { EventRecorder } from "../../shared/kube/event-recorder.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import {
  nodes,
  persistentVolumeClaims,
  persistentVolumes,
  pods,
  volumeAttachments,
} from "../../shared/kube/resources.ts";
import type { KubeObject } from "../../shared/kube/types.ts";
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
  attachDetach: AttachDetachController;
  attacher: AttacherController;
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
  const attachDetach = new AttachDetachController({
    kube,
    events: new EventRecorder(kube, { component: "attachdetach-controller", logger: quiet }),
  });
  const attacher = new AttacherController({ kube, csi, driverName });
  const system: StorageSystem = {
    kube,
    csi,
    binder,
    provisioner: newProvisioner(),
    attachDetach,
    attacher,
    newProvisioner,
    async settle({ maxRounds = 40 } = {}) {
      const errors: string[] = [];
      let quietRounds = 0;
      for (let round = 1; round <= maxRounds; round++) {
        const before = objectWrites(await sandbox.admin.counters());
        const kinds = [
          { r: persistentVolumeClaims, kind: "PersistentVolumeClaim", apiVersion: "v1" },
          { r: persistentVolumes, kind: "PersistentVolume", apiVersion: "v1" },
          { r: pods, kind: "Pod", apiVersion: "v1" },
          { r: nodes, kind: "Node", apiVersion: "v1" },
          { r: volumeAttachments, kind: "VolumeAttachment", apiVersion: "storage.k8s.io/v1" },
        ];
        const lists = await Promise.all(kinds.map((k) => kube.list<KubeObject>(k.r)));
        const deliveries: (() => Promise<unknown>)[] = [];
        const controllers = [system.binder, system.provisioner, system.attachDetach, system.attacher];
        kinds.forEach((k, i) => {
          for (const o of lists[i]!.items) {
            const e = {
              action: "update" as const,
              kind: k.kind,
              apiVersion: k.apiVersion,
              name: o.metadata.name,
              ...(o.metadata.namespace ? { namespace: o.metadata.namespace } : {}),
              object: o,
            };
            for (const c of controllers) deliveries.push(() => c.handleEvent(e));
          }
        });
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
