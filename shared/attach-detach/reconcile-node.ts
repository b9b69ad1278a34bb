// The attach/detach controller's reconcile for one node, as a pure decision:
// desired attachments (CSI volumes of non-terminated pods scheduled there,
// through bound claims, for drivers that attach) against actual
// VolumeAttachments. The node's status.volumesAttached is brought in step
// first (so a volume leaves it before its detach starts), then detach, then
// attach; single-node volumes never attach to a second node.

import { isMultiAttachAllowed } from "../kube/multi-attach.ts";
import { podClaimNames } from "../kube/pod-claims.ts";
import { isPodTerminated } from "../kube/pod-terminated.ts";
import type {
  CSIDriver,
  Node,
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
  VolumeAttachment,
} from "../kube/types.ts";
import { annAttachLock, annControllerManagedAttachDetach } from "../kube/well-known.ts";
import {
  annAttachErrorReported,
  annAttachReported,
  annDetachRequestedAt,
  annListedAt,
  type ForceDetachReason,
  message,
  reason,
} from "./constants.ts";
import { type DetachPolicy, decideDetach, defaultDetachPolicy } from "./detach-policy.ts";
import { uniqueVolumeName, volumeAttachmentName } from "./volume-attachment-name.ts";
import { type AttachedVolume, expectedVolumesAttached, sameVolumesAttached } from "./volumes-attached.ts";

export interface NodeReconcileInput {
  nodeName: string;
  /** undefined when the Node object is gone. */
  node: Node | undefined;
  /** Pods whose spec.nodeName is this node. */
  pods: readonly Pod[];
  claims: readonly PersistentVolumeClaim[];
  /** PVs the pods' claims name, PVs this node's VolumeAttachments name, and any PV the event named. */
  volumes: readonly PersistentVolume[];
  drivers: readonly CSIDriver[];
  /** Every VolumeAttachment (other nodes' too: single-node volumes must be checked cluster-wide). */
  attachments: readonly VolumeAttachment[];
  now: Date;
  /** maxWaitForUnmountDuration and --disable-force-detach-on-timeout; upstream's defaults when absent. */
  policy?: DetachPolicy;
}

export type AttachDetachStep =
  | { op: "acquire-lock"; volume: PersistentVolume }
  /** The lock is already this node's: a conditional write of the PV as read fences the create (409 if it moved). */
  | { op: "confirm-lock"; volume: PersistentVolume }
  | { op: "release-lock"; volume: PersistentVolume }
  | { op: "create-attachment"; attachment: VolumeAttachment }
  /** `force`: detached without waiting for unmount (timeout or out-of-service), as upstream counts it. */
  | { op: "delete-attachment"; attachment: VolumeAttachment; force?: ForceDetachReason }
  /**
   * The whole status.volumesAttached, a conditional write on the node as read; `fence` (an
   * annotation value) makes a write that changes no entry still change the node.
   */
  | { op: "update-node-status"; node: Node; volumesAttached: AttachedVolume[]; fence?: string }
  | { op: "update-attachment"; attachment: VolumeAttachment }
  | { op: "event"; pod: Pod; type: "Normal" | "Warning"; reason: string; message: string }
  /** Multi-Attach error: the message names pods elsewhere, which the runtime reads only on this rare path. */
  | { op: "multi-attach"; volume: PersistentVolume; pods: Pod[] };

export interface NodePlan {
  steps: AttachDetachStep[];
  /** Nodes to reconcile next: a released lock may let a waiting node attach. */
  followUpVolumes: string[];
  summary: string[];
}

interface DesiredVolume {
  volume: PersistentVolume;
  driver: string;
  handle: string;
  pods: Pod[];
}

