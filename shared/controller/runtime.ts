// The runtime every controller function stands on: event → keys → one sync
// at a time per key → load → pure decide → execute the plan's steps →
// follow-ups; a lost write race (409, or 404 on an object that went) loads
// and decides again, bounded; the resync pass runs every key through a
// bounded pool. A controller contributes a ControllerSpec; see index.ts.
import type { Controller, ControllerEvent } from "../http/controller-function.ts";
import { KeyedSerializer } from "../keyed-serializer.ts";
import { retryWhileLosingRaces } from "../kube/optimistic-update.ts";
import type { RetryOptions } from "../retry.ts";
import type { Executors, Plan, Step } from "./plan.ts";
import { runPlan } from "./run-plan.ts";
import { forEachBounded, SyncSlots } from "./worker-pool.ts";

/** What one sync of one key did; a controller's `report` shapes it for its answers. */
export interface SyncResult {
  /** The key's id ("claim ns/name", a node name…). */
  id: string;
  outcome: string;
  writes: number;
  events: number;
  /** Attempts the sync took (1 unless writes lost races). */
  attempts: number;
  error?: string;
}

export interface LoadContext<C, S = unknown> {
  /** 1 on the first try; a later attempt follows a lost race and must read afresh (hints are stale). */
  attempt: number;
  /** 1 for the first decision of this attempt; more when plans asked to decide `again`. */
  round: number;
  /** What the previous round's executors carried forward. */
  carried: readonly C[];
  /** The state the previous round of this attempt decided on (round > 1): what a protocol builds on without reading it again. */
  previous?: S;
}

/** An event's answer without a sync (not this controller's kind, or the event's copy needs nothing). */
export interface Answered<R> {
  reports: R[];
}

/** What the resync pass syncs: waves run one after the other, each through the bounded pool. */
export interface ResyncKeys<K> {
  waves: readonly (readonly K[])[];
  /** Counts reported before `writes` and `errors` ({claims, volumes} or {nodes}). */
  counts: Record<string, number>;
}

export interface ControllerSpec<K, S, P extends Step, F = K, C = never, R extends object = SyncResult> {
  /** Identity of a key: one sync per id at a time in this process; follow-ups deduplicate on it. */
  keyId(key: K): string;
  /** The keys an event touches (may read), or an answer that needs no sync. */
  keysOf(e: ControllerEvent): Promise<K[] | Answered<R>>;
  /** The current state a decision needs, fresh from the API; undefined: the object is gone. */
  load(key: K, ctx: LoadContext<C, S>): Promise<S | undefined>;
  /** The outcome reported when load finds nothing. */
  absent(key: K): string;
  /** Pure: state in, plan out. */
  decide(state: S, key: K): Plan<P, F>;
  executors: Executors<P, K, C>;
  /** The keys a follow-up names (may read); default: the follow-up is a key. */
  followUpKeys?(f: F, from: K): Promise<K[]>;
  /** Whether a key already synced by this event may be synced again as a follow-up. Default no. */
  repeatable?(key: K): boolean;
  /**
   * An outcome when the key needs no sync after all, asked once its turn has
   * come (after the syncs of the same key before it): e.g. an event's copy
   * that this process has since written past. Undefined: sync as usual.
   */
  skip?(key: K): string | undefined;
  report(result: SyncResult, key: K): R;
  resyncKeys(): Promise<ResyncKeys<K>>;
}

export interface RuntimeOptions extends RetryOptions {
  /** Attempts of one sync while its writes lose races. Default 5. */
  maxAttempts?: number;
  /** Follow-up syncs one key may cause (a skipped repeat counts). Default 16. */
  maxFollowUps?: number;
  /** How many generations of follow-ups are followed. Default unbounded. */
  followUpDepth?: number;
  /** Keys a resync syncs at once (never more than `workers`). Default 4. */
  resyncConcurrency?: number;
  /**
   * Keys this runtime syncs at once, events and resync together (upstream's
   * --worker-threads / --workers); more wait their turn. Default: no cap.
   */
  workers?: number | undefined;
  /** Decisions one sync may chain with `again`. Default 16. */
  maxRounds?: number;
}

export interface ResyncReport {
  writes: number;
  errors: string[];
  [count: string]: number | string[];
}

interface Synced<F> extends SyncResult {
  followUps: F[];
}

/** The spec a runtime (or a controller class built on one) is made from, so its type arguments are written once. */
export type SpecOf<T> =
  T extends ControllerRuntime<infer K, infer S, infer P, infer F, infer C, infer R>
    ? ControllerSpec<K, S, P, F, C, R>
    : never;

