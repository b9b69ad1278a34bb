// The attacher as a ControllerSpec of the shared runtime: which keys an event
// names (VolumeAttachments of this driver, PVs that may lose our finalizer),
// the loaders, the pure rounds (../attachment-protocol.ts,
// ../volume-release.ts) and the executors of their steps.
import type { Answered, ControllerRuntime, SpecOf } from "../../controller/index.ts";
import type { ControllerEvent } from "../../http/controller-function.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import { behindOwnRevision } from "../../kube/own-revisions.ts";
import { persistentVolumes, volumeAttachments } from "../../kube/resources.ts";
import type { PersistentVolume, VolumeAttachment } from "../../kube/types.ts";
import type { AttacherKey, AttacherStep, AttachmentState, VolumeState } from "../attacher-steps.ts";
import { planAttachment } from "../attachment-protocol.ts";
import { attachmentFromEvent, copyMayDecide } from "../event-copy.ts";
import { type AttachHandler, isAttachmentForDriver } from "../handler.ts";
import { mayReleaseVolume, planVolume } from "../volume-release.ts";
import { type AttacherExecutorDeps, attacherExecutors } from "./attacher-executors.ts";
import {
  type CsiNodeCopy,
  completeAttachmentState,
  loadAttachment,
  loadVolumeState,
  type PvCopy,
} from "./load-attachment.ts";

export interface AttacherReport {
  object: string;
  outcome: string;
}

interface AttacherSpecDeps extends AttacherExecutorDeps {
  driverName: string;
  handler: () => Promise<AttachHandler>;
  csiNodes?: CsiNodeCopy | undefined;
  persistentVolumes?: PvCopy | undefined;
}

export type AttacherRuntime = ControllerRuntime<
  AttacherKey,
  AttachmentState | VolumeState,
  AttacherStep,
  never,
  AttachmentState,
  AttacherReport
>;

function objectOf(key: AttacherKey): string {
  return key.kind === "attachment" ? `volumeattachment ${key.name}` : `volume ${key.name}`;
}

function answer(object: string, outcome: string): Answered<AttacherReport> {
  return { reports: [{ object, outcome }] };
}

async function keysOfEvent(
  e: ControllerEvent,
  d: AttacherSpecDeps,
): Promise<AttacherKey[] | Answered<AttacherReport>> {
  if (e.kind === "VolumeAttachment" && e.apiVersion === "storage.k8s.io/v1") {
    const hint = e.object as Partial<VolumeAttachment> | undefined;
    if (e.action === "delete") {
      // Upstream vaDeleted: the PV it named may now lose our finalizer.
      const pvName = hint?.spec?.source?.persistentVolumeName;
      // An event's copy is untrusted: only a real name is worth a read.
      if (typeof pvName === "string" && pvName !== "") return [{ kind: "volume", name: pvName }];
      return answer(`volumeattachment ${e.name}`, "deleted; nothing left to do");
    }
    // spec.attacher is immutable, so the event's copy may spare the read for other drivers' attachments.
    const attacher = hint?.spec?.attacher;
    if (typeof attacher === "string" && attacher !== d.driverName)
      return answer(`volumeattachment ${e.name}`, `attacher is ${attacher}, not ${d.driverName}`);
    const copy = attachmentFromEvent(e.name, e.object);
    return [{ kind: "attachment", name: e.name, ...(copy ? { copy } : {}) }];
  }
  if (e.kind === "PersistentVolume" && e.apiVersion === "v1") {
    // A DELETED PV is gone: our finalizer, if any, was removed before.
    if (e.action === "delete") return answer(`volume ${e.name}`, "deleted; nothing left to do");
    // Every PV change in the cluster comes here; only a deleting PV with our finalizer needs a look.
    // Whatever makes both true later arrives as an event of its own, so the event's copy may decide.
    const hint = e.object as Partial<PersistentVolume> | undefined;
    if (hint?.metadata && !mayReleaseVolume({ metadata: hint.metadata }, await d.handler()))
      return answer(`volume ${e.name}`, "not being deleted with the attacher finalizer");
    return [{ kind: "volume", name: e.name }];
  }
  return [];
}

async function loadState(
  d: AttacherSpecDeps,
  key: AttacherKey,
  ctx: { attempt: number; round: number; carried: readonly AttachmentState[] },
): Promise<AttachmentState | VolumeState | undefined> {
  const { kube, now } = d;
  const { attempt, round, carried } = ctx;
  const handler = await d.handler();
  if (key.kind === "volume") return loadVolumeState(kube, handler, key.name);
  // A later attempt follows a lost race: the copies were behind, so everything is read live.
  const first = attempt === 1;
  const copies = { csiNodes: d.csiNodes, pvs: first ? d.persistentVolumes : undefined };
  if (round > 1) {
    // Each step of a protocol hands over what it left; nothing is read twice. The clock moves on:
    // a failure found in this round is dated now, as upstream dates it when it happens.
    const resumed = carried.at(-1);
    if (!resumed) throw new TypeError(`round ${round} of ${objectOf(key)} has no state to resume from`);
    return completeAttachmentState(kube, { ...resumed, now: now() }, now, copies);
  }
  const force = key.force === true;
  const at = now();
  const copied =
    first && key.copy && copyMayDecide(handler, key.copy, { now: at, force }) ? key.copy : undefined;
  const va = copied ?? (await loadAttachment(kube, key.name));
  if (!va) return undefined;
  const start: AttachmentState = {
    kind: "attachment",
    handler,
    now: copied ? at : now(),
    force,
    va,
    stage: { at: "start" },
    prefix: "",
  };
  return completeAttachmentState(kube, start, now, copies);
}

/** Every VolumeAttachment of this driver, and every deleting PV that holds our finalizer. */
async function resyncKeys(kube: KubeJsonClient, d: AttacherSpecDeps) {
  const handler = await d.handler();
  const [attachments, volumes] = await Promise.all([
    kube.list<VolumeAttachment>(volumeAttachments),
    handler.finalizer ? kube.list<PersistentVolume>(persistentVolumes) : undefined,
  ]);
  const mine = attachments.items.filter((va) => isAttachmentForDriver(va, d.driverName));
  const held = (volumes?.items ?? []).filter((pv) => mayReleaseVolume(pv, handler));
  const keys: AttacherKey[] = [
    ...mine.map((va): AttacherKey => ({ kind: "attachment", name: va.metadata.name })),
    ...held.map((pv): AttacherKey => ({ kind: "volume", name: pv.metadata.name })),
  ];
  return { waves: [keys], counts: { attachments: mine.length, volumes: held.length } };
}

export function attacherSpec(d: AttacherSpecDeps): SpecOf<AttacherRuntime> {
  return {
    keyId: objectOf,
    keysOf: (e) => keysOfEvent(e, d),
    load: (key, ctx) => loadState(d, key, ctx),
    absent: (key) => (key.kind === "attachment" ? "volumeattachment is gone" : "volume is gone"),
    // An event's copy older than what this process wrote or read of that VA since: that newer
    // revision brings (or brought) an event of its own, so this one needs no read at all.
    skip: (key) =>
      key.kind === "attachment" && key.copy && d.written.isBehind(key.copy) ? behindOwnRevision : undefined,
    decide(state) {
      if (state.kind === "volume") return planVolume(state);
      const plan = planAttachment(state);
      return state.prefix ? { ...plan, outcome: `${state.prefix}${plan.outcome}` } : plan;
    },
    executors: attacherExecutors(d),
    report: (r, key) => ({ object: objectOf(key), outcome: r.outcome }),
    resyncKeys: () => resyncKeys(d.kube, d),
  };
}
