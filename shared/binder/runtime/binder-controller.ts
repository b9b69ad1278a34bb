import type { ControllerEvent } from "../../http/controller-function.ts";
import { KeyedSerializer } from "../../keyed-serializer.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import { retryWhileLosingRaces } from "../../kube/optimistic-update.ts";
import { persistentVolumeClaims, persistentVolumes } from "../../kube/resources.ts";
import type { StorageClassCopy } from "../../kube/storage-class-copy.ts";
import type { PersistentVolume, PersistentVolumeClaim } from "../../kube/types.ts";
import { type ClaimExplanation, explainClaim } from "../explain.ts";
import type { FollowUp, SyncPlan } from "../plan.ts";
import { syncClaim } from "../sync-claim.ts";
import { syncVolume } from "../sync-volume.ts";
import { boundClaimNeedsNothing } from "./bound-claim-check.ts";
import { type EventSink, executePlan } from "./execute-plan.ts";
import { loadClaimView, loadVolumeView, readClaim, readVolume, type VolumeCache } from "./load-views.ts";

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
  /** A watched copy of the volumes that spares most claim syncs a list of every PV (load-views.ts). */
  volumeCache?: VolumeCache;
  /** A watched copy of the StorageClasses, started on first use (shared/kube/storage-class-copy.ts); none: GET each. */
  storageClasses?: () => StorageClassCopy;
  /** CSI drivers our provisioner serves: their released static volumes are left to it (PROVISIONER_DRIVERS). */
  staticVolumeDeleters?: ReadonlySet<string>;
}

function rfc3339(d: Date): string {
  return d.toISOString().replace(/\.\d{3}Z$/, "Z");
}

export class BinderController {
  private readonly kube: KubeJsonClient;
  private readonly events: EventSink;
  private readonly now: () => Date;
  private readonly maxAttempts: number;
  private readonly maxFollowUps: number;
  private readonly resyncConcurrency: number;
  private readonly volumeCache: VolumeCache | undefined;
  private readonly storageClasses: (() => StorageClassCopy) | undefined;
  private readonly staticVolumeDeleters: ReadonlySet<string>;
  private readonly serializer = new KeyedSerializer();

  constructor(options: BinderControllerOptions) {
    this.kube = options.kube;
    this.events = options.events;
    this.now = options.now ?? (() => new Date());
    this.maxAttempts = options.maxAttempts ?? 5;
    this.maxFollowUps = options.maxFollowUps ?? 4;
    this.resyncConcurrency = options.resyncConcurrency ?? 8;
    this.volumeCache = options.volumeCache;
    this.storageClasses = options.storageClasses;
    this.staticVolumeDeleters = options.staticVolumeDeleters ?? new Set();
  }

  /** Handles one claim or volume event; other kinds are not the binder's. */
  async handleEvent(e: BinderEvent): Promise<SyncReport[]> {
    if (e.apiVersion !== "v1") return [];
    if (e.kind === "PersistentVolumeClaim") {
      if (e.action === "delete") return this.claimDeleted(e);
      const key = { namespace: e.namespace ?? "", name: e.name };
      if (boundClaimNeedsNothing(key, e.object, this.volumeCache, rfc3339(this.now()))) {
        const object = `claim ${key.namespace}/${key.name}`;
        return [
          {
            object,
            outcome: "already bound (event copy, watched volume)",
            writes: 0,
            events: 0,
            attempts: 0,
          },
        ];
      }
      return this.withFollowUps(await this.syncClaimByKey(e.namespace ?? "", e.name));
    }
    if (e.kind === "PersistentVolume") {
      if (e.action === "delete") return this.volumeDeleted(e);
      return this.withFollowUps(await this.syncVolumeByName(e.name));
    }
    return [];
  }

  /** A deleted claim releases its volume: sync the volume it named (or, without the object, every volume pointing at it). */
  private async claimDeleted(e: BinderEvent): Promise<SyncReport[]> {
    const current = await readClaim(this.kube, e.namespace ?? "", e.name);
    if (current) return this.withFollowUps(await this.syncClaimByKey(e.namespace ?? "", e.name));
    const spec = e.object?.spec as { volumeName?: unknown } | undefined;
    const names: string[] = [];
    if (typeof spec?.volumeName === "string" && spec.volumeName) names.push(spec.volumeName);
    else {
      const all = await this.kube.list<PersistentVolume>(persistentVolumes);
      for (const v of all.items) {
        const ref = v.spec.claimRef;
        if (ref?.namespace === e.namespace && ref?.name === e.name) names.push(v.metadata.name);
      }
    }
    const reports: SyncReport[] = [];
    for (const name of names) reports.push(...(await this.withFollowUps(await this.syncVolumeByName(name))));
    return reports;
  }

  /** A deleted volume may leave a bound claim Lost: sync the claim it pointed at. */
  private async volumeDeleted(e: BinderEvent): Promise<SyncReport[]> {
    const current = await readVolume(this.kube, e.name);
    if (current) return this.withFollowUps(await this.syncVolumeByName(e.name));
    const spec = e.object?.spec as { claimRef?: { namespace?: unknown; name?: unknown } } | undefined;
    const ref = spec?.claimRef;
    if (typeof ref?.name !== "string" || typeof ref.namespace !== "string") return [];
    return this.withFollowUps(await this.syncClaimByKey(ref.namespace, ref.name));
  }

