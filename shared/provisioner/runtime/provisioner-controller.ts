// The CSI external-provisioner for one driver, on the shared runtime
// (shared/controller): an event names the claim or PV to sync; each round
// loads its state (load-state.ts), decides with the pure claim and volume
// plans (../plan-claim.ts, ../plan-volume.ts) and carries out the steps
// (provisioner-executors.ts). The multi-step protocols decide again on what
// each step left, so a process killed between two steps is repaired by the
// next event; the intent finalizer keeps that repair leak-proof.
import { ControllerRuntime, type LoadContext, type SpecOf } from "../../controller/index.ts";
import type { CsiClient } from "../../csi/client.ts";
import type { ControllerEvent } from "../../http/controller-function.ts";
import { claimFromEvent, volumeFromEvent } from "../../kube/event-copies.ts";
import type { EventSink } from "../../kube/event-recorder.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import { behindOwnRevision, OwnRevisions } from "../../kube/own-revisions.ts";
import { persistentVolumeClaims, persistentVolumes } from "../../kube/resources.ts";
import type { StorageClassCopy } from "../../kube/storage-class-copy.ts";
import type { PersistentVolume, PersistentVolumeClaim } from "../../kube/types.ts";
import type { ClaimState } from "../claim-state.ts";
import { claimNeedsNothing, hasProvisioningIntent, isClaimForDriver } from "../decide-claim.ts";
import { isVolumeForDriver, volumeNeedsNothing } from "../decide-volume.ts";
import type { ProvisionerOptions } from "../options.ts";
import { planClaimRound } from "../plan-claim.ts";
import { planVolumeRound, type VolumeState } from "../plan-volume.ts";
import type { ProvisionerFact, ProvisionerPlan, ProvisionerStep } from "../steps.ts";
import type { AttachmentCopy } from "./attachment-copy.ts";
import type { NodeTopologyCopies } from "./load-request.ts";
import { type LoaderDeps, loadClaimState, loadVolumeState } from "./load-state.ts";
import { provisionerExecutors } from "./provisioner-executors.ts";
import { type ProvisionerMetrics, provisionerMetrics } from "./provisioner-metrics.ts";

export interface ProvisionerReport {
  object: string;
  outcome: string;
  error?: string;
}

export interface ProvisionerControllerOptions {
  kube: KubeJsonClient;
  csi: CsiClient;
  events: EventSink;
  driverName: string;
  options: ProvisionerOptions;
  metrics?: ProvisionerMetrics;
  now?: () => Date;
  /** Attempts per sync when writes conflict. Default 5. */
  maxAttempts?: number;
  /** Objects synced at once by resync. Default 8. */
  resyncConcurrency?: number;
  /** Keys synced at once, events and resync together (WORKERS, upstream --worker-threads); default no cap. */
  workers?: number | undefined;
  /** Watched copies of every Node and CSINode, started on first use (see load-request.ts); none: list them per claim. */
  topology?: () => NodeTopologyCopies;
  /** A watched copy of the StorageClasses, started on first use (shared/kube/storage-class-copy.ts); none: GET each. */
  storageClasses?: () => StorageClassCopy;
  /** A watched copy of the VolumeAttachments, started on first use (attachment-copy.ts); none: list them per deletion. */
  attachments?: () => AttachmentCopy;
}

/** A volume event's `copy`: skipped once this process has written (or read live) a newer revision. */
type ProvisionerKey =
  | { kind: "claim"; namespace: string; name: string }
  | { kind: "volume"; name: string; copy?: PersistentVolume };

type ProvisionerState = { kind: "claim"; state: ClaimState } | { kind: "volume"; state: VolumeState };

function keyId(key: ProvisionerKey): string {
  return key.kind === "claim" ? `claim ${key.namespace}/${key.name}` : `volume ${key.name}`;
}

function decide(s: ProvisionerState): ProvisionerPlan {
  const round = s.kind === "claim" ? planClaimRound(s.state) : planVolumeRound(s.state);
  // The loaders read whatever a round asks for before it is decided.
  if ("needs" in round) throw new Error(`a ${s.kind} round was decided before its ${round.needs} was read`);
  return round;
}

