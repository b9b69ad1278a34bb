// Carries out a binder plan's steps: writes in order, each conditional on the
// resourceVersion last seen for that object (the one read, then the one each
// write returned), Events on the side. The first failed write stops the plan:
// every write is idempotent and the decision is re-derived from fresh state,
// so the next sync finishes the job wherever this one stopped.
import type { Executors, StepRun } from "../../controller/index.ts";
import type { EventSink } from "../../kube/event-recorder.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import { persistentVolumeClaims, persistentVolumes, type ResourceDescriptor } from "../../kube/resources.ts";
import type { KubeObject } from "../../kube/types.ts";
import type { FollowUp, PlanStep } from "../plan.ts";

export type { EventSink } from "../../kube/event-recorder.ts";

type Run = StepRun<FollowUp, never>;

/** One conditional replace of the object as planned, on the resourceVersion this plan last saw for it. */
async function write(
  kube: KubeJsonClient,
  resource: ResourceDescriptor,
  planned: KubeObject,
  run: Run,
  subresource?: "status",
): Promise<number> {
  const { name, namespace } = planned.metadata;
  const id = `${resource.plural}/${namespace ?? ""}/${name}`;
  const resourceVersion = run.precondition(id, planned.metadata.resourceVersion);
  const body = { ...planned, metadata: { ...planned.metadata, resourceVersion } };
  const written = await kube.replace(resource, body, subresource ? { subresource } : {});
  run.wrote(id, written.metadata.resourceVersion);
  return 1;
}

export function binderExecutors(kube: KubeJsonClient, events: EventSink): Executors<PlanStep, FollowUp> {
  return {
    "update-volume": (step, run) => write(kube, persistentVolumes, step.volume, run),
    "update-volume-status": (step, run) => write(kube, persistentVolumes, step.volume, run, "status"),
    "update-claim": (step, run) => write(kube, persistentVolumeClaims, step.claim, run),
    "update-claim-status": (step, run) => write(kube, persistentVolumeClaims, step.claim, run, "status"),
    async event(step, run) {
      // Events never block or fail the sync; they are awaited before answering.
      run.defer(events.event(step.object, step.type, step.reason, step.message));
      return 0;
    },
  };
}
