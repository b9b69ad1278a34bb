// The sandbox's pod garbage collector: every period, force deletes (grace
// period 0) the pods decide.ts names, as kube-controller-manager's podgc
// controller does. Without it, a pod on a shut-down node or on a node that
// is gone would stay Terminating forever once deletion is graceful.
import type { KubeConfig } from "@kubernetes/client-node";
import { isConflict, isNotFound } from "../../shared/kube/api-errors.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { nodes, pods, type ResourceDescriptor } from "../../shared/kube/resources.ts";
import { rfc3339 } from "../../shared/kube/time.ts";
import type { Node, Pod } from "../../shared/kube/types.ts";
import { createLogger, type Logger } from "../../shared/log.ts";
import { Reactor } from "../cluster/reactor.ts";
import { WatchCache } from "../cluster/watch-cache.ts";
import { type PodToCollect, podsToCollect } from "./decide.ts";

export interface SandboxPodGcOptions {
  kubeConfig: KubeConfig;
  /** Upstream's --pod-gc check period is 20 s; default 2 s here, a sandbox has few pods. */
  periodMs?: number;
  /** How long a node must be gone before its pods are orphans; upstream 40 s. */
  quarantineMs?: number;
  log?: Logger;
  /** A watch copy shared with other components (started here, stopped by its owner); default its own. */
  cache?: WatchCache;
}

/** What the pod gc reads. */
export const podGcKinds: readonly ResourceDescriptor[] = [pods, nodes];

export class SandboxPodGc {
  private readonly json: KubeJsonClient;
  private readonly cache: WatchCache;
  private readonly reactor: Reactor;
  private readonly log: Logger;
  private readonly quarantineMs: number;
  private readonly missingSince = new Map<string, number>();
  private readonly ownsCache: boolean;

  constructor(options: SandboxPodGcOptions) {
    this.log = options.log ?? createLogger({ name: "sandbox-podgc", level: "warn" });
    this.quarantineMs = options.quarantineMs ?? 40_000;
    this.json = new KubeJsonClient(options.kubeConfig, { userAgent: "sandbox-podgc" });
    this.reactor = new Reactor(
      () => this.pass(),
      options.periodMs ?? 2000,
      (err) => this.log.warn({ err }, "pod gc pass failed"),
    );
    // Only the period drives passes, as upstream's timer does: no change listener.
    this.ownsCache = options.cache === undefined;
    this.cache =
      options.cache ??
      new WatchCache({
        kubeConfig: options.kubeConfig,
        json: this.json,
        resources: podGcKinds,
        log: this.log,
      });
    if (!this.cache.covers(podGcKinds))
      throw new Error("the watch cache given to the pod gc lacks kinds it reads");
  }

  async start(): Promise<void> {
    this.cache.start();
    await this.cache.synced();
  }

  async stop(): Promise<void> {
    await this.reactor.stop();
    if (this.ownsCache) await this.cache.stop();
    await this.json.close();
  }

  private async pass(): Promise<void> {
    const due = podsToCollect(
      this.cache.list<Pod>(pods),
      this.cache.list<Node>(nodes),
      this.missingSince,
      Date.now(),
      this.quarantineMs,
    );
    for (const item of due) {
      try {
        await this.collect(item);
      } catch (err) {
        if (!isNotFound(err) && !isConflict(err)) this.log.warn({ err }, "force deleting a pod failed");
      }
    }
  }

  private async collect({ pod, reason }: PodToCollect): Promise<void> {
    const namespace = pod.metadata.namespace ?? "default";
    if (reason === "orphaned" && pod.status?.phase !== "Succeeded" && pod.status?.phase !== "Failed") {
      // No kubelet will ever end it: say so in its status before it goes.
      const conditions = ((pod.status?.conditions as { type: string }[] | undefined) ?? []).filter(
        (c) => c.type !== "DisruptionTarget",
      );
      conditions.push({
        type: "DisruptionTarget",
        status: "True",
        reason: "DeletionByPodGC",
        message: "PodGC: node no longer exists",
        lastTransitionTime: rfc3339(new Date()),
      } as { type: string });
      await this.json.replace(
        pods,
        { ...pod, status: { ...pod.status, phase: "Failed", conditions } },
        { subresource: "status" },
      );
    }
    await this.json.delete(pods, pod.metadata.name, namespace, {
      gracePeriodSeconds: 0,
      ...(pod.metadata.uid ? { preconditions: { uid: pod.metadata.uid } } : {}),
    });
  }
}
