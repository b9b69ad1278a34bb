// The CSI external-attacher as a stateless controller on the shared runtime
// (shared/controller). VolumeAttachments of this driver: ControllerPublish
// and status attached=true (CSI handler) or just the status (trivial
// handler); once deleted, ControllerUnpublish and the finalizer goes. PVs:
// the attacher's finalizer goes once the PV is being deleted and no
// VolumeAttachment needs it. State that must survive lives in the API
// objects: finalizers, the node-id annotation, VA status and the backoff
// annotations. Like upstream, it records no Kubernetes Events.
import { ControllerRuntime, forEachBounded } from "../../controller/index.ts";
import type { CsiClient } from "../../csi/client.ts";
import type { Controller, ControllerEvent } from "../../http/controller-function.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import { OwnRevisions } from "../../kube/own-revisions.ts";
import { csiNodes, persistentVolumes, volumeAttachments } from "../../kube/resources.ts";
import type { RetryInterval } from "../../kube/retry-interval.ts";
import type { CSINode, PersistentVolume, VolumeAttachment } from "../../kube/types.ts";
import { chooseHandler } from "../choose-handler.ts";
import type { AttachHandler } from "../handler.ts";
import { findAttachmentMismatches, publishedNodesByVolume } from "../reconcile.ts";
import { type AttacherReport, type AttacherRuntime, attacherSpec } from "./attacher-spec.ts";
import { type CsiNodeCopy, listAllVolumes, messageOf, type PvCopy } from "./load-attachment.ts";

export type { AttacherReport } from "./attacher-spec.ts";

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
  /** Keys synced at once, events and resync together (WORKERS, upstream --worker-threads); default no cap. */
  workers?: number | undefined;
  /** The backoff after a failed attach or detach (upstream --retry-interval-start / -max); default 1 s to 5 min. */
  retryInterval?: RetryInterval | undefined;
  /** ListVolumes max_entries per page (upstream --max-entries); 0 lets the driver choose. */
  listVolumesPageSize?: number;
  /** A watched copy of the CSINodes, for the node ID each attach needs; none: a GET per attach. */
  csiNodes?: CsiNodeCopy;
  /** A watched copy of the PVs, for an attach's first attempt; none: a GET per attach. */
  persistentVolumes?: PvCopy;
}

export class AttacherController implements Controller {
  private readonly kube: KubeJsonClient;
  private readonly csi: CsiClient;
  readonly driverName: string;
  private readonly defaultFsType: string;
  private readonly resyncConcurrency: number;
  private readonly listVolumesPageSize: number;
  private chosen: Promise<AttachHandler> | undefined;
  private readonly runtime: AttacherRuntime;

  constructor(o: AttacherControllerOptions) {
    this.kube = o.kube;
    this.csi = o.csi;
    this.driverName = o.driverName;
    this.defaultFsType = o.defaultFsType ?? "";
    const maxAttempts = o.maxAttempts ?? 5;
    this.resyncConcurrency = o.resyncConcurrency ?? 8;
    this.listVolumesPageSize = o.listVolumesPageSize ?? 0;
    if (o.handler) this.chosen = Promise.resolve(o.handler);
    const spec = attacherSpec({
      kube: o.kube,
      csi: o.csi,
      driverName: o.driverName,
      now: o.now ?? (() => new Date()),
      maxAttempts,
      retryInterval: o.retryInterval,
      handler: () => this.handler(),
      syncVolume: (name) => this.syncVolume(name),
      written: new OwnRevisions(),
      csiNodes: o.csiNodes,
      persistentVolumes: o.persistentVolumes,
    });
    // An attach is up to a dozen rounds; one that takes back a late publish starts over on the new VA.
    this.runtime = new ControllerRuntime(spec, {
      maxAttempts,
      resyncConcurrency: this.resyncConcurrency,
      workers: o.workers,
      maxRounds: 64,
    });
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

  handleEvent(e: ControllerEvent): Promise<AttacherReport[]> {
    return this.runtime.handleEvent(e);
  }

  /** One VolumeAttachment; `force` attaches or detaches again whatever status says (upstream forceSync). */
  async syncAttachment(name: string, options: { force?: boolean } = {}): Promise<AttacherReport> {
    // Chosen before the sync, so a driver that cannot answer fails it before any read.
    await this.handler();
    return this.runtime.sync({ kind: "attachment", name, ...(options.force ? { force: true } : {}) });
  }

  syncVolume(name: string): Promise<AttacherReport> {
    return this.runtime.sync({ kind: "volume", name });
  }

  /** Every attachment of this driver and every PV held by our finalizer; then the ListVolumes reconcile. */
  async resync(): Promise<AttacherResyncReport> {
    const pass = await this.runtime.resync();
    const handler = await this.handler();
    const errors = [...pass.errors];
    const reconciled: string[] = [];
    if (handler.reconciles) {
      try {
        reconciled.push(...(await this.reconcile(errors)));
      } catch (err) {
        errors.push(`ListVolumes reconcile: ${messageOf(err)}`);
      }
    }
    const count = (n: unknown) => (typeof n === "number" ? n : 0);
    return {
      handler: handler.kind,
      attachments: count(pass.attachments),
      volumes: count(pass.volumes),
      reconciled,
      errors,
    };
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
    await forEachBounded(mismatches, this.resyncConcurrency, async (m) => {
      try {
        await this.syncAttachment(m.name, { force: true });
      } catch (err) {
        errors.push(`volumeattachment ${m.name}: ${messageOf(err)}`);
      }
    });
    return mismatches.map((m) => m.name);
  }
}