/** Desired attachments on the node, keyed by PV name. */
export function desiredVolumes(input: NodeReconcileInput): Map<string, DesiredVolume> {
  const claims = new Map(input.claims.map((c) => [`${c.metadata.namespace}/${c.metadata.name}`, c]));
  const volumes = new Map(input.volumes.map((v) => [v.metadata.name, v]));
  const drivers = new Map(input.drivers.map((d) => [d.metadata.name, d]));
  const desired = new Map<string, DesiredVolume>();
  for (const pod of input.pods) {
    if (pod.spec.nodeName !== input.nodeName || isPodTerminated(pod)) continue;
    for (const claimName of podClaimNames(pod)) {
      const claim = claims.get(`${pod.metadata.namespace}/${claimName}`);
      const pvName = claim?.spec.volumeName;
      if (!claim || !pvName) continue; // not bound yet: nothing to attach
      const pv = volumes.get(pvName);
      // Only a PV bound back to this claim is attached (upstream refuses half-bound pairs).
      if (!pv?.spec.csi || pv.spec.claimRef?.uid !== claim.metadata.uid) continue;
      const driver = pv.spec.csi.driver;
      // No CSIDriver object means attach is required (upstream's default).
      if (drivers.get(driver)?.spec.attachRequired === false) continue;
      const entry = desired.get(pvName);
      if (entry) entry.pods.push(pod);
      else desired.set(pvName, { volume: pv, driver, handle: pv.spec.csi.volumeHandle, pods: [pod] });
    }
  }
  return desired;
}

function annotate(va: VolumeAttachment, key: string, value: string | undefined): VolumeAttachment {
  const annotations = { ...va.metadata.annotations };
  if (value === undefined) delete annotations[key];
  else annotations[key] = value;
  return { ...va, metadata: { ...va.metadata, annotations } };
}

