// The sandbox's kube-scheduler: watches pods and what their placement
// depends on, and for each pending pod (no node, not being deleted, ours by
// schedulerName) acts on decide.ts's answer: bind it through the
// pods/binding subresource, write a WaitForFirstConsumer claim's
// selected-node annotation, or record PodScheduled=False Unschedulable.
import { isConflict, isNotFound } from "../../shared/kube/api-errors.ts";
import type { EventRecorder } from "../../shared/kube/event-recorder.ts";
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
} from "../../shared/kube/resources.ts";
import { rfc3339 } from "../../shared/kube/time.ts";
import type {
  CSIDriver,
  CSINode,
  CSIStorageCapacity,
  KubeObject,
  Node,
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
  StorageClass,
} from "../../shared/kube/types.ts";
import { annBoundByController, annSelectedNode } from "../../shared/kube/well-known.ts";
import { WatchLoop, type WatchLoopHost } from "../cluster/watch-loop.ts";
import { decidePod, type ScheduleDecision, type SchedulingView } from "./decide.ts";

export const schedulerName = "default-scheduler";

export interface SandboxSchedulerOptions extends WatchLoopHost {
  /** How often every pending pod is looked at again without a change; default 1 s. */
  resyncMs?: number;
}

/** What the scheduler reads. */
export const schedulerKinds: readonly ResourceDescriptor[] = [
  pods,
  nodes,
  csiNodes,
  persistentVolumeClaims,
  persistentVolumes,
  storageClasses,
  csiDrivers,
  csiStorageCapacities,
];

/** pods/<name>/binding as a collection path, so the JSON client can POST a Binding to it. */
function bindingOf(podName: string): ResourceDescriptor {
  return {
    group: "",
    version: "v1",
    plural: `pods/${encodeURIComponent(podName)}/binding`,
    kind: "Binding",
    namespaced: true,
  };
}

interface PodCondition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  [key: string]: unknown;
}

export class SandboxScheduler {
  private readonly loop: WatchLoop;
  private readonly events: EventRecorder;

  constructor(options: SandboxSchedulerOptions) {
    this.loop = new WatchLoop(options, {
      name: "sandbox-scheduler",
      kinds: schedulerKinds,
      pass: () => this.pass(),
      periodMs: options.resyncMs ?? 1000,
    });
    this.events = this.loop.eventRecorder(schedulerName, "sandbox");
  }

  /** Starts watching; resolves once the first lists are in. */
  async start(): Promise<void> {
    await this.loop.start();
  }

  async stop(): Promise<void> {
    await this.loop.stop();
  }

  private view(assumed: Map<string, number>): SchedulingView {
    const counts = new Map<string, number>();
    for (const p of this.loop.cache.list<Pod>(pods)) {
      const node = p.spec.nodeName;
      const phase = p.status?.phase;
      if (!node || p.metadata.deletionTimestamp || phase === "Succeeded" || phase === "Failed") continue;
      counts.set(node, (counts.get(node) ?? 0) + 1);
    }
    return {
      nodes: this.loop.cache.list<Node>(nodes).sort((a, b) => a.metadata.name.localeCompare(b.metadata.name)),
      csiNodes: this.loop.cache.list<CSINode>(csiNodes),
      claim: (ns, name) => this.loop.cache.get<PersistentVolumeClaim>(persistentVolumeClaims, name, ns),
      volume: (name) => this.loop.cache.get<PersistentVolume>(persistentVolumes, name),
      volumes: this.loop.cache.list<PersistentVolume>(persistentVolumes),
      storageClass: (name) => this.loop.cache.get<StorageClass>(storageClasses, name),
      csiDriver: (name) => this.loop.cache.get<CSIDriver>(csiDrivers, name),
      capacities: this.loop.cache.list<CSIStorageCapacity>(csiStorageCapacities),
      podCount: (node) => (counts.get(node) ?? 0) + (assumed.get(node) ?? 0),
    };
  }

  private async pass(): Promise<void> {
    const assumed = new Map<string, number>();
    const pending = this.loop.cache
      .list<Pod>(pods)
      .filter((p) => isPending(p))
      .sort((a, b) => (a.metadata.creationTimestamp ?? "").localeCompare(b.metadata.creationTimestamp ?? ""));
    for (const pod of pending) {
      const decision = decidePod(pod, this.view(assumed));
      try {
        await this.act(pod, decision);
        if (decision.action === "bind" || decision.action === "prebind") {
          assumed.set(decision.node, (assumed.get(decision.node) ?? 0) + 1);
        }
      } catch (err) {
        // Stale copy or a racing writer: the next pass decides again on newer objects.
        if (isConflict(err) || isNotFound(err)) continue;
        this.loop.log.warn(
          { err, pod: `${pod.metadata.namespace}/${pod.metadata.name}` },
          "scheduling a pod failed",
        );
      }
    }
  }

