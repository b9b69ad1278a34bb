import type { Controller, ControllerEvent } from "../../http/controller-function.ts";
import { getOptional, isAlreadyExists, isNotFound } from "../../kube/api-errors.ts";
import type { EventSink } from "../../kube/event-recorder.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import { retryWhileLosingRaces } from "../../kube/optimistic-update.ts";
import {
  csiDrivers,
  nodes,
  persistentVolumeClaims,
  persistentVolumes,
  pods,
  volumeAttachments,
} from "../../kube/resources.ts";
import type {
  CSIDriver,
  Node,
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
  VolumeAttachment,
} from "../../kube/types.ts";
import { annAttachLock } from "../../kube/well-known.ts";
import { annDetachFence, detachLog, forceDetachReason, reason } from "../constants.ts";
import { type DetachPolicy, defaultDetachPolicy } from "../detach-policy.ts";
import { type AttachDetachStep, multiAttachMessage, reconcileNode } from "../reconcile-node.ts";
import { type AttachDetachMetrics, attachDetachMetrics } from "./attach-detach-metrics.ts";

export interface NodeReport {
  node: string;
  outcome: string;
  writes: number;
}

/** Where detaches are logged, as kube-controller-manager logs them (a pino Logger fits). */
export interface DetachLogger {
  info(details: Record<string, unknown>, message: string): void;
}

export interface AttachDetachControllerOptions {
  kube: KubeJsonClient;
  events: EventSink;
  now?: () => Date;
  maxAttempts?: number;
  resyncConcurrency?: number;
  /** maxWaitForUnmountDuration and --disable-force-detach-on-timeout; upstream's defaults when absent. */
  policy?: DetachPolicy;
  /** Defaults to the process registry's. */
  metrics?: AttachDetachMetrics;
  log?: DetachLogger;
}

function str(v: unknown): string | undefined {
  return typeof v === "string" && v !== "" ? v : undefined;
}

function podClaimNames(pod: Pod): string[] {
  return (pod.spec.volumes ?? []).flatMap((v) =>
    v.persistentVolumeClaim?.claimName
      ? [v.persistentVolumeClaim.claimName]
      : v.ephemeral
        ? [`${pod.metadata.name}-${v.name}`]
        : [],
  );
}

export class AttachDetachController implements Controller {
  private readonly kube: KubeJsonClient;
  private readonly events: EventSink;
  private readonly now: () => Date;
  private readonly maxAttempts: number;
  private readonly resyncConcurrency: number;
  private readonly policy: DetachPolicy;
  private readonly metrics: AttachDetachMetrics;
  private readonly log: DetachLogger | undefined;

  constructor(o: AttachDetachControllerOptions) {
    this.kube = o.kube;
    this.events = o.events;
    this.now = o.now ?? (() => new Date());
    this.maxAttempts = o.maxAttempts ?? 5;
    this.resyncConcurrency = o.resyncConcurrency ?? 4;
    this.policy = o.policy ?? defaultDetachPolicy;
    this.metrics = o.metrics ?? attachDetachMetrics();
    this.log = o.log;
  }

  async handleEvent(e: ControllerEvent): Promise<NodeReport[]> {
    const { nodeNames, volumes } = await this.affected(e);
    const reports: NodeReport[] = [];
    for (const node of nodeNames) reports.push(...(await this.reconcileWithFollowUps(node, volumes)));
    return reports;
  }

