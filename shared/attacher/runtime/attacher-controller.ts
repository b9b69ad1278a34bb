// The CSI external-attacher as a stateless controller. VolumeAttachments of
// this driver: ControllerPublishVolume and status attached=true (CSI handler)
// or just the status (trivial handler); once deleted, ControllerUnpublish and
// the finalizer goes. PVs: the attacher's finalizer goes once the PV is being
// deleted and no VolumeAttachment needs it. State that must survive lives in
// the API objects: finalizers, the node-id annotation, VA status and the
// backoff annotations. Like upstream, it records no Kubernetes Events.

import type { CsiClient } from "../../csi/client.ts";
import { grpcCodeOf } from "../../csi/errors.ts";
import type { ControllerEvent } from "../../http/controller-function.ts";
import { RetryLaterError } from "../../http/errors.ts";
import { isNotFound, lostToConcurrentWriter, statusCodeOf } from "../../kube/api-errors.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import { retryWhileLosingRaces, updateObject } from "../../kube/optimistic-update.ts";
import { csiNodes, persistentVolumes, volumeAttachments } from "../../kube/resources.ts";
import type {
  CSINode,
  CSIPersistentVolumeSource,
  PersistentVolume,
  VolumeAttachment,
} from "../../kube/types.ts";
import { retrying } from "../../retry.ts";
import { resolveSource } from "../attachment-source.ts";
import {
  type AttachmentStatus,
  attachedStatus,
  detachedStatus,
  volumeError,
  withAttachError,
  withDetachError,
} from "../attachment-status.ts";
import { backoffKeysOn, type Operation, withFailure, withoutBackoff } from "../backoff.ts";
import { chooseHandler } from "../choose-handler.ts";
import type { AttachHandler } from "../handler.ts";
import { isAttachmentForDriver } from "../handler.ts";
import { nodeIdFor } from "../node-id.ts";
import {
  addVolumeFinalizerPatch,
  prepareAttachmentPatch,
  releaseAttachmentPatch,
  removeVolumeFinalizerPatch,
} from "../patches.ts";
import { buildPublishRequest, buildUnpublishRequest, volumeCapabilityFor } from "../publish-request.ts";
import { findAttachmentMismatches, publishedNodesByVolume } from "../reconcile.ts";
import { listAllVolumes, loadCsiNode, loadPublishSecrets, loadVolume } from "./load-attachment.ts";

export interface AttacherReport {
  object: string;
  outcome: string;
  error?: string;
}

/** What a successful ControllerPublishVolume needs remembered: for the status, and to take it back. */
interface Published {
  publishContext: Record<string, string>;
  nodeId: string;
  csi: CSIPersistentVolumeSource;
  secrets: Record<string, string> | undefined;
}

export interface AttacherResyncReport {
  handler: AttachHandler["kind"];
  attachments: number;
  volumes: number;
  /** Attachments the ListVolumes comparison found out of step and synced again. */
  reconciled: string[];
  errors: string[];
}

export interface AttacherControllerOptions {
  kube: KubeJsonClient;
  csi: CsiClient;
  driverName: string;
  /** --default-fstype: fsType for PVs that name none. Default "" (none). */
  defaultFsType?: string;
  /** Overrides the handler chosen from the driver's capabilities. */
  handler?: AttachHandler;
  now?: () => Date;
  /** Attempts per sync when writes conflict. Default 5. */
  maxAttempts?: number;
  resyncConcurrency?: number;
  /** ListVolumes max_entries per page (upstream --max-entries); 0 lets the driver choose. */
  listVolumesPageSize?: number;
}

/** A JSON Patch `test` failed: what was read is stale. Counts as a conflict (re-read, re-decide). */
class StaleReadError extends Error {
  override name = "StaleReadError";
  readonly code = 409;
  readonly body: { reason: string; code: number; message: string };
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.body = { reason: "Conflict", code: 409, message };
  }
}

