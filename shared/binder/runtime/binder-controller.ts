// The PV controller's binder on the shared runtime (shared/controller): an
// event names the claims and volumes to sync, each sync loads its view
// (load-views.ts), decides with syncClaim / syncVolume (pure) and carries out
// the plan (execute-plan.ts); follow-ups sync the other side of a binding.
import { ControllerRuntime, type ControllerSpec, type SyncResult } from "../../controller/index.ts";
import type { ControllerEvent } from "../../http/controller-function.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import { persistentVolumeClaims, persistentVolumes } from "../../kube/resources.ts";
import { readStorageClass, type StorageClassCopy } from "../../kube/storage-class-copy.ts";
import { rfc3339 } from "../../kube/time.ts";
import type { PersistentVolume, PersistentVolumeClaim } from "../../kube/types.ts";
import { type ClaimExplanation, explainClaim } from "../explain.ts";
import type { FollowUp, PlanStep } from "../plan.ts";
import { type ClaimSyncView, syncClaim } from "../sync-claim.ts";
import { syncVolume, type VolumeSyncView } from "../sync-volume.ts";
import { waitingClaimsFor, waitingClaimsScope } from "../waiting-claims.ts";
import { BinderInstruments, type BinderMetrics, binderMetrics } from "./binder-metrics.ts";
import { boundClaimNeedsNothing } from "./bound-claim-check.ts";
import { boundVolumeNeedsNothing } from "./bound-volume-check.ts";
import { binderExecutors, type EventSink } from "./execute-plan.ts";
import { loadClaimView, loadVolumeView, readClaim, readVolume, type VolumeCache } from "./load-views.ts";
import { VolumePicks } from "./volume-picks.ts";
import { type ClaimCache, caughtUp, copyAtLeast, supersededByCopy } from "./watched-reads.ts";

export interface SyncReport {
  object: string;
  outcome: string;
  writes: number;
  events: number;
  attempts: number;
  error?: string;
}

/** What one event means to the binder, already validated by the envelope parser. */
export type BinderEvent = ControllerEvent;

export interface BinderControllerOptions {
  kube: KubeJsonClient;
  events: EventSink;
  now?: () => Date;
  /** Attempts per sync when writes conflict. Default 5. */
  maxAttempts?: number;
  /** Follow-up syncs one event may cause. Default 4. */
  maxFollowUps?: number;
  /** Objects synced at once by resync. Default 8. */
  resyncConcurrency?: number;
  /** Keys synced at once, events and resync together (WORKERS); default no cap. */
  workers?: number | undefined;
  /** A watched copy of the volumes that spares most claim syncs a list of every PV (load-views.ts). */
  volumeCache?: VolumeCache;
  /** A watched copy of the claims: events' objects and bound volumes' claims read from it (watched-reads.ts). */
  claimCache?: ClaimCache;
  /** A watched copy of the StorageClasses, started on first use (shared/kube/storage-class-copy.ts); none: GET each. */
  storageClasses?: () => StorageClassCopy;
  /** pv_collector_*, volume_operation_*, retroactive_storageclass_*; default: the process registry's. */
  metrics?: BinderMetrics;
}

/** A binder key is what a plan may follow up on: a claim (with a candidate volume) or a volume. */
/**
 * `atLeast`: the revision of the event that named the key; a watched copy that has reached it may stand in for a GET.
 * `atLeastOfVolume`: that event was a volume's (a claim nudged by its volume), not the claim's own.
 */
type BinderKey = FollowUp & { atLeast?: string; atLeastOfVolume?: true };

/** The outcome of an event whose object the watched copy already holds in a newer state. */
const SUPERSEDED = "superseded (the watched copy is newer)";

/** An event's copy that names a bound partner (a claim's volumeName, a volume's claimRef): worth a bound check. */
function isBoundCopy(object: Record<string, unknown> | undefined): boolean {
  const spec = object?.spec as { volumeName?: unknown; claimRef?: { uid?: unknown } } | undefined;
  return Boolean(spec?.volumeName) || Boolean(spec?.claimRef?.uid);
}

function revisionOf(object: Record<string, unknown> | undefined): string | undefined {
  const rv = (object?.metadata as { resourceVersion?: unknown } | undefined)?.resourceVersion;
  return typeof rv === "string" ? rv : undefined;
}

type BinderState =
  | { kind: "claim"; claim: PersistentVolumeClaim; view: ClaimSyncView }
  | { kind: "volume"; volume: PersistentVolume; view: VolumeSyncView };