export class ControllerRuntime<K, S, P extends Step, F = K, C = never, R extends object = SyncResult>
  implements Controller
{
  private readonly spec: ControllerSpec<K, S, P, F, C, R>;
  private readonly options: RuntimeOptions;
  private readonly serializer = new KeyedSerializer();
  private readonly slots: SyncSlots | undefined;

  constructor(spec: ControllerSpec<K, S, P, F, C, R>, options: RuntimeOptions = {}) {
    this.spec = spec;
    this.options = options;
    this.slots = options.workers === undefined ? undefined : new SyncSlots(options.workers);
  }

  async handleEvent(e: ControllerEvent): Promise<R[]> {
    const routed = await this.spec.keysOf(e);
    if (!Array.isArray(routed)) return routed.reports;
    const reports: R[] = [];
    for (const key of routed) reports.push(...(await this.syncWithFollowUps(key)).map((r) => r.report));
    return reports;
  }

  /** One key alone, no follow-ups: load → decide → execute, again on a lost race. */
  async sync(key: K): Promise<R> {
    return this.spec.report(strip(await this.syncKey(key)), key);
  }

  /** One key, then the follow-ups its plans named (bounded, deduplicated). */
  async syncWithFollowUps(first: K): Promise<{ result: SyncResult; report: R }[]> {
    const { spec } = this;
    const head = await this.syncKey(first);
    const out = [{ result: strip(head), report: spec.report(strip(head), first) }];
    const seen = new Set([head.id]);
    const depthLimit = this.options.followUpDepth ?? Number.POSITIVE_INFINITY;
    const queue: { key: K; depth: number }[] = [];
    const enqueue = async (followUps: readonly F[], from: K, depth: number): Promise<void> => {
      if (depth > depthLimit) return;
      for (const f of followUps)
        for (const key of spec.followUpKeys ? await spec.followUpKeys(f, from) : [f as unknown as K])
          queue.push({ key, depth });
    };
    await enqueue(head.followUps, first, 1);
    let budget = this.options.maxFollowUps ?? 16;
    while (queue.length > 0 && budget-- > 0) {
      const { key, depth } = queue.shift() as { key: K; depth: number };
      const id = spec.keyId(key);
      if (seen.has(id) && !spec.repeatable?.(key)) continue;
      seen.add(id);
      const next = await this.syncKey(key);
      out.push({ result: strip(next), report: spec.report(strip(next), key) });
      await enqueue(next.followUps, key, depth + 1);
    }
    return out;
  }

  /** The periodic pass that repairs lost events. */
  async resync(): Promise<ResyncReport> {
    const { waves, counts } = await this.spec.resyncKeys();
    let writes = 0;
    const errors: string[] = [];
    const pool = Math.min(
      this.options.resyncConcurrency ?? 4,
      this.options.workers ?? Number.POSITIVE_INFINITY,
    );
    for (const wave of waves) {
      await forEachBounded(wave, pool, async (key) => {
        try {
          for (const { result } of await this.syncWithFollowUps(key)) {
            writes += result.writes;
            if (result.error !== undefined) errors.push(`${result.id}: ${result.error}`);
          }
        } catch (err) {
          errors.push(`${this.spec.keyId(key)}: ${err instanceof Error ? err.message : String(err)}`);
        }
      });
    }
    return { ...counts, writes, errors };
  }

  private syncKey(key: K): Promise<Synced<F>> {
    const id = this.spec.keyId(key);
    const { maxAttempts = 5, baseDelayMs, maxDelayMs, sleep, random } = this.options;
    const retry = definedOnly({ maxAttempts, baseDelayMs, maxDelayMs, sleep, random });
    const sync = () => retryWhileLosingRaces((attempt) => this.syncOnce(key, id, attempt), retry);
    // The key's turn first, then a worker slot: a key waiting behind itself holds no slot.
    return this.serializer.run(id, () => {
      const skipped = this.spec.skip?.(key);
      if (skipped !== undefined)
        return Promise.resolve({ id, outcome: skipped, writes: 0, events: 0, attempts: 0, followUps: [] });
      return this.slots ? this.slots.run(sync) : sync();
    });
  }

  private async syncOnce(key: K, id: string, attempt: number): Promise<Synced<F>> {
    const { spec } = this;
    const maxRounds = this.options.maxRounds ?? 16;
    const followUps: F[] = [];
    let writes = 0;
    let events = 0;
    let carried: C[] = [];
    let previous: S | undefined;
    for (let round = 1; ; round++) {
      const context = { attempt, round, carried, ...(previous !== undefined ? { previous } : {}) };
      const state = await spec.load(key, context);
      if (state === undefined)
        return { id, outcome: spec.absent(key), writes, events, attempts: attempt, followUps };
      const plan = spec.decide(state, key);
      const done = await runPlan(plan.steps, spec.executors, key);
      writes += done.writes;
      events += done.events;
      followUps.push(...(plan.followUps ?? []));
      const result = { id, outcome: plan.outcome, writes, events, attempts: attempt, followUps };
      if (plan.error !== undefined) return { ...result, error: plan.error };
      if (!plan.again || round >= maxRounds) return result;
      carried = done.carried;
      previous = state;
    }
  }
}

/** Leaves out unset options, so the retry loop's own defaults apply. */
function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

function strip<F>(r: Synced<F>): SyncResult {
  const { followUps: _followUps, ...result } = r;
  return result;
}
