// Carries out a binder plan: writes in order, each conditional on the
// resourceVersion last seen for that object (the one read, then the one each
// write returned), Events on the side. The first failed write stops the plan:
// every write is idempotent and the decision is re-derived from fresh state,
// so the next sync finishes the job wherever this one stopped.

import type { EventSink } from "../../kube/event-recorder.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import { persistentVolumeClaims, persistentVolumes } from "../../kube/resources.ts";
import type { KubeObject, PersistentVolume, PersistentVolumeClaim } from "../../kube/types.ts";
import type { SyncPlan, WriteStep } from "../plan.ts";

export type { EventSink } from "../../kube/event-recorder.ts";

export interface ExecutionResult {
  writes: number;
  events: number;
}

function objectKey(step: WriteStep): string {
  return step.op === "update-volume" || step.op === "update-volume-status"
    ? `pv/${step.volume.metadata.name}`
    : `pvc/${step.claim.metadata.namespace}/${step.claim.metadata.name}`;
}

function withResourceVersion<T extends KubeObject>(o: T, resourceVersion: string | undefined): T {
  return { ...o, metadata: { ...o.metadata, resourceVersion } };
}

export async function executePlan(
  kube: KubeJsonClient,
  events: EventSink,
  plan: SyncPlan,
): Promise<ExecutionResult> {
  const latest = new Map<string, string | undefined>();
  const pendingEvents: Promise<unknown>[] = [];
  let writes = 0;
  try {
    for (const step of plan.steps) {
      if (step.op === "event") {
        // Events never block or fail the sync; they are awaited before answering.
        pendingEvents.push(
          events.event(step.object, step.type, step.reason, step.message).catch(() => undefined),
        );
        continue;
      }
      const key = objectKey(step);
      const planned =
        step.op === "update-volume" || step.op === "update-volume-status" ? step.volume : step.claim;
      const rv = latest.has(key) ? latest.get(key) : planned.metadata.resourceVersion;
      const body = withResourceVersion(planned, rv);
      let written: KubeObject;
      switch (step.op) {
        case "update-volume":
          written = await kube.replace<PersistentVolume>(persistentVolumes, body as PersistentVolume);
          break;
        case "update-volume-status":
          written = await kube.replace<PersistentVolume>(persistentVolumes, body as PersistentVolume, {
            subresource: "status",
          });
          break;
        case "update-claim":
          written = await kube.replace<PersistentVolumeClaim>(
            persistentVolumeClaims,
            body as PersistentVolumeClaim,
          );
          break;
        case "update-claim-status":
          written = await kube.replace<PersistentVolumeClaim>(
            persistentVolumeClaims,
            body as PersistentVolumeClaim,
            {
              subresource: "status",
            },
          );
          break;
      }
      latest.set(key, written.metadata.resourceVersion);
      writes++;
    }
  } finally {
    await Promise.all(pendingEvents);
  }
  return { writes, events: pendingEvents.length };
}