/** A failure upstream reports with exactly this text in VA status. */
class AttachmentError extends Error {
  override name = "AttachmentError";
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Lost a race: re-read and decide again rather than record an error. */
function lostRace(err: unknown): boolean {
  return lostToConcurrentWriter(err) || err instanceof StaleReadError;
}

/** Upstream's prefixes for failed writes ("could not save VolumeAttachment: ..."), races left alone. */
async function describing<T>(prefix: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (lostRace(err)) throw err;
    throw new AttachmentError(`${prefix}: ${messageOf(err)}`, { cause: err });
  }
}

export class AttacherController {
  private readonly kube: KubeJsonClient;
  private readonly csi: CsiClient;
  readonly driverName: string;
  private readonly defaultFsType: string;
  private readonly now: () => Date;
  private readonly maxAttempts: number;
  private readonly resyncConcurrency: number;
  private readonly listVolumesPageSize: number;
  private chosen: Promise<AttachHandler> | undefined;

  constructor(o: AttacherControllerOptions) {
    this.kube = o.kube;
    this.csi = o.csi;
    this.driverName = o.driverName;
    this.defaultFsType = o.defaultFsType ?? "";
    this.now = o.now ?? (() => new Date());
    this.maxAttempts = o.maxAttempts ?? 5;
    this.resyncConcurrency = o.resyncConcurrency ?? 8;
    this.listVolumesPageSize = o.listVolumesPageSize ?? 0;
    if (o.handler) this.chosen = Promise.resolve(o.handler);
  }

  /** The handler, chosen once from the driver's capabilities (a failed fetch is asked again). */
  handler(): Promise<AttachHandler> {
    if (this.chosen === undefined) {
      const pending = this.csi
        .capabilities()
        .then((c) => chooseHandler(c, { driverName: this.driverName, defaultFsType: this.defaultFsType }));
      this.chosen = pending;
      pending.catch(() => {
        if (this.chosen === pending) this.chosen = undefined;
      });
    }
    return this.chosen;
  }

  async handleEvent(e: ControllerEvent): Promise<AttacherReport[]> {
    if (e.kind === "VolumeAttachment" && e.apiVersion === "storage.k8s.io/v1") {
      const hint = e.object as Partial<VolumeAttachment> | undefined;
      if (e.action === "delete") {
        // Upstream vaDeleted: the PV it named may now lose our finalizer.
        const pvName = hint?.spec?.source?.persistentVolumeName;
        // An event's copy is untrusted: only a real name is worth a read.
        if (typeof pvName === "string" && pvName !== "") return [await this.syncVolume(pvName)];
        return [{ object: `volumeattachment ${e.name}`, outcome: "deleted; nothing left to do" }];
      }
      // spec.attacher is immutable, so the event's copy may spare the read for other drivers' attachments.
      const attacher = hint?.spec?.attacher;
      if (typeof attacher === "string" && attacher !== this.driverName) {
        return [
          {
            object: `volumeattachment ${e.name}`,
            outcome: `attacher is ${attacher}, not ${this.driverName}`,
          },
        ];
      }
      return [await this.syncAttachment(e.name)];
    }
    if (e.kind === "PersistentVolume" && e.apiVersion === "v1") {
      // A DELETED PV is gone: our finalizer, if any, was removed before.
      if (e.action === "delete")
        return [{ object: `volume ${e.name}`, outcome: "deleted; nothing left to do" }];
      // Every PV change in the cluster comes here; only a deleting PV with our finalizer needs a look.
      // Whatever makes both true later arrives as an event of its own, so the event's copy may decide.
      const hint = e.object as Partial<PersistentVolume> | undefined;
      if (hint?.metadata) {
        const { finalizer } = await this.handler();
        const finalizers: unknown = hint.metadata.finalizers;
        const held = finalizer !== undefined && Array.isArray(finalizers) && finalizers.includes(finalizer);
        if (!held || !hint.metadata.deletionTimestamp)
          return [{ object: `volume ${e.name}`, outcome: "not being deleted with the attacher finalizer" }];
      }
      return [await this.syncVolume(e.name)];
    }
    return [];
  }

