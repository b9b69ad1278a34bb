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

/** Which object a write goes to, so later writes in the plan see its new resourceVersion. */
function objectId(o: KubeObject): string {
  return o.metadata.namespace ? `pvc/${o.metadata.namespace}/${o.metadata.name}` : `pv/${o.metadata.name}`;
}

/** The object as planned, conditional on the resourceVersion this plan last saw for it. */
function conditional<T extends KubeObject>(planned: T, run: Run): T {
  const resourceVersion = run.precondition(objectId(planned), planned.metadata.resourceVersion);
  return { ...planned, metadata: { ...planned.metadata, resourceVersion } };
}

export function binderExecutors(kube: KubeJsonClient, events: EventSink): Executors<PlanStep, FollowUp> {
  /** One conditional PUT (of the status subresource when `status`); its answer's resourceVersion is what later writes build on. */
  async function replace(
    resource: ResourceDescriptor,
    planned: KubeObject,
    run: Run,
    status: boolean,
  ): Promise<number> {
    const options = status ? ({ subresource: "status" } as const) : undefined;
    const written = await kube.replace(resource, conditional(planned, run), options);
    run.wrote(objectId(written), written.metadata.resourceVersion);
    return 1;
  }
  return {
    "update-volume": (step, run) => replace(persistentVolumes, step.volume, run, false),
    "update-volume-status": (step, run) => replace(persistentVolumes, step.volume, run, true),
    "update-claim": (step, run) => replace(persistentVolumeClaims, step.claim, run, false),
    "update-claim-status": (step, run) => replace(persistentVolumeClaims, step.claim, run, true),
    async event(step, run) {
      // Events never block or fail the sync; they are awaited before answering.
      run.defer(events.event(step.object, step.type, step.reason, step.message));
      return 0;
    },
  };
}
