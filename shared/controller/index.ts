// shared/controller: the one runtime shell of every controller function.
//
//   POST / event ──keysOf(e)──► keys ──(one at a time per keyId)──► load(key, ctx)
//     ──► decide(state, key) : Plan (pure) ──► executors[step.op](step, run), in order
//     ──► plan.again ? load + decide again : done ──► follow-ups ──► report(result, key)
//   POST /resync ──resyncKeys()──► waves of keys, each wave through a bounded pool
//
// A controller writes a ControllerSpec<K, S, P, F, C, R> and wraps it in
// `new ControllerRuntime(spec, options)`, which is the `Controller` that
// shared/http/controller-function.ts serves:
//   K  a key (what is synced: a node name, {kind:"claim",namespace,name}); it
//      may carry hints (an event's copy, a candidate) that `load` uses on
//      attempt 1 only; `keyId(key)` is its identity.
//   S  the state one decision needs; `load(key, {attempt, round, carried,
//      previous})` reads it (all I/O lives here and in executors), undefined
//      = gone, reported as `absent(key)`; a later round may build on
//      `previous` (the state the last round decided on) instead of reading.
//   P  the step union, `{op: "..."}` each; `decide(state, key)` returns a
//      Plan {steps, followUps?, outcome, error?, again?} and does no I/O.
//   Executors: one async function per `op` (the compiler checks the set),
//      returning the writes made (or {writes, events}); `run.precondition(id,
//      rv)` / `run.wrote(id, rv)` chain resourceVersions across a plan's
//      writes to one object, `run.defer(p)` sends an Event without blocking,
//      `run.carry(c)` hands a result (a CSI answer) to the next round's load.
//   F  follow-ups a plan names; `followUpKeys(f, from)` resolves them (may
//      read; default: F is K); `repeatable(key)` allows a second sync; they
//      run after the key's own sync, bounded by maxFollowUps (default 16)
//      and followUpDepth.
//   R  the report shape each POST answers; `report(result, key)` builds it.
//   `keysOf` may also answer without syncing ({reports}); `resyncKeys()`
//   gives waves of keys (run one after another through a pool of
//   resyncConcurrency) and the counts the resync answer starts with.
// RuntimeOptions.workers (WORKERS, upstream --worker-threads / --workers)
// caps the keys synced at once, events and resync together (SyncSlots); a
// sync an executor starts for another key runs in its caller's slot.
// Subclass ControllerRuntime to keep a controller's own public methods
// (`syncClaim(ns, name)` = `this.sync(key)`); see shared/protection/runtime.
// Errors: a 409, or a 404 from a write, means the race was lost: the whole
// load → decide → execute runs again (RuntimeOptions.maxAttempts, default 5),
// then ConflictRetriesExhaustedError (answered 409 / retry later). Any other
// error stops the plan at that step and propagates. `plan.error` is reported,
// not thrown. Multi-step protocols (the provisioner's intent finalizer →
// CreateVolume → PV → release, the attacher's finalizer → ControllerPublish →
// status) return one step per plan with `again: true`: each round decides on
// what the previous step left, so a process killed between two steps is
// repaired by the next event (maxRounds bounds a chain, default 16).
export type { Executor, Executors, Plan, Step, StepRun, StepTally } from "./plan.ts";
export { runPlan } from "./run-plan.ts";
export {
  type Answered,
  ControllerRuntime,
  type ControllerSpec,
  type LoadContext,
  type ResyncKeys,
  type ResyncReport,
  type RuntimeOptions,
  type SpecOf,
  type SyncResult,
} from "./runtime.ts";
export { forEachBounded, SyncSlots } from "./worker-pool.ts";