  /** Runs `work` again on fresh state when a conditional write lost a race. */
  private retryOnConflict(work: () => Promise<AttacherReport>): Promise<AttacherReport> {
    return retryWhileLosingRaces(work, { maxAttempts: this.maxAttempts, lostRace });
  }

  // ---- VolumeAttachments -----------------------------------------------------

  async syncAttachment(name: string, options: { force?: boolean } = {}): Promise<AttacherReport> {
    const object = `volumeattachment ${name}`;
    const handler = await this.handler();
    return this.retryOnConflict(async () => {
      const va = await this.getAttachment(name);
      if (!va) return { object, outcome: "volumeattachment is gone" };
      const decision = handler.decideAttachment(va, {
        now: this.now(),
        ...(options.force ? { force: true } : {}),
      });
      switch (decision.action) {
        case "ignore":
          return { object, outcome: decision.reason };
        case "backoff":
          return { object, outcome: `backing off until ${decision.until}` };
        case "mark-attached":
          await this.writeStatus(name, (s) => attachedStatus(s, undefined));
          return { object, outcome: "marked attached (the driver does not publish volumes)" };
        case "attach":
          return this.attach(object, va, handler, decision.forced);
        case "detach":
          return this.detach(object, va, handler, decision.forced);
        case "mark-detached":
          await this.writeStatus(name, detachedStatus, { goneIsFine: true });
          return { object, outcome: `marked detached: ${decision.reason}` };
      }
    });
  }

  private async attach(
    object: string,
    va: VolumeAttachment,
    handler: AttachHandler,
    forced: boolean,
  ): Promise<AttacherReport> {
    let published: Published;
    try {
      published = await this.publish(va, handler);
    } catch (err) {
      if (lostRace(err)) throw err;
      return this.failed(va.metadata.name, "attach", err);
    }
    const finalizer = handler.finalizer;
    let released = false;
    const written = await this.writeStatus(
      va.metadata.name,
      (status, current) => {
        // Observed: another VA of this name (deleted and created again), or ours deleting without our
        // finalizer: another sync detached and released it while the publish was in flight.
        released =
          current.metadata.uid !== va.metadata.uid ||
          (finalizer !== undefined && !(current.metadata.finalizers ?? []).includes(finalizer));
        return released ? undefined : attachedStatus(status, published.publishContext);
      },
      { goneIsFine: true }, // Observed when undefined: the VA is gone, released by another sync.
    );
    if (released || !written) {
      // Nothing else will ever unpublish this publish: do it now. A release that had not happened
      // yet conflicts with the status write above, so that sync detaches again.
      await this.unpublishReleased(va, published);
      const outcome = `published to node ${published.nodeId} after the attachment was released; unpublished again`;
      // A new VA of this name (same volume, same node) may have been published meanwhile and lost that
      // publish to the unpublish above: publish it again. One created later publishes on its own sync.
      const successor = await this.getAttachment(va.metadata.name);
      if (successor && successor.metadata.uid !== va.metadata.uid) {
        const again = await this.syncAttachment(va.metadata.name, { force: true });
        return { object, outcome: `${outcome}; the new attachment: ${again.outcome}` };
      }
      return { object, outcome };
    }
    // The failures that led here are history; the next failure starts the backoff over.
    if (backoffKeysOn(written).length > 0) {
      await updateObject<VolumeAttachment>(
        this.kube,
        volumeAttachments,
        { name: va.metadata.name },
        withoutBackoff,
      );
    }
    const why = forced ? " (the driver did not list it as published)" : "";
    return { object, outcome: `attached to node ${published.nodeId}${why}` };
  }