function keyId(key: BinderKey): string {
  return key.kind === "claim" ? `claim ${key.namespace}/${key.name}` : `volume ${key.name}`;
}

function report(r: SyncResult): SyncReport {
  return {
    object: r.id,
    outcome: r.outcome,
    writes: r.writes,
    events: r.events,
    attempts: r.attempts,
    ...(r.error !== undefined ? { error: r.error } : {}),
  };
}

function binderSpec(
  o: BinderControllerOptions,
): ControllerSpec<BinderKey, BinderState, PlanStep, FollowUp, never, SyncReport> {
  const { kube } = o;
  const now = (): string => rfc3339((o.now ?? (() => new Date()))());
  const instruments = new BinderInstruments(o.metrics ?? binderMetrics(), o.now);
  // Only a watched copy makes parallel syncs agree on one pick; without it each lists and judges afresh.
  const picks = o.volumeCache ? new VolumePicks() : undefined;

  /** A deleted claim releases its volume: sync the volume it named (or, without the object, every volume pointing at it). */
  async function claimDeleted(e: BinderEvent): Promise<BinderKey[]> {
    const namespace = e.namespace ?? "";
    // A copy past the deletion answers whether the claim is back (a new one by that name); else the API does.
    const copied = await copyAtLeast<PersistentVolumeClaim>(
      o.claimCache,
      namespace,
      e.name,
      revisionOf(e.object),
    );
    const again = copied ? copied.found : await readClaim(kube, namespace, e.name);
    if (again) return [{ kind: "claim", namespace, name: e.name }];
    const spec = e.object?.spec as { volumeName?: unknown } | undefined;
    if (typeof spec?.volumeName === "string" && spec.volumeName) {
      // The claim copy may not have seen this deletion yet: the volume's sync trusts it only past it.
      const atLeast = revisionOf(e.object);
      return [{ kind: "volume", name: spec.volumeName, ...(atLeast ? { atLeast } : {}) }];
    }
    const all = await kube.list<PersistentVolume>(persistentVolumes);
    return all.items
      .filter((v) => v.spec.claimRef?.namespace === e.namespace && v.spec.claimRef?.name === e.name)
      .map((v) => ({ kind: "volume", name: v.metadata.name }));
  }

  /** A deleted volume may leave a bound claim Lost: sync the claim it pointed at. */
  async function volumeDeleted(e: BinderEvent): Promise<BinderKey[]> {
    const atLeast = revisionOf(e.object);
    const copied = await copyAtLeast<PersistentVolume>(o.volumeCache, "", e.name, atLeast);
    if (copied ? copied.found : await readVolume(kube, e.name)) return [{ kind: "volume", name: e.name }];
    const copy = volumeCopy(e);
    if (copy)
      await instruments.volumeGone(
        copy,
        async (name) => (await readStorageClass(kube, name, o.storageClasses?.()))?.provisioner,
      );
    const spec = e.object?.spec as { claimRef?: { namespace?: unknown; name?: unknown } } | undefined;
    const ref = spec?.claimRef;
    if (typeof ref?.name !== "string" || typeof ref.namespace !== "string") return [];
    // A Released or Failed volume's claim is gone for good: unless the claim copy holds a claim by that
    // name (a new one that may name this volume), nothing is left to mark Lost.
    const phase = copy?.status?.phase;
    if (
      (phase === "Released" || phase === "Failed") &&
      o.claimCache?.synced === true &&
      o.claimCache.store.get(ref.namespace, ref.name) === undefined
    )
      return [];
    const since = atLeast ? { atLeast, atLeastOfVolume: true as const } : {};
    return [{ kind: "claim", namespace: ref.namespace, name: ref.name, ...since }];
  }

  /**
   * A volume that could satisfy a waiting claim: sync it (which makes it
   * Available), then the Pending claims it could bind, so they need not wait
   * for the resync. Chosen from the event's copy; each claim's sync searches
   * fresh state, with this volume as its candidate.
   */
  async function volumeChanged(e: BinderEvent): Promise<BinderKey[]> {
    const atLeast = revisionOf(e.object);
    const key: BinderKey = { kind: "volume", name: e.name, ...(atLeast ? { atLeast } : {}) };
    const copy = volumeCopy(e);
    const scope = copy && e.action !== "delete" ? waitingClaimsScope(copy, e.action) : undefined;
    if (!copy || !scope) return [key];
    // Which claims to nudge is a hint (each claim's own sync reads what it decides on), and a claim the
    // copy has not seen yet brings its own event: the watched copy stands in for a list when there is one.
    const claims =
      o.claimCache?.synced === true
        ? o.claimCache.store
            .items()
            .filter((c) => !scope.namespace || (c.metadata.namespace ?? "") === scope.namespace)
        : (
            await kube.list<PersistentVolumeClaim>(
              persistentVolumeClaims,
              scope.namespace ? { namespace: scope.namespace } : {},
            )
          ).items;
    let picked: PersistentVolumeClaim[];
    try {
      picked = waitingClaimsFor(copy, claims);
    } catch {
      // A copy with malformed fields only loses the shortcut; the volume's own sync reads the truth.
      return [key];
    }
    // The volume event's revision: a claim copy past it may stand in for the claim, the volume copy for the candidate.
    const waiting = picked.map(
      (c): BinderKey => ({
        kind: "claim",
        namespace: c.metadata.namespace ?? "",
        name: c.metadata.name,
        candidate: e.name,
        ...(atLeast ? { atLeast, atLeastOfVolume: true as const } : {}),
      }),
    );
    return [key, ...waiting];
  }

  return {
    keyId,
    async keysOf(e) {
      if (e.apiVersion !== "v1") return [];
      if (e.kind === "PersistentVolumeClaim") {
        if (e.action === "delete") return claimDeleted(e);
        const key = { namespace: e.namespace ?? "", name: e.name };
        if (supersededByCopy(o.claimCache, e.object)) {
          const object = `claim ${key.namespace}/${key.name}`;
          return { reports: [{ object, outcome: SUPERSEDED, writes: 0, events: 0, attempts: 0 }] };
        }
        const atLeast = revisionOf(e.object);
        if (o.volumeCache?.synced && isBoundCopy(e.object))
          await caughtUp(o.volumeCache.store, atLeast, false);
        if (boundClaimNeedsNothing(key, e.object, o.volumeCache, now())) {
          const object = `claim ${key.namespace}/${key.name}`;
          const outcome = "already bound (event copy, watched volume)";
          return { reports: [{ object, outcome, writes: 0, events: 0, attempts: 0 }] };
        }
        return [{ kind: "claim", ...key, ...(atLeast ? { atLeast } : {}) }];
      }
      if (e.kind === "PersistentVolume") {
        if (e.action === "delete") return volumeDeleted(e);
        if (supersededByCopy(o.volumeCache, e.object)) {
          return {
            reports: [{ object: `volume ${e.name}`, outcome: SUPERSEDED, writes: 0, events: 0, attempts: 0 }],
          };
        }
        if (o.claimCache?.synced && isBoundCopy(e.object))
          await caughtUp(o.claimCache.store, revisionOf(e.object), false);
        if (boundVolumeNeedsNothing(e.name, e.object, o.claimCache, now())) {
          const outcome = "already bound (event copy, watched claim)";
          return { reports: [{ object: `volume ${e.name}`, outcome, writes: 0, events: 0, attempts: 0 }] };
        }
        return volumeChanged(e);
      }
      return [];
    },
    async load(key, { attempt }) {
      // A later attempt follows a lost race: the copies were behind, read the API.
      const first = attempt === 1;
      if (key.kind === "claim") {
        const copied = first
          ? await copyAtLeast<PersistentVolumeClaim>(
              o.claimCache,
              key.namespace,
              key.name,
              key.atLeast,
              !key.atLeastOfVolume,
            )
          : undefined;
        const claim = copied ? copied.found : await readClaim(kube, key.namespace, key.name);
        if (!claim) return undefined;
        const classes = o.storageClasses?.();
        // A nudged claim's candidate may come from the volume copy once it has reached the volume's event.
        const candidate = key.candidate
          ? { name: key.candidate, ...(first && key.atLeastOfVolume ? { atLeast: key.atLeast } : {}) }
          : undefined;
        const view = await loadClaimView(kube, claim, now(), {
          candidate,
          cache: o.volumeCache,
          classCopy: classes,
          picks,
          pickFromCopy: first,
        });
        return { kind: "claim", claim, view };
      }
      const copiedVolume = first
        ? await copyAtLeast<PersistentVolume>(o.volumeCache, "", key.name, key.atLeast)
        : undefined;
      const volume = copiedVolume ? copiedVolume.found : await readVolume(kube, key.name);
      if (!volume) return undefined;
      return {
        kind: "volume",
        volume,
        // The claim copy stands in only once it has reached the event that named the volume.
        view: await loadVolumeView(
          kube,
          volume,
          now(),
          first && key.atLeast ? { cache: o.claimCache, atLeast: key.atLeast } : undefined,
        ),
      };
    },
    absent: (key) => (key.kind === "claim" ? "claim is gone" : "volume is gone"),
    decide: (s) =>
      s.kind === "claim"
        ? instruments.decided(
            { kind: "claim", claim: s.claim, volumes: s.view.volumes, classes: s.view.classes },
            syncClaim(s.claim, s.view),
          )
        : instruments.decided({ kind: "volume", volume: s.volume }, syncVolume(s.volume, s.view)),
    executors: instruments.executors(
      binderExecutors(kube, o.events, {
        volume: (v) => o.volumeCache?.store.learn(v),
        claim: (c) => o.claimCache?.store.learn(c),
      }),
    ),
    // A claim may be synced again after its volume's sync (the volume's writes change what it sees).
    repeatable: (key) => key.kind === "claim",
    // A volume's claim (a provisioned volume's, say) inherits the volume event's revision: copies past it may answer.
    async followUpKeys(f, from) {
      if (f.kind !== "claim" || from.kind !== "volume" || !from.atLeast) return [f];
      return [{ ...f, atLeast: from.atLeast, atLeastOfVolume: true }];
    },
    report,
    /** The periodic pass that repairs lost events: every claim, then every volume. */
    async resyncKeys() {
      const [claims, volumes] = await Promise.all([
        kube.list<PersistentVolumeClaim>(persistentVolumeClaims),
        kube.list<PersistentVolume>(persistentVolumes),
      ]);
      const claimKeys = claims.items.map(
        (c): BinderKey => ({ kind: "claim", namespace: c.metadata.namespace ?? "", name: c.metadata.name }),
      );
      const volumeKeys = volumes.items.map((v): BinderKey => ({ kind: "volume", name: v.metadata.name }));
      // The pass repairs what events missed, so its decisions may not rest on copies older than its own
      // lists: a copy past a claim's revision but behind a volume freed since would keep the claim Pending.
      if (o.volumeCache?.synced) o.volumeCache.store.replaceWithList(volumes.items, volumes.resourceVersion);
      if (o.claimCache?.synced) o.claimCache.store.replaceWithList(claims.items, claims.resourceVersion);
      // The pv_collector gauges: upstream counts its informer caches at each scrape; we count these lists.
      instruments.inventory(claims.items, volumes.items);
      return {
        waves: [claimKeys, volumeKeys],
        counts: { claims: claims.items.length, volumes: volumes.items.length },
      };
    },
  };
}

