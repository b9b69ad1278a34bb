// When a volume no pod on a node wants any more may be detached, by
// kube-controller-manager's rules: a node still using it keeps it, unless the
// node is out of service (non-graceful shutdown: at once) or, unless switched
// off, the node is not Ready and has been waited for maxWaitForUnmountDuration.
import type { Node } from "../kube/types.ts";
import {
  type ForceDetachReason,
  forceDetachReason,
  maxWaitForUnmountMs,
  outOfServiceTaint,
} from "./constants.ts";

export interface DetachPolicy {
  /** maxWaitForUnmountDuration: how long an unhealthy node may keep a volume it still reports in use. */
  maxWaitForUnmountMs: number;
  /** kube-controller-manager's --disable-force-detach-on-timeout: only the out-of-service taint forces. */
  disableForceDetachOnTimeout: boolean;
}

export const defaultDetachPolicy: DetachPolicy = Object.freeze({
  maxWaitForUnmountMs,
  disableForceDetachOnTimeout: false,
});

export function hasOutOfServiceTaint(node: Node | undefined): boolean {
  return (node?.spec?.taints ?? []).some((t) => t?.key === outOfServiceTaint);
}

/** Upstream's health test: the Ready condition is True (a missing node is not healthy). */
export function isNodeReady(node: Node | undefined): boolean {
  return node?.status?.conditions?.find((c) => c?.type === "Ready")?.status === "True";
}

export type DetachDecision =
  | {
      action: "wait";
      /** The wait has no valid start yet: note it now, so the timeout can run. */
      startTimer: boolean;
      /** The timeout ran out but force detach on timeout is switched off. */
      timeoutIgnored: boolean;
    }
  /** `force`: the detach skips the in-use check, and upstream counts it under this reason. */
  | { action: "detach"; force?: ForceDetachReason };

export interface DetachQuestion {
  node: Node | undefined;
  /** The node reports the volume in status.volumesInUse. */
  mounted: boolean;
  /** When detaching was first wanted while the volume was in use (ISO time), if noted. */
  requestedAt: string | undefined;
  now: Date;
  policy: DetachPolicy;
}

export function decideDetach(q: DetachQuestion): DetachDecision {
  const since = q.requestedAt === undefined ? Number.NaN : Date.parse(q.requestedAt);
  const expired = Number.isFinite(since) && q.now.getTime() - since > q.policy.maxWaitForUnmountMs;
  const forceTimeout = expired && !q.policy.disableForceDetachOnTimeout;
  const outOfService = hasOutOfServiceTaint(q.node);
  if (q.mounted && !(forceTimeout && !isNodeReady(q.node)) && !outOfService) {
    return {
      action: "wait",
      startTimer: !Number.isFinite(since),
      timeoutIgnored: expired && q.policy.disableForceDetachOnTimeout,
    };
  }
  if (forceTimeout) return { action: "detach", force: forceDetachReason.timeout };
  if (outOfService) return { action: "detach", force: forceDetachReason.outOfService };
  return { action: "detach" };
}