  /**
   * Upstream csiAttach, in its order: everything that can be checked is
   * checked before the VA gets our finalizer, since that finalizer blocks
   * the VA's deletion until a detach succeeds.
   */
  private async publish(va: VolumeAttachment, handler: AttachHandler): Promise<Published> {
    const finalizer = handler.finalizer ?? "";
    const pv = await loadVolume(this.kube, va.spec.source.persistentVolumeName);
    const source = resolveSource(va, pv, { forAttach: true });
    if (!source.ok) throw new AttachmentError(source.error);
    const volume = source.pv;
    // The PV must outlive every detach of it: our finalizer goes on before anything is published.
    const protect = volume ? addVolumeFinalizerPatch(volume, finalizer) : undefined;
    if (volume && protect) {
      await describing("could not add PersistentVolume finalizer", () =>
        this.patchVolume(volume.metadata.name, protect),
      );
    }
    const capability = volumeCapabilityFor(source.spec, source.csi, handler.publish);
    if (!capability.ok) throw new AttachmentError(capability.error);
    const secrets = await loadPublishSecrets(this.kube, source.csi);
    if (!secrets.ok) throw new AttachmentError(secrets.error);
    const csiNode = await loadCsiNode(this.kube, va.spec.nodeName);
    const node = nodeIdFor(this.driverName, va.spec.nodeName, csiNode);
    if (!node.ok) throw new AttachmentError(node.error);

    const patch = prepareAttachmentPatch(va, finalizer, node.nodeId);
    if (patch) {
      await describing("could not save VolumeAttachment", () =>
        this.kube.patch<VolumeAttachment>(volumeAttachments, va.metadata.name, undefined, patch, "merge"),
      );
    }
    const response = await this.csi.controllerPublishVolume(
      buildPublishRequest({
        csi: source.csi,
        capability: capability.value,
        nodeId: node.nodeId,
        secrets: secrets.value,
        publishReadonly: handler.publish.publishReadonly,
      }),
    );
    return {
      publishContext: response.publishContext ?? {},
      nodeId: node.nodeId,
      csi: source.csi,
      secrets: secrets.value,
    };
  }

  /**
   * Takes back a publish whose attachment was released meanwhile. The VA that would make a sender
   * retry is gone, so the unpublish is retried here; if it still fails the error says what is left.
   */
  private async unpublishReleased(va: VolumeAttachment, published: Published): Promise<void> {
    const request = buildUnpublishRequest({
      csi: published.csi,
      nodeId: published.nodeId,
      secrets: published.secrets,
    });
    try {
      await retrying(() => this.csi.controllerUnpublishVolume(request), {
        maxAttempts: this.maxAttempts,
        baseDelayMs: 200,
        // Any error: nothing else will ask for this unpublish again.
        retryable: () => true,
      });
    } catch (err) {
      throw new RetryLaterError(
        `volume ${published.csi.volumeHandle} was published to node ${published.nodeId} after VolumeAttachment ${va.metadata.name} was released, and unpublishing it failed: ${messageOf(err)}`,
        undefined,
        { cause: err },
      );
    }
  }

