// The attach/detach controller on the shared runtime (shared/controller): an
// event names the nodes it touches, each node is loaded (load-node.ts),
// reconciled by the pure decision (../reconcile-node.ts) and its steps
// carried out in the decision's order (node-executors.ts); a released lock
// follows up on the nodes that may have waited for it.
import { ControllerRuntime, type ControllerSpec } from "../../controller/index.ts";
import type { ControllerEvent } from "../../http/controller-function.ts";
import { getOptional } from "../../kube/api-errors.ts";
import type { EventSink } from "../../kube/event-recorder.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import { nodes, persistentVolumes, pods, volumeAttachments } from "../../kube/resources.ts";
import type { Node, PersistentVolume, Pod, VolumeAttachment } from "../../kube/types.ts";
import { annAttachLock } from "../../kube/well-known.ts";
import { type DetachPolicy, defaultDetachPolicy } from "../detach-policy.ts";
import { type AttachDetachStep, type NodeReconcileInput, reconcileNode } from "../reconcile-node.ts";
import { type AttachDetachMetrics, attachDetachMetrics, NodeVolumeCounts } from "./attach-detach-metrics.ts";
import { loadNode } from "./load-node.ts";
import { type DetachLogger, type NodeKey, nodeExecutors } from "./node-executors.ts";
import { nodesForVolume, nodesUsingClaim } from "./node-lookups.ts";

export type { DetachLogger } from "./node-executors.ts";

export interface NodeReport {
  node: string;
  outcome: string;
  writes: number;
}

export interface AttachDetachControllerOptions {
  kube: KubeJsonClient;
  events: EventSink;
  now?: () => Date;
  maxAttempts?: number;
  resyncConcurrency?: number;
  /** Keys synced at once, events and resync together (WORKERS); default no cap. */
  workers?: number | undefined;
  /** maxWaitForUnmountDuration and --disable-force-detach-on-timeout; upstream's defaults when absent. */
  policy?: DetachPolicy;
  /** Defaults to the process registry's. */
  metrics?: AttachDetachMetrics;
  log?: DetachLogger;
}

function str(v: unknown): string | undefined {
  return typeof v === "string" && v !== "" ? v : undefined;
}

/** Which nodes an event concerns, each with the PVs the reconcile must look at even if nothing there names them. */
async function nodesOf(kube: KubeJsonClient, e: ControllerEvent): Promise<NodeKey[]> {
  const nodeNames = new Set<string>();
  const volumes: string[] = [];
  const o = e.object as { spec?: Record<string, unknown> } | undefined;
  if (e.apiVersion === "v1" && e.kind === "Pod") {
    let nodeName = str(o?.spec?.nodeName);
    if (!nodeName && e.action !== "delete") {
      const pod = await getOptional(() => kube.get<Pod>(pods, e.name, e.namespace));
      nodeName = pod?.spec.nodeName;
    }
    if (nodeName) nodeNames.add(nodeName);
  } else if (e.apiVersion === "v1" && e.kind === "Node") {
    nodeNames.add(e.name);
  } else if (e.apiVersion === "storage.k8s.io/v1" && e.kind === "VolumeAttachment") {
    let spec = o?.spec as { nodeName?: unknown; source?: { persistentVolumeName?: unknown } } | undefined;
    if (!spec) spec = (await getOptional(() => kube.get<VolumeAttachment>(volumeAttachments, e.name)))?.spec;
    const nodeName = str(spec?.nodeName);
    if (nodeName) nodeNames.add(nodeName);
    const pv = str(spec?.source?.persistentVolumeName);
    if (pv) volumes.push(pv);
  } else if (e.apiVersion === "v1" && e.kind === "PersistentVolumeClaim") {
    for (const n of await nodesUsingClaim(kube, e.namespace ?? "", e.name)) nodeNames.add(n);
  } else if (e.apiVersion === "v1" && e.kind === "PersistentVolume") {
    volumes.push(e.name);
    for (const n of await nodesForVolume(kube, e.name)) nodeNames.add(n);
  }
  return [...nodeNames].map((node) => ({ node, volumes }));
}

function attachDetachSpec(
  o: AttachDetachControllerOptions,
): ControllerSpec<NodeKey, NodeReconcileInput, AttachDetachStep, string, never, NodeReport> {
  const { kube } = o;
  const now = o.now ?? (() => new Date());
  const policy = o.policy ?? defaultDetachPolicy;
  const metrics = o.metrics ?? attachDetachMetrics();
  const volumeCounts = new NodeVolumeCounts(metrics);
  return {
    keyId: (key) => key.node,
    keysOf: (e) => nodesOf(kube, e),
    async load(key) {
      const input = await loadNode(kube, key.node, key.volumes, now(), policy);
      // attachdetach_controller_total_volumes from what this reconcile read.
      volumeCounts.record(input);
      return input;
    },
    absent: () => "in sync",
    decide(input) {
      const plan = reconcileNode(input);
      return {
        steps: plan.steps,
        followUps: plan.followUpVolumes,
        outcome: plan.summary.join("; ") || "in sync",
      };
    },
    executors: nodeExecutors({ kube, events: o.events, policy, metrics, log: o.log }),
    // A released lock may be what another node was waiting for.
    followUpKeys: async (pv, from) =>
      (await nodesForVolume(kube, pv)).filter((n) => n !== from.node).map((node) => ({ node, volumes: [] })),
    report: (r) => ({ node: r.id, outcome: r.outcome, writes: r.writes }),
    /** Every node that has or had anything to do with volumes. */
    async resyncKeys() {
      const [nodeList, attachments, pvs] = await Promise.all([
        kube.list<Node>(nodes),
        kube.list<VolumeAttachment>(volumeAttachments),
        kube.list<PersistentVolume>(persistentVolumes),
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
      const keys = [...names].map((node) => ({ node, volumes: lockedBy.get(node) ?? [] }));
      return { waves: [keys], counts: { nodes: names.size } };
    },
  };
}

export class AttachDetachController extends ControllerRuntime<
  NodeKey,
  NodeReconcileInput,
  AttachDetachStep,
  string,
  never,
  NodeReport
> {
  constructor(o: AttachDetachControllerOptions) {
    // Follow-ups go one generation deep: the nodes a released lock may let attach.
    super(attachDetachSpec(o), {
      maxAttempts: o.maxAttempts ?? 5,
      resyncConcurrency: o.resyncConcurrency ?? 4,
      workers: o.workers,
      followUpDepth: 1,
      maxFollowUps: Number.POSITIVE_INFINITY,
    });
  }
}