  /** Which nodes an event concerns, and PVs the reconcile must look at even if nothing there names them. */
  private async affected(e: ControllerEvent): Promise<{ nodeNames: Set<string>; volumes: string[] }> {
    const nodeNames = new Set<string>();
    const volumes: string[] = [];
    const o = e.object as { spec?: Record<string, unknown> } | undefined;
    if (e.apiVersion === "v1" && e.kind === "Pod") {
      let nodeName = str(o?.spec?.nodeName);
      if (!nodeName && e.action !== "delete") {
        const pod = await getOptional(() => this.kube.get<Pod>(pods, e.name, e.namespace));
        nodeName = pod?.spec.nodeName;
      }
      if (nodeName) nodeNames.add(nodeName);
    } else if (e.apiVersion === "v1" && e.kind === "Node") {
      nodeNames.add(e.name);
    } else if (e.apiVersion === "storage.k8s.io/v1" && e.kind === "VolumeAttachment") {
      let spec = o?.spec as { nodeName?: unknown; source?: { persistentVolumeName?: unknown } } | undefined;
      if (!spec)
        spec = (await getOptional(() => this.kube.get<VolumeAttachment>(volumeAttachments, e.name)))?.spec;
      const nodeName = str(spec?.nodeName);
      if (nodeName) nodeNames.add(nodeName);
      const pv = str(spec?.source?.persistentVolumeName);
      if (pv) volumes.push(pv);
    } else if (e.apiVersion === "v1" && e.kind === "PersistentVolumeClaim") {
      for (const n of await this.nodesUsingClaim(e.namespace ?? "", e.name)) nodeNames.add(n);
    } else if (e.apiVersion === "v1" && e.kind === "PersistentVolume") {
      volumes.push(e.name);
      for (const n of await this.nodesForVolume(e.name)) nodeNames.add(n);
    }
    return { nodeNames, volumes };
  }

  private async nodesUsingClaim(namespace: string, claimName: string): Promise<string[]> {
    const list = await this.kube.list<Pod>(pods, { namespace });
    return list.items
      .filter((p) => p.spec.nodeName && podClaimNames(p).includes(claimName))
      .map((p) => p.spec.nodeName!);
  }

  /** Nodes with a VolumeAttachment for the PV, holding its lock, or running pods that use its claim. */
  private async nodesForVolume(pvName: string): Promise<string[]> {
    const [pv, attachments] = await Promise.all([
      getOptional(() => this.kube.get<PersistentVolume>(persistentVolumes, pvName)),
      this.kube.list<VolumeAttachment>(volumeAttachments),
    ]);
    const out = new Set<string>();
    for (const va of attachments.items)
      if (va.spec.source.persistentVolumeName === pvName) out.add(va.spec.nodeName);
    const lock = pv?.metadata.annotations?.[annAttachLock];
    if (lock) out.add(lock);
    const ref = pv?.spec.claimRef;
    if (ref?.name && ref.namespace)
      for (const n of await this.nodesUsingClaim(ref.namespace, ref.name)) out.add(n);
    return [...out];
  }

  private async reconcileWithFollowUps(node: string, hintVolumes: string[]): Promise<NodeReport[]> {
    const first = await this.reconcile(node, hintVolumes);
    const reports = [first.report];
    // A released lock may be what another node was waiting for.
    const next = new Set<string>();
    for (const pv of first.released)
      for (const n of await this.nodesForVolume(pv)) if (n !== node) next.add(n);
    for (const n of next) reports.push((await this.reconcile(n, [])).report);
    return reports;
  }

  /** One node: read, decide, write; a lost race re-decides on fresh state. */
  async reconcile(
    nodeName: string,
    hintVolumes: string[] = [],
  ): Promise<{ report: NodeReport; released: string[] }> {
    return retryWhileLosingRaces(() => this.reconcileOnce(nodeName, hintVolumes), {
      maxAttempts: this.maxAttempts,
    });
  }

