// The pvc-protection and pv-protection controllers of kube-controller-manager
// as one stateless controller: each event names the claims and PVs to check,
// each check reads the object, decides (../decide-*.ts) and writes the whole
// object back conditional on the resourceVersion it read. A lost race is
// decided again on fresh state; a lost event is caught by the resync.

import type { Controller, ControllerEvent } from "../../http/controller-function.ts";
import { BadRequestError } from "../../http/errors.ts";
import { getOptional } from "../../kube/api-errors.ts";
import { claimFromEvent, volumeFromEvent } from "../../kube/event-copies.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import { retryWhileLosingRaces } from "../../kube/optimistic-update.ts";
import { persistentVolumeClaims, persistentVolumes, pods } from "../../kube/resources.ts";
import type { PersistentVolume, PersistentVolumeClaim, Pod } from "../../kube/types.ts";
import { pvcProtectionFinalizer, pvProtectionFinalizer } from "../../kube/well-known.ts";
import { type ClaimStep, claimNeedsNoSync, decideClaim } from "../decide-claim.ts";
import { decideVolume, volumeNeedsNoSync } from "../decide-volume.ts";
import { podFromEvent } from "../pod-from-event.ts";
import { claimNamesOfPod, podMayFreeClaims } from "../pod-usage.ts";
import { LivePodLists } from "./live-pod-lists.ts";
import { type ProtectionMetrics, protectionMetrics } from "./protection-metrics.ts";

export interface ProtectionReport {
  /** "claim <namespace>/<name>", "volume <name>" or "pod <namespace>/<name>". */
  object: string;
  outcome: string;
  writes: number;
}

export interface ProtectionResyncReport {
  claims: number;
  volumes: number;
  writes: number;
  errors: string[];
}

export interface ProtectionControllerOptions {
  kube: KubeJsonClient;
  metrics?: ProtectionMetrics;
  /** Attempts of one check while its writes lose races. Default 5. */
  maxAttempts?: number;
  /** Checks a resync runs at once. Default 4. */
  resyncConcurrency?: number;
}

interface ClaimSyncHints {
  /** The claim as a list read it, used for the first attempt instead of a GET. */
  copy?: PersistentVolumeClaim;
  /** Pods at hand: a reason to keep the finalizer, never to remove it. */
  cachedPods?: readonly Pod[];
  /** The pass's live lists, made after `copy` was read. */
  livePods?: LivePodLists;
}

function namespaceOf(e: ControllerEvent): string {
  if (!e.namespace) throw new BadRequestError(`a ${e.kind} event must name the object's namespace`);
  return e.namespace;
}

export class ProtectionController implements Controller {
  private readonly kube: KubeJsonClient;
  private readonly metrics: ProtectionMetrics;
  private readonly maxAttempts: number;
  private readonly resyncConcurrency: number;

  constructor(o: ProtectionControllerOptions) {
    this.kube = o.kube;
    this.metrics = o.metrics ?? protectionMetrics();
    this.maxAttempts = o.maxAttempts ?? 5;
    this.resyncConcurrency = Math.max(1, o.resyncConcurrency ?? 4);
  }

  async handleEvent(e: ControllerEvent): Promise<ProtectionReport[]> {
    if (e.apiVersion !== "v1") return [];
    switch (e.kind) {
      case "PersistentVolumeClaim": {
        const namespace = namespaceOf(e);
        // A claim that is gone was let go already: upstream reacts to adds and updates only.
        if (e.action === "delete")
          return [{ object: `claim ${namespace}/${e.name}`, outcome: "deleted", writes: 0 }];
        const copy = claimFromEvent(e.object);
        if (copy && claimNeedsNoSync(copy))
          return [
            { object: `claim ${namespace}/${e.name}`, outcome: "protected (the event's copy)", writes: 0 },
          ];
        return [await this.syncClaim(namespace, e.name)];
      }
      case "PersistentVolume": {
        if (e.action === "delete") return [{ object: `volume ${e.name}`, outcome: "deleted", writes: 0 }];
        const copy = volumeFromEvent(e.object);
        if (copy && volumeNeedsNoSync(copy))
          return [{ object: `volume ${e.name}`, outcome: "protected (the event's copy)", writes: 0 }];
        return [await this.syncVolume(e.name)];
      }
      case "Pod":
        return this.podChanged(e, namespaceOf(e));
      default:
        return [];
    }
  }

  /** A deleted, terminated or unscheduled pod may free its claims: check each of them. */
  private async podChanged(e: ControllerEvent, namespace: string): Promise<ProtectionReport[]> {
    const object = `pod ${namespace}/${e.name}`;
    const deleted = e.action === "delete";
    let pod: Pod | undefined;
    if (e.object) pod = podFromEvent(e.object);
    else if (!deleted) pod = await getOptional(() => this.kube.get<Pod>(pods, e.name, namespace));
    // Which claims a vanished pod named is not known any more; the resync checks every claim.
    if (!pod)
      return [{ object, outcome: "pod is gone and its volumes unknown; left to the resync", writes: 0 }];
    if (!podMayFreeClaims(pod, deleted))
      return [{ object, outcome: "scheduled and not terminated: frees no claim", writes: 0 }];
    const claims = claimNamesOfPod(pod);
    if (claims.length === 0) return [{ object, outcome: "uses no claim", writes: 0 }];
    // A deleted pod's copy is its last state: it uses nothing any more.
    const cachedPods = deleted ? [] : [pod];
    const reports: ProtectionReport[] = [];
    for (const name of claims) reports.push(await this.syncClaim(namespace, name, { cachedPods }));
    return reports;
  }