export function reconcileNode(input: NodeReconcileInput): NodePlan {
  // Observed: the node's kubelet attaches its volumes itself; upstream's controller leaves it alone.
  if (input.node && input.node.metadata.annotations?.[annControllerManagedAttachDetach] === undefined)
    return { steps: [], followUpVolumes: [], summary: [message.notControllerManaged] };
  const steps: AttachDetachStep[] = [];
  const summary: string[] = [];
  const followUpVolumes: string[] = [];
  const { nodeName } = input;
  const desired = desiredVolumes(input);
  const volumes = new Map(input.volumes.map((v) => [v.metadata.name, v]));
  const here = input.attachments.filter(
    (va) => va.spec.nodeName === nodeName && va.spec.source.persistentVolumeName,
  );
  const inUse = new Set(input.node?.status?.volumesInUse ?? []);
  const policy = input.policy ?? defaultDetachPolicy;

  // Attachments on this node that no pod wants any more: detach, or wait while the node uses them.
  const detaches: AttachDetachStep[] = [];
  const detaching = new Set<string>();
  for (const va of here) {
    const pvName = va.spec.source.persistentVolumeName!;
    if (desired.has(pvName) || va.metadata.deletionTimestamp) continue;
    const pv = volumes.get(pvName);
    const handle = pv?.spec.csi?.volumeHandle;
    const mounted = handle !== undefined && inUse.has(uniqueVolumeName(va.spec.attacher, handle));
    const requestedAt = va.metadata.annotations?.[annDetachRequestedAt];
    const decision = decideDetach({ node: input.node, mounted, requestedAt, now: input.now, policy });
    if (decision.action === "wait") {
      if (decision.startTimer)
        steps.push({
          op: "update-attachment",
          attachment: annotate(va, annDetachRequestedAt, input.now.toISOString()),
        });
      summary.push(
        decision.timeoutIgnored
          ? `detach of ${pvName} waits: the node still uses it (force detach on timeout is disabled)`
          : `detach of ${pvName} waits: the node still uses it`,
      );
      continue;
    }
    summary.push(decision.force ? `force detaching ${pvName} (${decision.force})` : `detaching ${pvName}`);
    detaches.push({
      op: "delete-attachment",
      attachment: va,
      ...(decision.force ? { force: decision.force } : {}),
    });
    detaching.add(va.metadata.name);
  }

  // The node stops listing a volume before its detach starts: a failed write stops the detach too.
  let nodeStatus: Extract<AttachDetachStep, { op: "update-node-status" }> | undefined;
  /** Attachments whose volume the node is about to list, by name. */
  const listing = new Map<string, VolumeAttachment>();
  if (input.node) {
    const volumesAttached = expectedVolumesAttached({
      node: input.node,
      attachments: input.attachments,
      volumes: input.volumes,
      drivers: input.drivers,
      detaching,
    });
    if (!sameVolumesAttached(input.node.status?.volumesAttached, volumesAttached)) {
      nodeStatus = { op: "update-node-status", node: input.node, volumesAttached };
      summary.unshift(`node lists ${volumesAttached.length} attached volume(s)`);
    } else if (detaches.length > 0) {
      const first = detaches[0] as Extract<AttachDetachStep, { op: "delete-attachment" }>;
      const fence = `${first.attachment.metadata.name}@${input.node.metadata.resourceVersion ?? ""}`;
      nodeStatus = { op: "update-node-status", node: input.node, volumesAttached, fence };
    }
    const listed = new Set((input.node.status?.volumesAttached ?? []).map((e) => e?.name));
    const added = new Set(volumesAttached.map((e) => e.name).filter((n) => !listed.has(n)));
    for (const va of here) {
      const handle = volumes.get(va.spec.source.persistentVolumeName!)?.spec.csi?.volumeHandle;
      if (handle !== undefined && added.has(uniqueVolumeName(va.spec.attacher, handle)))
        listing.set(va.metadata.name, va);
    }
  }
  const early = steps.splice(0, steps.length);

  // Locks this node holds on volumes it neither wants nor has an attachment for are released.
  for (const pv of input.volumes) {
    if (pv.metadata.annotations?.[annAttachLock] !== nodeName || desired.has(pv.metadata.name)) continue;
    if (here.some((va) => va.spec.source.persistentVolumeName === pv.metadata.name)) continue;
    steps.push({ op: "release-lock", volume: pv });
    followUpVolumes.push(pv.metadata.name);
    summary.push(`released ${pv.metadata.name}`);
  }

  // Then attach what is wanted and missing.
  for (const [pvName, want] of desired) {
    const name = volumeAttachmentName(want.handle, want.driver, nodeName);
    const existing = here.find((va) => va.metadata.name === name);
    if (existing) {
      if (existing.metadata.deletionTimestamp) {
        summary.push(`${pvName} is still detaching from this node; attach follows`);
        continue;
      }
      reportAttachState(existing, want, steps, summary);
      continue;
    }
    if (!isMultiAttachAllowed(want.volume)) {
      const lock = want.volume.metadata.annotations?.[annAttachLock];
      const elsewhere = input.attachments.some(
        (va) => va.spec.source.persistentVolumeName === pvName && va.spec.nodeName !== nodeName,
      );
      if (elsewhere || (lock !== undefined && lock !== nodeName)) {
        // Observed: a single-node volume is (or may still be) attached elsewhere.
        steps.push({ op: "multi-attach", volume: want.volume, pods: want.pods });
        summary.push(`multi-attach refused for ${pvName}`);
        continue;
      }
      steps.push({ op: lock === undefined ? "acquire-lock" : "confirm-lock", volume: want.volume });
    }
    steps.push({
      op: "create-attachment",
      attachment: {
        apiVersion: "storage.k8s.io/v1",
        kind: "VolumeAttachment",
        metadata: { name },
        spec: { attacher: want.driver, nodeName, source: { persistentVolumeName: pvName } },
      },
    });
    summary.push(`attaching ${pvName}`);
  }
  return {
    steps: ordered(early, nodeStatus, detaches, steps, listing),
    followUpVolumes,
    summary,
  };
}