  private async reconcileOnce(
    nodeName: string,
    hintVolumes: string[],
  ): Promise<{ report: NodeReport; released: string[] }> {
    // The node first: its status write is conditional on this read, so a write that succeeds was
    // decided on attachments read after every earlier successful write (no stale list wins).
    const node = await getOptional(() => this.kube.get<Node>(nodes, nodeName));
    const [podList, attachments, drivers] = await Promise.all([
      this.kube.list<Pod>(pods, { fieldSelector: `spec.nodeName=${nodeName}` }),
      this.kube.list<VolumeAttachment>(volumeAttachments),
      this.kube.list<CSIDriver>(csiDrivers),
    ]);
    const claimKeys = new Set<string>();
    for (const p of podList.items)
      for (const c of podClaimNames(p)) claimKeys.add(`${p.metadata.namespace}/${c}`);
    const claims = (
      await Promise.all(
        [...claimKeys].map((k) => {
          const [ns, name] = k.split("/") as [string, string];
          return getOptional(() => this.kube.get<PersistentVolumeClaim>(persistentVolumeClaims, name, ns));
        }),
      )
    ).filter((c): c is PersistentVolumeClaim => c !== undefined);
    const pvNames = new Set<string>(hintVolumes);
    for (const c of claims) if (c.spec.volumeName) pvNames.add(c.spec.volumeName);
    for (const va of attachments.items) {
      if (va.spec.nodeName === nodeName && va.spec.source.persistentVolumeName)
        pvNames.add(va.spec.source.persistentVolumeName);
    }
    const volumes = (
      await Promise.all(
        [...pvNames].map((n) => getOptional(() => this.kube.get<PersistentVolume>(persistentVolumes, n))),
      )
    ).filter((v): v is PersistentVolume => v !== undefined);

    const plan = reconcileNode({
      nodeName,
      node,
      pods: podList.items,
      claims,
      volumes,
      drivers: drivers.items,
      attachments: attachments.items,
      now: this.now(),
      policy: this.policy,
    });
    let writes = 0;
    const released: string[] = [];
    for (const step of plan.steps) {
      writes += await this.execute(step, nodeName);
      if (step.op === "release-lock") released.push(step.volume.metadata.name);
    }
    return {
      report: { node: nodeName, outcome: plan.summary.join("; ") || "in sync", writes },
      released,
    };
  }

  private async execute(step: AttachDetachStep, nodeName: string): Promise<number> {
    switch (step.op) {
      case "acquire-lock": {
        // Conditional on what was read: if another reconcile took it first, this is a 409 and we re-decide.
        const v = step.volume;
        await this.kube.replace(persistentVolumes, {
          ...v,
          metadata: { ...v.metadata, annotations: { ...v.metadata.annotations, [annAttachLock]: nodeName } },
        });
        return 1;
      }
      case "confirm-lock":
        // The PV unchanged, conditional on the resourceVersion read: a 409 means someone (a reconcile
        // of this node releasing the lock, another node taking it) moved first; then we re-decide.
        await this.kube.replace(persistentVolumes, step.volume);
        return 0;
      case "release-lock": {
        const v = step.volume;
        const annotations = { ...v.metadata.annotations };
        delete annotations[annAttachLock];
        await this.kube.replace(persistentVolumes, { ...v, metadata: { ...v.metadata, annotations } });
        return 1;
      }
      case "create-attachment":
        try {
          await this.kube.create(volumeAttachments, step.attachment);
        } catch (err) {
          if (!isAlreadyExists(err)) throw err;
          return 0;
        }
        return 1;
      case "update-node-status":
        return this.writeVolumesAttached(step);
      case "delete-attachment":
        try {
          // Conditional on the attachment as read: a reconcile that listed it on the node meanwhile wrote it first.
          await this.kube.delete(volumeAttachments, step.attachment.metadata.name, undefined, {
            preconditions: {
              uid: step.attachment.metadata.uid ?? "",
              ...(step.attachment.metadata.resourceVersion
                ? { resourceVersion: step.attachment.metadata.resourceVersion }
                : {}),
            },
          });
        } catch (err) {
          if (!isNotFound(err)) throw err;
          return 0;
        }
        this.detachStarted(step);
        return 1;
      case "update-attachment":
        await this.kube.replace(volumeAttachments, step.attachment);
        return 1;
      case "event":
        await this.events.event(step.pod, step.type, step.reason, step.message);
        return 0;
      case "multi-attach": {
        const text = await this.multiAttachText(
          step.volume,
          step.pods[0]?.metadata.namespace ?? "",
          nodeName,
        );
        for (const pod of step.pods) await this.events.event(pod, "Warning", reason.failedAttachVolume, text);
        return 0;
      }
    }
  }

