// Carries out the steps of a node's reconcile plan, one kind each. Every
// write is conditional on what the decision read, so a 409 re-decides.
import type { Executors } from "../../controller/index.ts";
import { isAlreadyExists, isNotFound } from "../../kube/api-errors.ts";
import type { EventSink } from "../../kube/event-recorder.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import { nodes, persistentVolumes, volumeAttachments } from "../../kube/resources.ts";
import type { Node } from "../../kube/types.ts";
import { annAttachLock } from "../../kube/well-known.ts";
import { annDetachFence, detachLog, forceDetachReason, reason } from "../constants.ts";
import type { DetachPolicy } from "../detach-policy.ts";
import { type AttachDetachStep, multiAttachMessage } from "../reconcile-node.ts";
import type { AttachDetachMetrics } from "./attach-detach-metrics.ts";
import { podsElsewhere } from "./node-lookups.ts";

/** Where detaches are logged, as kube-controller-manager logs them (a pino Logger fits). */
export interface DetachLogger {
  info(details: Record<string, unknown>, message: string): void;
}

export interface NodeExecutorDeps {
  kube: KubeJsonClient;
  events: EventSink;
  policy: DetachPolicy;
  metrics: AttachDetachMetrics;
  log: DetachLogger | undefined;
}

/** The key each step runs under: the node being reconciled. */
export interface NodeKey {
  node: string;
  /** PVs to look at even if nothing on the node names them (the event's, or locks the node holds). */
  volumes: readonly string[];
}

type StepOf<Op extends AttachDetachStep["op"]> = Extract<AttachDetachStep, { op: Op }>;

export function nodeExecutors(d: NodeExecutorDeps): Executors<AttachDetachStep, NodeKey> {
  const { kube, events } = d;

  function detachStarted(step: StepOf<"delete-attachment">): void {
    const details = {
      node: step.attachment.spec.nodeName,
      volumeName: step.attachment.spec.source.persistentVolumeName,
      volumeAttachment: step.attachment.metadata.name,
    };
    if (step.force === undefined) {
      d.log?.info(details, detachLog.started);
      return;
    }
    d.metrics.forcedDetaches.inc({ reason: step.force });
    if (step.force === forceDetachReason.timeout)
      d.log?.info(
        { ...details, duration: `${d.policy.maxWaitForUnmountMs / 1000}s` },
        detachLog.forcedTimeout,
      );
    else d.log?.info(details, detachLog.forcedOutOfService);
  }

  return {
    async "acquire-lock"(step, run) {
      // Conditional on what was read: if another reconcile took it first, this is a 409 and we re-decide.
      const v = step.volume;
      await kube.replace(persistentVolumes, {
        ...v,
        metadata: {
          ...v.metadata,
          annotations: { ...v.metadata.annotations, [annAttachLock]: run.key.node },
        },
      });
      return 1;
    },
    async "confirm-lock"(step) {
      // The PV unchanged, conditional on the resourceVersion read: a 409 means someone (a reconcile
      // of this node releasing the lock, another node taking it) moved first; then we re-decide.
      await kube.replace(persistentVolumes, step.volume);
      return 0;
    },
    async "release-lock"(step) {
      const v = step.volume;
      const annotations = { ...v.metadata.annotations };
      delete annotations[annAttachLock];
      await kube.replace(persistentVolumes, { ...v, metadata: { ...v.metadata, annotations } });
      return 1;
    },
    async "create-attachment"(step) {
      try {
        await kube.create(volumeAttachments, step.attachment);
      } catch (err) {
        if (!isAlreadyExists(err)) throw err;
        return 0;
      }
      return 1;
    },
    async "update-node-status"(step) {
      // A merge patch of the whole list, conditional on the resourceVersion read (a 409 re-decides);
      // an empty list is sent as null, as upstream's patch drops the field.
      const { name, resourceVersion } = step.node.metadata;
      const patch = {
        metadata: {
          resourceVersion,
          ...(step.fence !== undefined ? { annotations: { [annDetachFence]: step.fence } } : {}),
        },
        status: { volumesAttached: step.volumesAttached.length > 0 ? step.volumesAttached : null },
      };
      try {
        await kube.patch<Node>(nodes, name, undefined, patch, "merge", { subresource: "status" });
      } catch (err) {
        // A node deleted meanwhile has nothing to report.
        if (!isNotFound(err)) throw err;
        return 0;
      }
      return 1;
    },
    async "delete-attachment"(step) {
      try {
        // Conditional on the attachment as read: a reconcile that listed it on the node meanwhile wrote it first.
        await kube.delete(volumeAttachments, step.attachment.metadata.name, undefined, {
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
      detachStarted(step);
      return 1;
    },
    async "update-attachment"(step) {
      await kube.replace(volumeAttachments, step.attachment);
      return 1;
    },
    async event(step) {
      await events.event(step.pod, step.type, step.reason, step.message);
      return 0;
    },
    async "multi-attach"(step, run) {
      // The pods elsewhere are read only on this rare path; the message itself is the decision module's.
      const namespace = step.pods[0]?.metadata.namespace ?? "";
      const elsewhere = await podsElsewhere(kube, step.volume, run.key.node);
      const text = multiAttachMessage(step.volume.metadata.name, namespace, elsewhere);
      for (const pod of step.pods) await events.event(pod, "Warning", reason.failedAttachVolume, text);
      return 0;
    },
  };
}