  private async withFollowUps(first: SyncReport & { followUps?: FollowUp[] }): Promise<SyncReport[]> {
    const reports: SyncReport[] = [strip(first)];
    const queue = [...(first.followUps ?? [])];
    const seen = new Set<string>([first.object]);
    let budget = this.maxFollowUps;
    while (queue.length > 0 && budget-- > 0) {
      const f = queue.shift()!;
      const key = f.kind === "claim" ? `claim ${f.namespace}/${f.name}` : `volume ${f.name}`;
      if (seen.has(key) && f.kind === "volume") continue;
      seen.add(key);
      const r =
        f.kind === "claim"
          ? await this.syncClaimByKey(f.namespace, f.name, f.candidate)
          : await this.syncVolumeByName(f.name);
      reports.push(strip(r));
      queue.push(...(r.followUps ?? []));
    }
    return reports;
  }

  /** `candidate`: a PV known to point at the claim, which may make listing every PV unnecessary. */
  async syncClaimByKey(
    namespace: string,
    name: string,
    candidate?: string,
  ): Promise<SyncReport & { followUps?: FollowUp[] }> {
    return this.retryOnConflict(`claim ${namespace}/${name}`, async () => {
      const claim = await readClaim(this.kube, namespace, name);
      if (!claim) return { plan: undefined, outcome: "claim is gone" };
      const view = await loadClaimView(
        this.kube,
        claim,
        rfc3339(this.now()),
        candidate,
        this.volumeCache,
        this.storageClasses?.(),
      );
      return { plan: syncClaim(claim, view) };
    });
  }

  async syncVolumeByName(
    name: string,
    _hint?: Record<string, unknown>,
  ): Promise<SyncReport & { followUps?: FollowUp[] }> {
    return this.retryOnConflict(`volume ${name}`, async () => {
      const volume = await readVolume(this.kube, name);
      if (!volume) return { plan: undefined, outcome: "volume is gone" };
      const view = await loadVolumeView(this.kube, volume, rfc3339(this.now()), this.staticVolumeDeleters);
      return { plan: syncVolume(volume, view) };
    });
  }

  /**
   * Read → decide → write; a conflict means someone else moved first: decide again on fresh state.
   * Syncs of one object in this process wait for each other (a claim's own event and a follow-up
   * from its volume's event would otherwise race to a 409).
   */
  private retryOnConflict(
    object: string,
    decide: () => Promise<{ plan: SyncPlan | undefined; outcome?: string }>,
  ): Promise<SyncReport & { followUps?: FollowUp[] }> {
    return this.serializer.run(object, () => this.syncOnce(object, decide));
  }

  private syncOnce(
    object: string,
    decide: () => Promise<{ plan: SyncPlan | undefined; outcome?: string }>,
  ): Promise<SyncReport & { followUps?: FollowUp[] }> {
    return retryWhileLosingRaces(
      async (attempt) => {
        const { plan, outcome } = await decide();
        if (!plan)
          return { object, outcome: outcome ?? "nothing to do", writes: 0, events: 0, attempts: attempt };
        const done = await executePlan(this.kube, this.events, plan);
        return {
          object,
          outcome: plan.outcome,
          writes: done.writes,
          events: done.events,
          attempts: attempt,
          followUps: plan.followUps,
          ...(plan.error !== undefined ? { error: plan.error } : {}),
        };
      },
      { maxAttempts: this.maxAttempts },
    );
  }

  /** The periodic pass that repairs lost events: every claim, then every volume. */
  async resync(): Promise<{ claims: number; volumes: number; writes: number; errors: string[] }> {
    const [claims, volumes] = await Promise.all([
      this.kube.list<PersistentVolumeClaim>(persistentVolumeClaims),
      this.kube.list<PersistentVolume>(persistentVolumes),
    ]);
    let writes = 0;
    const errors: string[] = [];
    const run = async (work: (() => Promise<SyncReport[]>)[]): Promise<void> => {
      let next = 0;
      const worker = async (): Promise<void> => {
        while (next < work.length) {
          const job = work[next++]!;
          try {
            for (const r of await job()) {
              writes += r.writes;
              if (r.error) errors.push(`${r.object}: ${r.error}`);
            }
          } catch (err) {
            errors.push(err instanceof Error ? err.message : String(err));
          }
        }
      };
      await Promise.all(Array.from({ length: Math.min(this.resyncConcurrency, work.length) }, worker));
    };
    await run(
      claims.items.map(
        (c) => () =>
          this.syncClaimByKey(c.metadata.namespace ?? "", c.metadata.name).then((r) => this.withFollowUps(r)),
      ),
    );
    await run(
      volumes.items.map(
        (v) => () => this.syncVolumeByName(v.metadata.name).then((r) => this.withFollowUps(r)),
      ),
    );
    return { claims: claims.items.length, volumes: volumes.items.length, writes, errors };
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

function strip(r: SyncReport & { followUps?: FollowUp[] }): SyncReport {
  const { followUps: _ignored, ...report } = r;
  return report;
}
