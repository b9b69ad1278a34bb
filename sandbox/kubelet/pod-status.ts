// The pod status a kubelet writes: Pending with every container waiting in
// ContainerCreating while volumes are mounted, then Running and Ready. Pure:
// the pod and the node's addresses in, the status out.
import type { Pod } from "../../shared/kube/types.ts";

export interface PodPlace {
  hostIP: string;
  podIP: string;
  /** RFC 3339, second precision. */
  now: string;
}

interface Condition {
  type: string;
  status: string;
  lastProbeTime: null;
  lastTransitionTime: string;
  reason?: string;
  message?: string;
}

interface Container {
  name: string;
  image?: string;
}

function containersOf(pod: Pod): Container[] {
  const containers = (pod.spec as { containers?: unknown }).containers;
  return Array.isArray(containers)
    ? (containers as Container[]).filter((c) => typeof c?.name === "string")
    : [];
}

function previousConditions(pod: Pod): Condition[] {
  const c = pod.status?.conditions;
  return Array.isArray(c) ? (c as Condition[]) : [];
}

/** A condition keeps its transition time while its status stays the same. */
function condition(
  pod: Pod,
  type: string,
  status: string,
  now: string,
  reason?: string,
  message?: string,
): Condition {
  const before = previousConditions(pod).find((c) => c.type === type);
  const since = before?.status === status && before.lastTransitionTime ? before.lastTransitionTime : now;
  return {
    type,
    status,
    lastProbeTime: null,
    lastTransitionTime: since,
    ...(reason ? { reason } : {}),
    ...(message ? { message } : {}),
  };
}

/** The conditions of a pod whose containers wait for their volumes (running false), or run. */
function podConditions(pod: Pod, now: string, running: boolean): Condition[] {
  const status = running ? "True" : "False";
  const reason = running ? undefined : "ContainersNotReady";
  const message = running
    ? undefined
    : `containers with unready status: [${containersOf(pod)
        .map((c) => c.name)
        .join(" ")}]`;
  return [
    condition(pod, "PodReadyToStartContainers", status, now),
    condition(pod, "Initialized", "True", now),
    condition(pod, "Ready", status, now, reason, message),
    condition(pod, "ContainersReady", status, now, reason, message),
    condition(pod, "PodScheduled", "True", now),
  ];
}

/** Pending with every container waiting in ContainerCreating (running false), or Running and Ready. */
export function podStatus(pod: Pod, place: PodPlace, running: boolean): Record<string, unknown> {
  const uid = (pod.metadata.uid ?? "").replaceAll("-", "");
  return {
    ...pod.status,
    phase: running ? "Running" : "Pending",
    conditions: podConditions(pod, place.now, running),
    hostIP: place.hostIP,
    hostIPs: [{ ip: place.hostIP }],
    startTime: typeof pod.status?.startTime === "string" ? pod.status.startTime : place.now,
    qosClass: typeof pod.status?.qosClass === "string" ? pod.status.qosClass : "BestEffort",
    ...(running ? { podIP: place.podIP, podIPs: [{ ip: place.podIP }] } : {}),
    containerStatuses: containersOf(pod).map((c, i) => ({
      name: c.name,
      image: c.image ?? "",
      imageID: "",
      ...(running ? { containerID: `containerd://${uid}${i}` } : {}),
      ready: running,
      restartCount: 0,
      started: running,
      state: running ? { running: { startedAt: place.now } } : { waiting: { reason: "ContainerCreating" } },
      lastState: {},
    })),
  };
}

/** The phase and readiness a status shows, to tell whether a write would change anything. */
export function statusShape(status: unknown): string {
  const s = (status ?? {}) as { phase?: string; conditions?: Condition[]; containerStatuses?: unknown[] };
  const ready = s.conditions?.find((c) => c.type === "Ready")?.status ?? "";
  const scheduled = s.conditions?.find((c) => c.type === "PodScheduled")?.status ?? "";
  return `${s.phase ?? ""}/${ready}/${scheduled}/${s.containerStatuses?.length ?? 0}`;
}
