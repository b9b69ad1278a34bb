// Carries out a binder plan's steps: writes in order, each conditional on the
// resourceVersion last seen for that object (the one read, then the one each
// write returned), Events on the side. The first failed write stops the plan:
// every write is idempotent and the decision is re-derived from fresh state,
// so the next sync finishes the job wherever this one stopped.
import type { Executors, StepRun } from "../../controller/index.ts";
import type { EventSink } from "../../kube/event-recorder.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import { persistentVolumeClaims, persistentVolumes } from "../../kube/resources.ts";
import type { KubeObject, PersistentVolume, PersistentVolumeClaim } from "../../kube/types.ts";
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

function recorded(run: Run, written: KubeObject): number {
  run.wrote(objectId(written), written.metadata.resourceVersion);
  return 1;
}

/** Where the process's own writes are told, so its watched copies know them before their echoes arrive. */
export interface WrittenSinks {
  volume?(written: PersistentVolume): void;
  claim?(written: PersistentVolumeClaim): void;
}

export function binderExecutors(
  kube: KubeJsonClient,
  events: EventSink,
  written: WrittenSinks = {},
): Executors<PlanStep, FollowUp> {
  const volume = (run: Run, v: PersistentVolume): number => {
    written.volume?.(v);
    return recorded(run, v);
  };
  const claim = (run: Run, c: PersistentVolumeClaim): number => {
    written.claim?.(c);
    return recorded(run, c);
  };
  return {
    "update-volume": async (step, run) =>
      volume(run, await kube.replace(persistentVolumes, conditional(step.volume, run))),
    "update-volume-status": async (step, run) =>
      volume(
        run,
        await kube.replace(persistentVolumes, conditional(step.volume, run), { subresource: "status" }),
      ),
    "update-claim": async (step, run) =>
      claim(run, await kube.replace(persistentVolumeClaims, conditional(step.claim, run))),
    "update-claim-status": async (step, run) =>
      claim(
        run,
        await kube.replace(persistentVolumeClaims, conditional(step.claim, run), { subresource: "status" }),
      ),
    async event(step, run) {
      // Events never block or fail the sync; they are awaited before answering.
      run.defer(events.event(step.object, step.type, step.reason, step.message));
      return 0;
    },
  };
}
