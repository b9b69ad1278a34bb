// The one contract between a controller's pure decision and the runtime that
// carries it out: typed steps in order, follow-ups, an outcome, and whether
// to decide again on the state the steps leave behind.

/** One thing to do: an object write (carrying the resourceVersion it was decided on), a create, a delete, an Event, a CSI call… */
export interface Step {
  readonly op: string;
}

export interface Plan<P extends Step, F> {
  /** Carried out in this order; the first that fails stops the plan (the next sync re-decides). */
  steps: readonly P[];
  /** What to sync next, once this key is done (a controller's `followUpKeys` turns them into keys). */
  followUps?: readonly F[];
  /** A short, stable description of the decision, for logs and answers. */
  outcome: string;
  /** Upstream would return an error here and retry later; reported, not thrown. */
  error?: string;
  /**
   * Load and decide again after these steps: how a multi-step protocol
   * (finalizer, then CSI call, then object, then release) runs as a sequence
   * of pure decisions, each looking only at what the previous step left.
   */
  again?: boolean;
}

/** What executing one plan (or one step) adds to the sync's report. */
export interface StepTally {
  writes?: number;
  events?: number;
}

/** The run of one plan, as its executors see it. */
export interface StepRun<K, C> {
  /** The key being synced (a node name, a claim…). */
  readonly key: K;
  /**
   * The resourceVersion to send for an object: the one a step of this plan
   * wrote last, else the one the decision read (`decidedOn`).
   */
  precondition(objectId: string, decidedOn: string | undefined): string | undefined;
  /** Records what a write returned, for the next step on the same object. */
  wrote(objectId: string, resourceVersion: string | undefined): void;
  /** Work that must neither block nor fail the plan (Events); the sync answers after it settles. Counts as one event. */
  defer(work: Promise<unknown>): void;
  /** A result the next round's load needs (a CSI call's answer that no object records yet). */
  carry(value: C): void;
}

/** Performs one kind of step; returns the writes it made (a number) or a tally. Never decides. */
export type Executor<P extends Step, K, C> = (step: P, run: StepRun<K, C>) => Promise<StepTally | number>;

/** One executor per step kind, checked by the compiler. */
export type Executors<P extends Step, K, C = never> = {
  [Op in P["op"]]: Executor<Extract<P, { op: Op }>, K, C>;
};