  /** One claim: read, decide (listing the namespace's pods if it must), write; a lost race decides again. */
  syncClaim(namespace: string, name: string, hints: ClaimSyncHints = {}): Promise<ProtectionReport> {
    const object = `claim ${namespace}/${name}`;
    return retryWhileLosingRaces(
      async (attempt) => {
        // A retry reads afresh: the copy and the pass's lists lost the race that brought us here.
        const first = attempt === 1;
        const claim =
          first && hints.copy
            ? hints.copy
            : await getOptional(() =>
                this.kube.get<PersistentVolumeClaim>(persistentVolumeClaims, name, namespace),
              );
        if (!claim) return { object, outcome: "claim is gone", writes: 0 };
        const cachedPods = hints.cachedPods ?? [];
        let step = decideClaim({ claim, cachedPods });
        if (step.op === "list-pods") {
          const livePods =
            first && hints.livePods
              ? await hints.livePods.podsIn(step.namespace)
              : await new LivePodLists(this.kube, this.metrics).podsIn(step.namespace);
          step = decideClaim({ claim, cachedPods, livePods });
        }
        return { object, ...(await this.applyClaimStep(step)) };
      },
      { maxAttempts: this.maxAttempts },
    );
  }

  private async applyClaimStep(step: ClaimStep): Promise<{ outcome: string; writes: number }> {
    switch (step.op) {
      case "add-finalizer":
        await this.kube.replace(persistentVolumeClaims, step.claim);
        this.metrics.finalizersAdded.inc({ kind: "PersistentVolumeClaim" });
        return { outcome: `added ${pvcProtectionFinalizer}`, writes: 1 };
      case "remove-finalizer":
        await this.kube.replace(persistentVolumeClaims, step.claim);
        this.metrics.finalizersRemoved.inc({ kind: "PersistentVolumeClaim" });
        return { outcome: `removed ${pvcProtectionFinalizer}: no pod uses it`, writes: 1 };
      case "keep":
        this.metrics.keptInUse.inc({ kind: "PersistentVolumeClaim" });
        return { outcome: `kept ${pvcProtectionFinalizer}: ${step.reason}`, writes: 0 };
      case "list-pods":
        // decideClaim never asks twice: it was given the live list.
        throw new Error("decideClaim asked for a live pod list it was given");
      case "none":
        return { outcome: step.reason, writes: 0 };
    }
  }

  /** One PV: read, decide, write; a lost race decides again. */
  syncVolume(name: string, copy?: PersistentVolume): Promise<ProtectionReport> {
    const object = `volume ${name}`;
    return retryWhileLosingRaces(
      async (attempt) => {
        const volume =
          attempt === 1 && copy
            ? copy
            : await getOptional(() => this.kube.get<PersistentVolume>(persistentVolumes, name));
        if (!volume) return { object, outcome: "volume is gone", writes: 0 };
        const step = decideVolume(volume);
        switch (step.op) {
          case "add-finalizer":
            await this.kube.replace(persistentVolumes, step.volume);
            this.metrics.finalizersAdded.inc({ kind: "PersistentVolume" });
            return { object, outcome: `added ${pvProtectionFinalizer}`, writes: 1 };
          case "remove-finalizer":
            await this.kube.replace(persistentVolumes, step.volume);
            this.metrics.finalizersRemoved.inc({ kind: "PersistentVolume" });
            return { object, outcome: `removed ${pvProtectionFinalizer}: not Bound`, writes: 1 };
          case "keep":
            this.metrics.keptInUse.inc({ kind: "PersistentVolume" });
            return { object, outcome: `kept ${pvProtectionFinalizer}: ${step.reason}`, writes: 0 };
          case "none":
            return { object, outcome: step.reason, writes: 0 };
        }
      },
      { maxAttempts: this.maxAttempts },
    );
  }

  /** Every claim and PV being deleted or lacking its finalizer, a few at a time. */
  async resync(): Promise<ProtectionResyncReport> {
    const [claimList, volumeList] = await Promise.all([
      this.kube.list<PersistentVolumeClaim>(persistentVolumeClaims),
      this.kube.list<PersistentVolume>(persistentVolumes),
    ]);
    // Made after the claims were read: its lists are newer than every claim copy they judge.
    const livePods = new LivePodLists(this.kube, this.metrics);
    const claims = claimList.items.filter((c) => !claimNeedsNoSync(c));
    const volumes = volumeList.items.filter((v) => !volumeNeedsNoSync(v));
    const queue: { key: string; run: () => Promise<ProtectionReport> }[] = [
      ...claims.map((c) => {
        const namespace = c.metadata.namespace ?? "";
        return {
          key: `claim ${namespace}/${c.metadata.name}`,
          run: () => this.syncClaim(namespace, c.metadata.name, { copy: c, livePods }),
        };
      }),
      ...volumes.map((v) => ({
        key: `volume ${v.metadata.name}`,
        run: () => this.syncVolume(v.metadata.name, v),
      })),
    ];
    let writes = 0;
    const errors: string[] = [];
    const worker = async (): Promise<void> => {
      for (let task = queue.shift(); task !== undefined; task = queue.shift()) {
        try {
          // Read after the await: `writes +=` would add to the value from before it, losing other workers' writes.
          const report = await task.run();
          writes += report.writes;
        } catch (err) {
          errors.push(`${task.key}: ${err instanceof Error ? err.message : String(err)}`);
        }
      }
    };
    const workers = Math.min(this.resyncConcurrency, queue.length);
    await Promise.all(Array.from({ length: workers }, worker));
    return { claims: claims.length, volumes: volumes.length, writes, errors };
  }
}