  private async detach(
    object: string,
    va: VolumeAttachment,
    handler: AttachHandler,
    forced: boolean,
  ): Promise<AttacherReport> {
    const name = va.metadata.name;
    let pv: PersistentVolume | undefined;
    let nodeId: string;
    try {
      pv = await loadVolume(this.kube, va.spec.source.persistentVolumeName);
      const source = resolveSource(va, pv, { forAttach: false });
      if (!source.ok) throw new AttachmentError(source.error);
      const secrets = await loadPublishSecrets(this.kube, source.csi);
      if (!secrets.ok) throw new AttachmentError(secrets.error);
      const csiNode = await loadCsiNode(this.kube, va.spec.nodeName);
      // The node may be gone with its CSINode; the id recorded at attach still names it.
      const node = nodeIdFor(this.driverName, va.spec.nodeName, csiNode, va);
      if (!node.ok) throw new AttachmentError(node.error);
      nodeId = node.nodeId;
      await this.csi.controllerUnpublishVolume(
        buildUnpublishRequest({ csi: source.csi, nodeId, secrets: secrets.value }),
      );
    } catch (err) {
      if (lostRace(err)) throw err;
      return this.failed(name, "detach", err);
    }
    // Upstream markAsDetached: the finalizer goes first. A deleted VA without it counts as
    // detached; the other order (status, then finalizer) would unpublish twice after a crash.
    const patch = releaseAttachmentPatch(va, handler.finalizer ?? "");
    if (patch) {
      try {
        await this.kube.patch<VolumeAttachment>(volumeAttachments, name, undefined, patch, "merge");
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    }
    await this.writeStatus(name, detachedStatus, { goneIsFine: true });
    let outcome = `detached from node ${nodeId}${forced ? " (the driver still listed it as published)" : ""}`;
    // The PV waited for this detach to be deleted: let it go now rather than on the next event.
    if (pv?.metadata.deletionTimestamp)
      outcome += `; volume ${pv.metadata.name}: ${(await this.syncVolume(pv.metadata.name)).outcome}`;
    return { object, outcome };
  }

  /**
   * Records a failed attach or detach where it survives (upstream
   * saveAttachError / saveDetachError) and asks the sender to come back after
   * the backoff. The backoff annotations go first: the status write is an
   * event of its own, and it must find the attachment backing off.
   */
  private async failed(name: string, op: Operation, err: unknown): Promise<never> {
    const now = this.now();
    const message = messageOf(err);
    let delaySeconds: number | undefined;
    let unsaved = "";
    try {
      await updateObject<VolumeAttachment>(this.kube, volumeAttachments, { name }, (current) => {
        const next = withFailure(current, op, now);
        delaySeconds = next.delaySeconds;
        return next.va;
      });
      const error = volumeError(message, now, op === "attach" ? grpcCodeOf(err) : undefined);
      await this.writeStatus(name, (s) =>
        op === "attach" ? withAttachError(s, error) : withDetachError(s, error),
      );
    } catch (saveErr) {
      // Like upstream: the operation's error is what gets reported; the failed save only adds to it.
      unsaved = ` (and saving the error failed: ${messageOf(saveErr)})`;
    }
    throw new RetryLaterError(`failed to ${op}: ${message}${unsaved}`, delaySeconds, { cause: err });
  }

  // ---- PersistentVolumes -----------------------------------------------------

  syncVolume(name: string): Promise<AttacherReport> {
    const object = `volume ${name}`;
    return this.retryOnConflict(async () => {
      const handler = await this.handler();
      const pv = await loadVolume(this.kube, name);
      if (!pv) return { object, outcome: "volume is gone" };
      // Only a deleting PV with our finalizer needs the list of every VolumeAttachment.
      const mayRelease =
        handler.finalizer !== undefined &&
        pv.metadata.deletionTimestamp !== undefined &&
        (pv.metadata.finalizers ?? []).includes(handler.finalizer);
      const attachments = mayRelease ? (await this.kube.list<VolumeAttachment>(volumeAttachments)).items : [];
      const decision = handler.decideVolume(pv, attachments);
      if (decision.action === "ignore") return { object, outcome: decision.reason };
      const patch = removeVolumeFinalizerPatch(pv, handler.finalizer ?? "");
      if (patch) await this.patchVolume(name, patch);
      return { object, outcome: "removed the attacher finalizer" };
    });
  }

  // ---- resync and the ListVolumes reconciler ----------------------------------

  async resync(): Promise<AttacherResyncReport> {
    const handler = await this.handler();
    const [attachments, volumes] = await Promise.all([
      this.kube.list<VolumeAttachment>(volumeAttachments),
      handler.finalizer ? this.kube.list<PersistentVolume>(persistentVolumes) : undefined,
    ]);
    const mine = attachments.items.filter((va) => isAttachmentForDriver(va, this.driverName));
    const held = (volumes?.items ?? []).filter(
      (pv) =>
        pv.metadata.deletionTimestamp && (pv.metadata.finalizers ?? []).includes(handler.finalizer ?? ""),
    );
    const errors: string[] = [];
    await this.runAll(
      [
        ...mine.map((va) => () => this.syncAttachment(va.metadata.name)),
        ...held.map((pv) => () => this.syncVolume(pv.metadata.name)),
      ],
      errors,
    );
    const reconciled: string[] = [];
    if (handler.reconciles) {
      try {
        reconciled.push(...(await this.reconcile(errors)));
      } catch (err) {
        errors.push(`ListVolumes reconcile: ${messageOf(err)}`);
      }
    }
    return { handler: handler.kind, attachments: mine.length, volumes: held.length, reconciled, errors };
  }

  /** Upstream ReconcileVA: sync again, forced, every attachment whose status the driver contradicts. */
  private async reconcile(errors: string[]): Promise<string[]> {
    const entries = await listAllVolumes(this.csi, this.listVolumesPageSize);
    const [attachments, volumes, nodes] = await Promise.all([
      this.kube.list<VolumeAttachment>(volumeAttachments),
      this.kube.list<PersistentVolume>(persistentVolumes),
      this.kube.list<CSINode>(csiNodes),
    ]);
    const mismatches = findAttachmentMismatches({
      driverName: this.driverName,
      attachments: attachments.items,
      volumes: new Map(volumes.items.map((pv) => [pv.metadata.name, pv])),
      csiNodes: new Map(nodes.items.map((n) => [n.metadata.name, n])),
      published: publishedNodesByVolume(entries),
    });
    await this.runAll(
      mismatches.map((m) => () => this.syncAttachment(m.name, { force: true })),
      errors,
    );
    return mismatches.map((m) => m.name);
  }

  private async runAll(jobs: (() => Promise<AttacherReport>)[], errors: string[]): Promise<void> {
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < jobs.length) {
        const job = jobs[next++]!;
        try {
          const r = await job();
          if (r.error) errors.push(`${r.object}: ${r.error}`);
        } catch (err) {
          errors.push(messageOf(err));
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.resyncConcurrency, jobs.length) }, worker));
  }

  // ---- writes ------------------------------------------------------------------

  private getAttachment(name: string): Promise<VolumeAttachment | undefined> {
    return this.kube.get<VolumeAttachment>(volumeAttachments, name).catch((err: unknown) => {
      if (isNotFound(err)) return undefined;
      throw err;
    });
  }

  /** A conditional write of the VA's /status (re-read on conflict: the new status is a fact, not a decision). */
  private async writeStatus(
    name: string,
    next: (status: AttachmentStatus | undefined, current: VolumeAttachment) => AttachmentStatus | undefined,
    options: { goneIsFine?: boolean } = {},
  ): Promise<VolumeAttachment | undefined> {
    try {
      const r = await updateObject<VolumeAttachment>(
        this.kube,
        volumeAttachments,
        { name },
        (current) => {
          // undefined from `next`: nothing to write.
          const status = next(current.status, current);
          return status === undefined ? undefined : { ...current, status };
        },
        { subresource: "status" },
      );
      return r.object;
    } catch (err) {
      // Upstream markAsDetached: once the finalizer is gone the VA may be gone too.
      if (options.goneIsFine && isNotFound(err)) return undefined;
      throw err;
    }
  }

  /** A JSON Patch with `test` ops on the PV; a failed test means the read was stale. */
  private async patchVolume(name: string, patch: unknown[]): Promise<void> {
    try {
      await this.kube.patch<PersistentVolume>(persistentVolumes, name, undefined, patch, "json");
    } catch (err) {
      // kube-apiserver answers a failed `test` with 422: someone wrote the PV in between.
      if (statusCodeOf(err) === 422)
        throw new StaleReadError(`PersistentVolume ${name} changed: ${messageOf(err)}`, { cause: err });
      throw err;
    }
  }
}