  /**
   * A merge patch of the whole list, conditional on the resourceVersion read
   * (a 409 re-decides); an empty list is sent as null, as upstream's patch
   * drops the field. A node deleted meanwhile has nothing to report.
   */
  private async writeVolumesAttached(
    step: Extract<AttachDetachStep, { op: "update-node-status" }>,
  ): Promise<number> {
    const { name, resourceVersion } = step.node.metadata;
    const patch = {
      metadata: {
        resourceVersion,
        ...(step.fence !== undefined ? { annotations: { [annDetachFence]: step.fence } } : {}),
      },
      status: { volumesAttached: step.volumesAttached.length > 0 ? step.volumesAttached : null },
    };
    try {
      await this.kube.patch<Node>(nodes, name, undefined, patch, "merge", { subresource: "status" });
    } catch (err) {
      if (!isNotFound(err)) throw err;
      return 0;
    }
    return 1;
  }

  private detachStarted(step: Extract<AttachDetachStep, { op: "delete-attachment" }>): void {
    const details = {
      node: step.attachment.spec.nodeName,
      volumeName: step.attachment.spec.source.persistentVolumeName,
      volumeAttachment: step.attachment.metadata.name,
    };
    if (step.force === undefined) {
      this.log?.info(details, detachLog.started);
      return;
    }
    this.metrics.forcedDetaches.inc({ reason: step.force });
    if (step.force === forceDetachReason.timeout)
      this.log?.info(
        { ...details, duration: `${this.policy.maxWaitForUnmountMs / 1000}s` },
        detachLog.forcedTimeout,
      );
    else this.log?.info(details, detachLog.forcedOutOfService);
  }

  /** Pods on other nodes that use the volume, for the Multi-Attach message. */
  private async multiAttachText(pv: PersistentVolume, namespace: string, nodeName: string): Promise<string> {
    const ref = pv.spec.claimRef;
    const all = await this.kube.list<Pod>(pods);
    const elsewhere = all.items.filter(
      (p) =>
        p.spec.nodeName &&
        p.spec.nodeName !== nodeName &&
        p.status?.phase !== "Succeeded" &&
        p.status?.phase !== "Failed" &&
        p.metadata.namespace === ref?.namespace &&
        podClaimNames(p).includes(ref?.name ?? ""),
    );
    return multiAttachMessage(pv.metadata.name, namespace, elsewhere);
  }

  /** Every node that has or had anything to do with volumes. */
  async resync(): Promise<{ nodes: number; writes: number; errors: string[] }> {
    const [nodeList, attachments, pvs] = await Promise.all([
      this.kube.list<Node>(nodes),
      this.kube.list<VolumeAttachment>(volumeAttachments),
      this.kube.list<PersistentVolume>(persistentVolumes),
    ]);
    const names = new Set<string>(nodeList.items.map((n) => n.metadata.name));
    for (const va of attachments.items) names.add(va.spec.nodeName);
    const lockedBy = new Map<string, string[]>();
    for (const pv of pvs.items) {
      const lock = pv.metadata.annotations?.[annAttachLock];
      if (!lock) continue;
      names.add(lock);
      lockedBy.set(lock, [...(lockedBy.get(lock) ?? []), pv.metadata.name]);
    }
    const queue = [...names];
    let writes = 0;
    const errors: string[] = [];
    const worker = async (): Promise<void> => {
      for (let n = queue.shift(); n !== undefined; n = queue.shift()) {
        try {
          for (const r of await this.reconcileWithFollowUps(n, lockedBy.get(n) ?? [])) writes += r.writes;
        } catch (err) {
          errors.push(`${n}: ${err instanceof Error ? err.message : String(err)}`);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.resyncConcurrency, queue.length) }, worker));
    return { nodes: names.size, writes, errors };
  }
}
