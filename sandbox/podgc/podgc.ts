// The sandbox's pod garbage collector: every period, force deletes (grace
// period 0) the pods decide.ts names, as kube-controller-manager's podgc
// controller does. Without it, a pod on a shut-down node or on a node that
// is gone would stay Terminating forever once deletion is graceful.
import { isConflict, isNotFound } from "../../shared/kube/api-errors.ts";
import { nodes, pods, type ResourceDescriptor } from "../../shared/kube/resources.ts";
import { rfc3339 } from "../../shared/kube/time.ts";
import type { Node, Pod } from "../../shared/kube/types.ts";
import { WatchLoop, type WatchLoopHost } from "../cluster/watch-loop.ts";
import { type PodToCollect, podsToCollect } from "./decide.ts";

export interface SandboxPodGcOptions extends WatchLoopHost {
  /** Upstream's --pod-gc check period is 20 s; default 2 s here, a sandbox has few pods. */
  periodMs?: number;
  /** How long a node must be gone before its pods are orphans; upstream 40 s. */
  quarantineMs?: number;
}

/** What the pod gc reads. */
export const podGcKinds: readonly ResourceDescriptor[] = [pods, nodes];

export class SandboxPodGc {
  private readonly loop: WatchLoop;
  private readonly quarantineMs: number;
  private readonly missingSince = new Map<string, number>();

  constructor(options: SandboxPodGcOptions) {
    this.quarantineMs = options.quarantineMs ?? 40_000;
    this.loop = new WatchLoop(options, {
      name: "sandbox-podgc",
      kinds: podGcKinds,
      pass: () => this.pass(),
      periodMs: options.periodMs ?? 2000,
      // Only the period drives passes, as upstream's timer does.
      onChange: false,
    });
  }

  async start(): Promise<void> {
    await this.loop.start();
  }

  async stop(): Promise<void> {
    await this.loop.stop();
  }

  private async pass(): Promise<void> {
    const due = podsToCollect(
      this.loop.cache.list<Pod>(pods),
      this.loop.cache.list<Node>(nodes),
      this.missingSince,
      Date.now(),
      this.quarantineMs,
    );
    for (const item of due) {
      try {
        await this.collect(item);
      } catch (err) {
        if (!isNotFound(err) && !isConflict(err)) this.loop.log.warn({ err }, "force deleting a pod failed");
      }
    }
  }

  private async collect({ pod, reason }: PodToCollect): Promise<void> {
    const namespace = pod.metadata.namespace ?? "default";
    if (pod.status?.phase !== "Succeeded" && pod.status?.phase !== "Failed") {
      // No kubelet will ever end it: it is Failed before it goes, as upstream marks it; an orphan also says why.
      const current = (pod.status?.conditions as { type: string }[] | undefined) ?? [];
      const conditions =
        reason === "orphaned"
          ? [
              ...current.filter((c) => c.type !== "DisruptionTarget"),
              {
                type: "DisruptionTarget",
                status: "True",
                reason: "DeletionByPodGC",
                message: "PodGC: node no longer exists",
                lastTransitionTime: rfc3339(new Date()),
              },
            ]
          : current;
      await this.loop.json.replace(
        pods,
        { ...pod, status: { ...pod.status, phase: "Failed", conditions } },
        { subresource: "status" },
      );
    }
    await this.loop.json.delete(pods, pod.metadata.name, namespace, {
      gracePeriodSeconds: 0,
      ...(pod.metadata.uid ? { preconditions: { uid: pod.metadata.uid } } : {}),
    });
  }
}