/** The event's copy of a volume when it has the shape the follow-up choice reads; else none. */
function volumeCopy(e: BinderEvent): PersistentVolume | undefined {
  const o = e.object;
  if (!o || typeof o !== "object") return undefined;
  const metadata = o.metadata as { name?: unknown } | undefined;
  const spec = o.spec;
  if (!metadata || typeof metadata !== "object" || metadata.name !== e.name) return undefined;
  if (!spec || typeof spec !== "object" || Array.isArray(spec)) return undefined;
  return o as unknown as PersistentVolume;
}

export class BinderController extends ControllerRuntime<
  BinderKey,
  BinderState,
  PlanStep,
  FollowUp,
  never,
  SyncReport
> {
  private readonly kube: KubeJsonClient;
  private readonly now: () => Date;

  constructor(options: BinderControllerOptions) {
    super(binderSpec(options), {
      maxAttempts: options.maxAttempts ?? 5,
      maxFollowUps: options.maxFollowUps ?? 4,
      resyncConcurrency: options.resyncConcurrency ?? 8,
      workers: options.workers,
    });
    this.kube = options.kube;
    this.now = options.now ?? (() => new Date());
  }

  /** `candidate`: a PV known to point at the claim, which may make listing every PV unnecessary. */
  syncClaimByKey(namespace: string, name: string, candidate?: string): Promise<SyncReport> {
    return this.sync({ kind: "claim", namespace, name, ...(candidate ? { candidate } : {}) });
  }

  syncVolumeByName(name: string): Promise<SyncReport> {
    return this.sync({ kind: "volume", name });
  }

  /** Why a claim is (still) Pending; undefined when the claim does not exist. */
  async explain(namespace: string, name: string): Promise<ClaimExplanation | undefined> {
    const claim = await readClaim(this.kube, namespace, name);
    if (!claim) return undefined;
    // Explain looks at every volume, whatever the claim's state.
    const [view, all] = await Promise.all([
      loadClaimView(this.kube, claim, rfc3339(this.now())),
      this.kube.list<PersistentVolume>(persistentVolumes),
    ]);
    return explainClaim(claim, {
      ...view,
      volumes: view.volumes.length >= all.items.length ? view.volumes : all.items,
    });
  }
}
