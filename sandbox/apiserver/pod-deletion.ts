// kube-apiserver's graceful deletion of pods: a DELETE of a pod that a node
// may still be running only marks it (deletionTimestamp, grace period); the
// kubelet tears it down and deletes it again with grace period 0.

import { isRecord } from "../../shared/is-record.ts";
import { rfc3339 } from "../../shared/kube/time.ts";
import type { KubeObject } from "./store.ts";

/** What a DELETE does to a pod. */
export type PodDeletion =
  | { kind: "now" }
  | { kind: "pending" }
  | { kind: "mark"; deletionTimestamp: string; gracePeriodSeconds: number };

/** Pods without a grace period of their own get kube's default. */
export const defaultTerminationGracePeriodSeconds = 30;

/**
 * The grace period a DELETE asks of a pod: the request's, else the pod's
 * terminationGracePeriodSeconds, else 30; 0 for a pod no node runs (never
 * scheduled, or already Succeeded/Failed). A negative request counts as 1 s.
 */
export function podGracePeriod(pod: KubeObject, requested: number | undefined): number {
  const spec = isRecord(pod.spec) ? pod.spec : {};
  const status = isRecord(pod.status) ? pod.status : {};
  const own = spec.terminationGracePeriodSeconds;
  let period =
    requested ??
    (typeof own === "number" && Number.isInteger(own) ? own : defaultTerminationGracePeriodSeconds);
  if (period < 0) period = 1;
  if (typeof spec.nodeName !== "string" || spec.nodeName === "") period = 0;
  if (status.phase === "Succeeded" || status.phase === "Failed") period = 0;
  return period;
}

/**
 * A second DELETE may only shorten a pending grace period; one whose period
 * is already 0 (or unset) removes the pod.
 */
export function planPodDeletion(pod: KubeObject, requested: number | undefined, nowMs: number): PodDeletion {
  const period = podGracePeriod(pod, requested);
  const meta = pod.metadata;
  if (meta.deletionTimestamp) {
    const current = meta.deletionGracePeriodSeconds;
    if (current === undefined || current === 0) return { kind: "now" };
    if (requested === undefined || period >= current) return { kind: "pending" };
    if (period === 0) return { kind: "now" };
    const startedMs = Date.parse(meta.deletionTimestamp) - current * 1000;
    return {
      kind: "mark",
      deletionTimestamp: rfc3339(new Date(startedMs + period * 1000)),
      gracePeriodSeconds: period,
    };
  }
  if (period === 0) return { kind: "now" };
  return {
    kind: "mark",
    deletionTimestamp: rfc3339(new Date(nowMs + period * 1000)),
    gracePeriodSeconds: period,
  };
}
