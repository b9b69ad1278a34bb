// What one binder sync decided: ordered writes and Events, objects to sync
// next, and an outcome for logs. Pure decisions build a plan; the executor
// (binder/execute-plan.ts) carries it out with conditional writes, in order,
// stopping at the first failure so the next sync finishes the job.
import type { KubeObject, PersistentVolume, PersistentVolumeClaim } from "../kube/types.ts";

export type WriteStep =
  | { op: "update-volume"; volume: PersistentVolume }
  | { op: "update-volume-status"; volume: PersistentVolume }
  | { op: "update-claim"; claim: PersistentVolumeClaim }
  | { op: "update-claim-status"; claim: PersistentVolumeClaim };

export interface EventStep {
  op: "event";
  object: KubeObject;
  type: "Normal" | "Warning";
  reason: string;
  message: string;
}

export type PlanStep = WriteStep | EventStep;

export type FollowUp =
  /** `candidate`: a volume already pointing at this claim, which may spare the claim sync a list of every volume. */
  { kind: "claim"; namespace: string; name: string; candidate?: string } | { kind: "volume"; name: string };

export interface SyncPlan {
  steps: PlanStep[];
  followUps: FollowUp[];
  /** Upstream returns an error here (and retries later); nothing after it was planned. */
  error?: string;
  /** A short, stable description of the decision, for logs and answers. */
  outcome: string;
}

/** Collects a plan. Decisions call it in the order upstream performs the actions. */
export class Planner {
  readonly steps: PlanStep[] = [];
  readonly followUps: FollowUp[] = [];
  readonly now: string;
  error: string | undefined;
  outcome = "nothing to do";

  constructor(now: string) {
    this.now = now;
  }

  event(object: KubeObject, type: "Normal" | "Warning", reason: string, message: string): void {
    this.steps.push({ op: "event", object, type, reason, message });
  }

  write(step: WriteStep): void {
    this.steps.push(step);
  }

  followUp(f: FollowUp): void {
    this.followUps.push(f);
  }

  fail(error: string): void {
    this.error = error;
    this.outcome = "error";
  }

  decided(outcome: string): void {
    this.outcome = outcome;
  }

  plan(): SyncPlan {
    return {
      steps: this.steps,
      followUps: this.followUps,
      outcome: this.outcome,
      ...(this.error !== undefined ? { error: this.error } : {}),
    };
  }
}