  private async act(pod: Pod, decision: ScheduleDecision): Promise<void> {
    const namespace = pod.metadata.namespace ?? "default";
    switch (decision.action) {
      case "bind":
        await this.loop.json.create(bindingOf(pod.metadata.name), {
          apiVersion: "v1",
          kind: "Binding",
          metadata: {
            name: pod.metadata.name,
            namespace,
            ...(pod.metadata.uid ? { uid: pod.metadata.uid } : {}),
          },
          target: { apiVersion: "v1", kind: "Node", name: decision.node },
        });
        await this.events.event(
          pod,
          "Normal",
          "Scheduled",
          `Successfully assigned ${namespace}/${pod.metadata.name} to ${decision.node}`,
        );
        return;
      case "prebind":
        for (const { claim: name, volume } of decision.bindVolumes) {
          const claim = this.loop.cache.get<PersistentVolumeClaim>(persistentVolumeClaims, name, namespace);
          const pv = this.loop.cache.get<PersistentVolume>(persistentVolumes, volume);
          if (!claim || !pv) continue;
          // As the PV controller's bind: claimRef to the claim, marked as bound by a controller; the binder finishes.
          await this.loop.json.replace(persistentVolumes, {
            ...pv,
            metadata: {
              ...pv.metadata,
              annotations: { ...pv.metadata.annotations, [annBoundByController]: "yes" },
            },
            spec: {
              ...pv.spec,
              claimRef: {
                kind: "PersistentVolumeClaim",
                namespace,
                name,
                uid: claim.metadata.uid,
                apiVersion: "v1",
                resourceVersion: claim.metadata.resourceVersion,
              },
            },
          });
        }
        for (const name of decision.selectNode) {
          const claim = this.loop.cache.get<PersistentVolumeClaim>(persistentVolumeClaims, name, namespace);
          if (!claim) continue;
          await this.loop.json.replace(persistentVolumeClaims, {
            ...claim,
            metadata: {
              ...claim.metadata,
              annotations: { ...claim.metadata.annotations, [annSelectedNode]: decision.node },
            },
          });
        }
        return;
      case "wait-for-binding":
        return;
      case "unschedulable":
        await this.markUnschedulable(pod, decision.message);
        return;
    }
  }

  /** PodScheduled=False, reason Unschedulable, written only when it changes. */
  private async markUnschedulable(pod: Pod, message: string): Promise<void> {
    const conditions = ((pod.status?.conditions as PodCondition[] | undefined) ?? []).filter(
      (c) => c.type !== "PodScheduled",
    );
    const current = (pod.status?.conditions as PodCondition[] | undefined)?.find(
      (c) => c.type === "PodScheduled",
    );
    if (current?.status === "False" && current.reason === "Unschedulable" && current.message === message)
      return;
    const condition: PodCondition = {
      type: "PodScheduled",
      status: "False",
      lastProbeTime: null,
      lastTransitionTime: current?.status === "False" ? current.lastTransitionTime : rfc3339(new Date()),
      reason: "Unschedulable",
      message,
    };
    await this.events.event(pod, "Warning", "FailedScheduling", message);
    const next: KubeObject = {
      ...pod,
      status: {
        ...pod.status,
        phase: pod.status?.phase ?? "Pending",
        conditions: [...conditions, condition],
      },
    };
    await this.loop.json.replace(pods, next, { subresource: "status" });
  }
}

function isPending(p: Pod): boolean {
  if (p.spec.nodeName || p.metadata.deletionTimestamp) return false;
  const phase = p.status?.phase;
  if (phase === "Succeeded" || phase === "Failed") return false;
  const spec = p.spec as { schedulerName?: string; schedulingGates?: unknown[] };
  // A gated pod waits for its gates to be removed before the scheduler looks at it.
  if (Array.isArray(spec.schedulingGates) && spec.schedulingGates.length > 0) return false;
  return spec.schedulerName === undefined || spec.schedulerName === schedulerName;
}
