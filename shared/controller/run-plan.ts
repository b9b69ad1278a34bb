// Carries out one plan: each step by the executor registered for its kind,
// in order, the first failure stopping the rest (every step is idempotent and
// the next sync re-decides from fresh state, so it finishes the job wherever
// this one stopped). Deferred work (Events) settles before the answer.
import type { Executors, Step, StepRun } from "./plan.ts";

export interface PlanRunResult<C> {
  writes: number;
  events: number;
  carried: C[];
}

export async function runPlan<P extends Step, K, C>(
  steps: readonly P[],
  executors: Executors<P, K, C>,
  key: K,
): Promise<PlanRunResult<C>> {
  const versions = new Map<string, string | undefined>();
  const deferred: Promise<unknown>[] = [];
  const carried: C[] = [];
  const run: StepRun<K, C> = {
    key,
    precondition: (id, decidedOn) => (versions.has(id) ? versions.get(id) : decidedOn),
    wrote: (id, resourceVersion) => {
      versions.set(id, resourceVersion);
    },
    defer: (work) => {
      deferred.push(work.catch(() => undefined));
    },
    carry: (value) => {
      carried.push(value);
    },
  };
  let writes = 0;
  let events = 0;
  try {
    for (const step of steps) {
      const execute = executors[step.op as P["op"]] as (
        s: P,
        r: StepRun<K, C>,
      ) => Promise<{ writes?: number; events?: number } | number>;
      const tally = await execute(step, run);
      if (typeof tally === "number") writes += tally;
      else {
        writes += tally.writes ?? 0;
        events += tally.events ?? 0;
      }
    }
  } finally {
    await Promise.all(deferred);
  }
  return { writes, events: events + deferred.length, carried };
}
