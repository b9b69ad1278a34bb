// Reading and building the parts of a claim the resizer owns: its resize and
// modify conditions (upstream MergeResizeConditionsOfPVC / MergePVCConditions)
// and the retry backoff kept in annotations. Pure.
import { compareQuantities, isValidQuantity } from "../kube/quantity.ts";
import { type RetryInterval, retryDelaySeconds } from "../kube/retry-interval.ts";
import { rfc3339 } from "../kube/time.ts";
import type { PersistentVolumeClaim, PersistentVolumeClaimCondition } from "../kube/types.ts";
import {
  annExpandFailures,
  annExpandInUse,
  annExpandRetryAfter,
  annExpandTarget,
  annModifyFailures,
  annModifyRetryAfter,
  annModifyTarget,
  code as grpc,
  resizeConditions,
} from "./constants.ts";

export type Condition = PersistentVolumeClaimCondition;

export function conditionsOf(claim: PersistentVolumeClaim): Condition[] {
  return (claim.status?.conditions ?? []) as unknown as Condition[];
}

export function findCondition(claim: PersistentVolumeClaim, type: string): Condition | undefined {
  return conditionsOf(claim).find((c) => c.type === type);
}

/**
 * Upstream MergeResizeConditionsOfPVC: other conditions stay, a new one
 * replaces its type in place, the remaining new ones go last; the old resize
 * conditions not replaced stay only when `keepOld`.
 */
export function mergeResizeConditions(
  old: readonly Condition[],
  added: readonly Condition[],
  keepOld: boolean,
) {
  const pending = new Map(added.map((c) => [c.type, c]));
  const out: Condition[] = [];
  for (const c of old) {
    if (!resizeConditions.has(c.type)) out.push(c);
    else if (pending.has(c.type)) {
      out.push(pending.get(c.type) as Condition);
      pending.delete(c.type);
    } else if (keepOld) out.push(c);
  }
  return [...out, ...pending.values()];
}

/** Upstream MergePVCConditions: each new condition replaces its type, the others stay. */
export function mergeConditions(old: readonly Condition[], added: readonly Condition[]): Condition[] {
  const types = new Set(added.map((c) => c.type));
  const kept = old.filter((c) => !types.has(c.type));
  const replaced = old.flatMap((c) => (types.has(c.type) ? added.filter((a) => a.type === c.type) : []));
  const fresh = added.filter((a) => !old.some((c) => c.type === a.type));
  return [...kept, ...replaced, ...fresh];
}

/** Upstream IsFinalError: the driver certainly no longer works on the call. */
export function isFinalCode(code: number | undefined): boolean {
  switch (code) {
    case undefined:
    case grpc.canceled:
    case grpc.deadlineExceeded:
    case grpc.unavailable:
    case grpc.resourceExhausted:
    case grpc.aborted:
      return false;
    default:
      return true;
  }
}

/** Upstream IsInfeasibleError (expansion): no retry will succeed with this size. */
export function isInfeasibleCode(code: number | undefined): boolean {
  return code === grpc.invalidArgument || code === grpc.outOfRange || code === grpc.notFound;
}

/** a vs b as quantities; undefined when either is not a valid quantity (untrusted objects). */
export function compareSizes(a: string | undefined, b: string | undefined): -1 | 0 | 1 | undefined {
  if (a === undefined || b === undefined || !isValidQuantity(a) || !isValidQuantity(b)) return undefined;
  return compareQuantities(a, b);
}

export type Operation = "expand" | "modify";

const keys = {
  expand: { failures: annExpandFailures, retryAfter: annExpandRetryAfter, target: annExpandTarget },
  modify: { failures: annModifyFailures, retryAfter: annModifyRetryAfter, target: annModifyTarget },
} as const;

export interface Backoff {
  failures: number;
  /** The earliest next try of `target`, when still in the future. */
  until: string | undefined;
  target: string | undefined;
}

export function backoffOf(claim: PersistentVolumeClaim, op: Operation, now: Date): Backoff {
  const a = claim.metadata.annotations ?? {};
  const n = Number(a[keys[op].failures] ?? "0");
  const until = a[keys[op].retryAfter];
  const at = until === undefined ? Number.NaN : Date.parse(until);
  return {
    failures: Number.isSafeInteger(n) && n > 0 ? n : 0,
    until: Number.isFinite(at) && at > now.getTime() ? until : undefined,
    target: a[keys[op].target],
  };
}

/** The annotations recording one more failure of `target`; `slow` waits the longest interval (infeasible). */
export function failureAnnotations(
  claim: PersistentVolumeClaim,
  op: Operation,
  target: string,
  now: Date,
  interval: RetryInterval,
  options: { slow?: boolean; inUse?: boolean } = {},
): { annotations: Record<string, string | null>; delaySeconds: number } {
  const previous = backoffOf(claim, op, now);
  // A new target starts the backoff over, as upstream's queue forgets a key on a spec change.
  const failures = (previous.target === target ? previous.failures : 0) + 1;
  const delaySeconds = options.slow ? interval.maxSeconds : retryDelaySeconds(failures, interval);
  // Rounded up to the whole second the annotation holds, so the wait is never shorter.
  const retryAfter = rfc3339(new Date(Math.ceil((now.getTime() + delaySeconds * 1000) / 1000) * 1000));
  const annotations: Record<string, string | null> = {
    [keys[op].failures]: String(failures),
    [keys[op].retryAfter]: retryAfter,
    [keys[op].target]: target,
  };
  if (op === "expand") annotations[annExpandInUse] = options.inUse ? "true" : null;
  return { annotations, delaySeconds };
}

/** Removal of this operation's backoff annotations that the claim has (empty when none). */
export function clearedBackoff(claim: PersistentVolumeClaim, op: Operation): Record<string, string | null> {
  const a = claim.metadata.annotations ?? {};
  const names: string[] = [keys[op].failures, keys[op].retryAfter, keys[op].target];
  if (op === "expand") names.push(annExpandInUse);
  return Object.fromEntries(names.filter((k) => a[k] !== undefined).map((k) => [k, null]));
}

/** Whether the driver said FailedPrecondition last time (upstream's in-use mark of offline drivers). */
export function markedInUse(claim: PersistentVolumeClaim): boolean {
  return claim.metadata.annotations?.[annExpandInUse] === "true";
}