/**
 * Two objects, no transaction: the node's list and the attachments. A volume newly listed has
 * its attachment written first (annListedAt, conditional), then the node; a detach writes the
 * node first (the entry removed, or a fence), then deletes the attachment conditionally on the
 * resourceVersion read. Whichever reconcile loses a race then fails a write and decides again,
 * so a node never lists a volume whose attachment is being deleted.
 */
function ordered(
  early: AttachDetachStep[],
  nodeStatus: Extract<AttachDetachStep, { op: "update-node-status" }> | undefined,
  detaches: AttachDetachStep[],
  late: AttachDetachStep[],
  listing: ReadonlyMap<string, VolumeAttachment>,
): AttachDetachStep[] {
  if (!nodeStatus) return [...early, ...detaches, ...late];
  const stamp = nodeStatus.node.metadata.resourceVersion ?? "";
  const touches: AttachDetachStep[] = [];
  const pending = new Map(listing);
  const unmoved = (list: AttachDetachStep[]): AttachDetachStep[] =>
    list.filter((step) => {
      if (step.op !== "update-attachment" || !pending.has(step.attachment.metadata.name)) return true;
      pending.delete(step.attachment.metadata.name);
      touches.push({ ...step, attachment: annotate(step.attachment, annListedAt, stamp) });
      return false;
    });
  const before = unmoved(early);
  const after = unmoved(late);
  for (const va of pending.values())
    touches.push({ op: "update-attachment", attachment: annotate(va, annListedAt, stamp) });
  return [...touches, nodeStatus, ...before, ...detaches, ...after];
}

/** Success is announced once per attachment; an attach error once per error time. */
function reportAttachState(
  va: VolumeAttachment,
  want: DesiredVolume,
  steps: AttachDetachStep[],
  summary: string[],
): void {
  const pvName = want.volume.metadata.name;
  let next = va;
  if (va.metadata.annotations?.[annDetachRequestedAt]) next = annotate(next, annDetachRequestedAt, undefined);
  if (va.status?.attached) {
    if (!va.metadata.annotations?.[annAttachReported]) {
      next = annotate(next, annAttachReported, "true");
      for (const pod of want.pods) {
        steps.push({
          op: "event",
          pod,
          type: "Normal",
          reason: reason.successfulAttachVolume,
          message: message.attached(pvName),
        });
      }
      summary.push(`${pvName} attached`);
    }
  } else if (
    va.status?.attachError?.time &&
    va.metadata.annotations?.[annAttachErrorReported] !== va.status.attachError.time
  ) {
    next = annotate(next, annAttachErrorReported, va.status.attachError.time);
    for (const pod of want.pods) {
      steps.push({
        op: "event",
        pod,
        type: "Warning",
        reason: reason.failedAttachVolume,
        message: message.attachFailed(pvName, va.status.attachError.message ?? ""),
      });
    }
    summary.push(`${pvName} failed to attach`);
  }
  if (next !== va) steps.push({ op: "update-attachment", attachment: next });
}

/**
 * Upstream's Multi-Attach message: pods elsewhere in the same namespace by
 * name, pods in other namespaces only counted (their names are not the
 * reader's business).
 */
export function multiAttachMessage(pvName: string, namespace: string, podsElsewhere: readonly Pod[]): string {
  const same = podsElsewhere
    .filter((p) => p.metadata.namespace === namespace)
    .map((p) => p.metadata.name)
    .sort();
  const others = podsElsewhere.filter((p) => p.metadata.namespace !== namespace).length;
  if (same.length === 0 && others === 0) return message.multiAttach(pvName, message.exclusivelyAttached);
  if (others === 0) return message.multiAttach(pvName, `Volume is already used by pod(s) ${same.join(", ")}`);
  if (same.length === 0)
    return message.multiAttach(pvName, `Volume is already used by ${others} pod(s) in different namespaces`);
  return message.multiAttach(
    pvName,
    `Volume is already used by pod(s) ${same.join(", ")} and ${others} pod(s) in different namespaces`,
  );
}