function provisionerSpec(o: ProvisionerControllerOptions): SpecOf<ProvisionerController> {
  const { kube, driverName } = o;
  const written = new OwnRevisions();
  const deps: LoaderDeps = {
    kube,
    csi: o.csi,
    driverName,
    options: o.options,
    now: o.now ?? (() => new Date()),
    topology: o.topology,
    storageClasses: o.storageClasses,
    attachments: o.attachments,
    written,
  };
  const answer = (object: string, outcome: string) => ({ reports: [{ object, outcome }] });

  return {
    keyId,
    async keysOf(e: ControllerEvent) {
      if (e.apiVersion !== "v1") return [];
      // A DELETED claim or PV is gone for good: everything that mattered happened while finalizers held it.
      if (e.action === "delete") return answer(`${e.kind} ${e.name}`, "deleted; nothing left to do");
      if (e.kind === "PersistentVolumeClaim") {
        const namespace = e.namespace ?? "";
        // Observed in the event's copy: bound (or deleted, or another driver's) and no intent of ours.
        // Nothing the API could say would change that answer, so nothing is read.
        const copy = claimFromEvent(e.object);
        if (copy && claimNeedsNothing(copy, driverName))
          return answer(`claim ${namespace}/${e.name}`, "nothing to do (the event's copy)");
        return [{ kind: "claim", namespace, name: e.name }];
      }
      if (e.kind === "PersistentVolume") {
        // Observed in the event's copy: not ours, or nothing to reclaim and the finalizer in step.
        const copy = volumeFromEvent(e.object);
        if (copy && volumeNeedsNothing(copy, driverName))
          return answer(`volume ${e.name}`, "nothing to do (the event's copy)");
        return [{ kind: "volume", name: e.name, ...(copy?.metadata.name === e.name ? { copy } : {}) }];
      }
      return [];
    },
    async load(key, { previous, carried }: LoadContext<ProvisionerFact, ProvisionerState>) {
      if (key.kind === "claim") {
        const before = previous?.kind === "claim" ? previous.state : undefined;
        const state = await loadClaimState(deps, key.namespace, key.name, before, carried);
        return state && { kind: "claim", state };
      }
      const before = previous?.kind === "volume" ? previous.state : undefined;
      const state = await loadVolumeState(deps, key.name, before, carried);
      return state && { kind: "volume", state };
    },
    absent: (key) => (key.kind === "claim" ? "claim is gone" : "volume is gone"),
    // A deletion's own writes (DELETE, then our finalizer off) each bring an event; an event
    // queued behind that sync shows a state it has moved past, and its own newer event follows.
    skip: (key) =>
      key.kind === "volume" && key.copy && written.isBehind(key.copy) ? behindOwnRevision : undefined,
    decide,
    executors: provisionerExecutors({
      kube,
      written,
      csi: o.csi,
      events: o.events,
      metrics: o.metrics ?? provisionerMetrics(),
    }),
    report: (r) => ({
      object: r.id,
      outcome: r.outcome,
      ...(r.error !== undefined ? { error: r.error } : {}),
    }),
    async resyncKeys() {
      const [claims, volumes] = await Promise.all([
        kube.list<PersistentVolumeClaim>(persistentVolumeClaims),
        kube.list<PersistentVolume>(persistentVolumes),
      ]);
      const mine = claims.items.filter((c) => hasProvisioningIntent(c) || isClaimForDriver(c, driverName));
      const ours = volumes.items.filter((v) => isVolumeForDriver(v, driverName));
      const keys: ProvisionerKey[] = [
        ...mine.map((c): ProvisionerKey => {
          const namespace = c.metadata.namespace ?? "";
          return { kind: "claim", namespace, name: c.metadata.name };
        }),
        ...ours.map((v): ProvisionerKey => ({ kind: "volume", name: v.metadata.name })),
      ];
      return { waves: [keys], counts: { claims: mine.length, volumes: ours.length } };
    },
  };
}

export class ProvisionerController extends ControllerRuntime<
  ProvisionerKey,
  ProvisionerState,
  ProvisionerStep,
  never,
  ProvisionerFact,
  ProvisionerReport
> {
  readonly driverName: string;

  constructor(o: ProvisionerControllerOptions) {
    super(provisionerSpec(o), {
      maxAttempts: o.maxAttempts ?? 5,
      resyncConcurrency: Math.max(1, o.resyncConcurrency ?? 8),
      workers: o.workers,
    });
    this.driverName = o.driverName;
  }

  /** One claim: read, then provision, clean up or release round by round; a lost race decides again. */
  syncClaim(namespace: string, name: string): Promise<ProvisionerReport> {
    return this.sync({ kind: "claim", namespace, name });
  }

  /** One PV: read, then keep its finalizer in step or reclaim it; a lost race decides again. */
  syncVolume(name: string): Promise<ProvisionerReport> {
    return this.sync({ kind: "volume", name });
  }
}
