// Figures 3, 4 and 6: provisioning throughput, API writes per provisioned and
// bound claim, and peak RSS of each function process, from one run: N claims
// (no class: the default class, the sandbox driver, Immediate) created at
// once against the system shape of `npm start` (bench/system.ts), time until
// the API server has stored every one Bound.
//
// Writes come from the sandbox API server's counters (requests per verb and
// resource), reset once the system is up; the bench's own N claim creates
// are taken out. Object writes and Event writes are counted apart, and after
// the last Bound the run waits for the counters to go quiet so that trailing
// writes (finalizer removal, Events) are counted too.

import type { KubeObject } from "../sandbox/apiserver/store.ts";
import type { Sandbox } from "../sandbox/start.ts";
import { persistentVolumeClaims } from "../shared/kube/resources.ts";
import {
  atLeast,
  atMost,
  claim,
  counters,
  progress,
  round,
  sleep,
  storageClass,
  type Target,
  trackBoundClaims,
} from "./support.ts";
import { type ForwarderTotals, startSystem } from "./system.ts";

export const THROUGHPUT_TARGET_PER_SECOND = 100;
export const OBJECT_WRITES_TARGET = 4;
export const EVENT_WRITES_TARGET = 1;
export const PEAK_RSS_TARGET_MIB = 128;

export interface ProvisioningOptions {
  /** Claims created at once. Default 1000. */
  claims?: number;
  /** Admission webhooks registered (HTTPS) or not. */
  admission: boolean;
  /** Give up waiting for Bound after this long. Default 60 s (keeps `npm run bench` under 5 minutes). */
  timeoutMs?: number;
}

export interface WriteFigures {
  /** Object writes (create/update/patch/delete of anything but Events) per claim. */
  objectWritesPerClaim: Target;
  eventWritesPerClaim: Target;
  /** Every write verb/resource, per claim (e.g. "update persistentvolumeclaims": 1). */
  writesPerClaimByVerb: Record<string, number>;
  /** Reads and watches, per claim, for context. */
  readsPerClaimByVerb: Record<string, number>;
  /**
   * Changes the API server stored, per claim ("MODIFIED persistentvolumeclaims"):
   * write requests minus the refused ones (409 Conflict and other errors).
   */
  storedChangesPerClaim: Record<string, number>;
  /** Event objects written, per claim, by reason (created or aggregated). */
  eventsPerClaimByReason: Record<string, number>;
  /** Stored claim and volume updates, per claim, by what they changed (annotations, finalizers, spec, status). */
  updatesPerClaimByChange: Record<string, number>;
}

export interface ProvisioningResult {
  admission: boolean;
  claims: number;
  bound: number;
  /** True when not every claim was Bound within the timeout; throughput is then Bound claims per second waited. */
  timedOut: boolean;
  createSeconds: number;
  secondsUntilAllBound: number;
  throughput: Target;
  writes: WriteFigures;
  peakRssMiB: Record<string, Target>;
  /** RSS of each function once started, before the claims: what the load added is peak minus this. */
  idleRssMiB: Record<string, number>;
  forwarder: ForwarderTotals;
  webhookFailuresIgnored: number;
}

const WRITE_VERBS = ["create", "update", "patch", "delete", "deletecollection"];

interface ChangeCounts {
  stored: Map<string, number>;
  eventReasons: Map<string, number>;
  updates: Map<string, number>;
  close(): void;
}

const lastSegment = (key: string): string => key.slice(key.lastIndexOf("/") + 1);

/** What an update changed, e.g. "pvc: +ann bind-completed, -fin provisioning, spec". */
function changeSignature(kind: string, before: KubeObject, after: KubeObject): string {
  const parts: string[] = [];
  const annBefore = before.metadata.annotations ?? {};
  const annAfter = after.metadata.annotations ?? {};
  for (const k of new Set([...Object.keys(annBefore), ...Object.keys(annAfter)])) {
    if (!(k in annBefore)) parts.push(`+ann ${lastSegment(k)}`);
    else if (!(k in annAfter)) parts.push(`-ann ${lastSegment(k)}`);
    else if (annBefore[k] !== annAfter[k]) parts.push(`~ann ${lastSegment(k)}`);
  }
  const finBefore = before.metadata.finalizers ?? [];
  const finAfter = after.metadata.finalizers ?? [];
  for (const f of finAfter) if (!finBefore.includes(f)) parts.push(`+fin ${lastSegment(f)}`);
  for (const f of finBefore) if (!finAfter.includes(f)) parts.push(`-fin ${lastSegment(f)}`);
  if (JSON.stringify(before.spec) !== JSON.stringify(after.spec)) parts.push("spec");
  const phaseBefore = (before.status as { phase?: string } | undefined)?.phase;
  const phaseAfter = (after.status as { phase?: string } | undefined)?.phase;
  if (phaseBefore !== phaseAfter) parts.push(`phase ${phaseAfter ?? "-"}`);
  else if (JSON.stringify(before.status) !== JSON.stringify(after.status)) parts.push("status");
  return `${kind}: ${parts.length > 0 ? parts.join(", ") : "metadata only"}`;
}

/** Counts what the API server actually stored, from its change feed (in-process, free). */
function countStoredChanges(sandbox: Sandbox): ChangeCounts {
  const stored = new Map<string, number>();
  const eventReasons = new Map<string, number>();
  const updates = new Map<string, number>();
  const kinds: Record<string, string> = { persistentvolumeclaims: "pvc", persistentvolumes: "pv" };
  const close = sandbox.apiServer.store.subscribe((change) => {
    const kind = kinds[change.resource.plural];
    if (kind && change.type === "MODIFIED" && change.previous) {
      const sig = changeSignature(kind, change.previous, change.object);
      updates.set(sig, (updates.get(sig) ?? 0) + 1);
    }
    const key = `${change.type} ${change.resource.plural}`;
    stored.set(key, (stored.get(key) ?? 0) + 1);
    if (change.resource.plural === "events" && change.type !== "DELETED") {
      const reason = String(change.object.reason ?? "");
      eventReasons.set(reason, (eventReasons.get(reason) ?? 0) + 1);
    }
  });
  return { stored, eventReasons, updates, close };
}

function perClaim(
  counts: Map<string, number>,
  claims: number,
  own: Record<string, number> = {},
): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [key, count] of [...counts].sort()) {
    const n = count - (own[key] ?? 0);
    if (n > 0) out[key] = round(n / claims, 2);
  }
  return out;
}

function writeFigures(
  raw: Record<string, number>,
  claims: number,
  ownCreates: number,
  changes: ChangeCounts,
): WriteFigures {
  const writes: Record<string, number> = {};
  const reads: Record<string, number> = {};
  let objects = 0;
  let events = 0;
  for (const [key, count] of Object.entries(raw).sort()) {
    const [verb = "", resource = ""] = key.split(" ");
    const n = key === "create persistentvolumeclaims" ? count - ownCreates : count;
    if (n <= 0) continue;
    if (!WRITE_VERBS.includes(verb) || resource === "tokenreviews") {
      reads[key] = round(n / claims, 2);
      continue;
    }
    writes[key] = round(n / claims, 2);
    if (resource === "events") events += n;
    else objects += n;
  }
  return {
    objectWritesPerClaim: atMost(round(objects / claims, 2), OBJECT_WRITES_TARGET),
    eventWritesPerClaim: atMost(round(events / claims, 2), EVENT_WRITES_TARGET),
    writesPerClaimByVerb: writes,
    readsPerClaimByVerb: reads,
    storedChangesPerClaim: perClaim(changes.stored, claims, { "ADDED persistentvolumeclaims": ownCreates }),
    eventsPerClaimByReason: perClaim(changes.eventReasons, claims),
    updatesPerClaimByChange: perClaim(changes.updates, claims),
  };
}

/** Webhook calls the sandbox gave up on under failurePolicy Ignore (it keeps the last 100). */
async function ignoredWebhookFailures(apiServerUrl: string): Promise<number> {
  const res = await fetch(`${apiServerUrl}/_sandbox/admission`);
  const body = (await res.json()) as { ignoredFailures?: unknown[] };
  return body.ignoredFailures?.length ?? 0;
}

/** Waits until the counters stop moving for `quietMs` (at most `maxMs`). */
async function quiet(read: () => Record<string, number>, quietMs: number, maxMs: number): Promise<void> {
  const deadline = performance.now() + maxMs;
  let last = JSON.stringify(read());
  let since = performance.now();
  while (performance.now() < deadline) {
    await sleep(100);
    const now = JSON.stringify(read());
    if (now !== last) {
      last = now;
      since = performance.now();
    } else if (performance.now() - since >= quietMs) return;
  }
}

export async function runProvisioning(options: ProvisioningOptions): Promise<ProvisioningResult> {
  const n = Math.max(1, Math.min(options.claims ?? 1000, 100_000));
  const timeoutMs = Math.max(1000, Math.min(options.timeoutMs ?? 60_000, 600_000));
  const label = options.admission ? "with admission" : "without admission";
  progress(`provisioning ${label}: starting the system`);
  const system = await startSystem({
    controllers: ["binder", "provisioner"],
    admission: options.admission,
    before: (bs) => void bs.sandbox.apiServer.registry.seed(storageClass("standard")),
  });
  const { sandbox } = system.bs;
  const tracker = trackBoundClaims(sandbox);
  let changes: ChangeCounts | undefined;
  try {
    sandbox.apiServer.counters.clear();
    changes = countStoredChanges(sandbox);
    const names = Array.from({ length: n }, (_, i) => `claim-${String(i).padStart(5, "0")}`);
    progress(`provisioning ${label}: creating ${n} claims at once`);
    const t0 = performance.now();
    const created = await Promise.allSettled(
      names.map((name) => system.kube.create(persistentVolumeClaims, claim(name))),
    );
    const createSeconds = (performance.now() - t0) / 1000;
    const failed = created.filter((c) => c.status === "rejected");
    if (failed.length > 0) {
      const first = failed[0] as PromiseRejectedResult;
      throw new Error(`${failed.length} of ${n} claim creates failed, e.g. ${String(first.reason)}`);
    }
    let timedOut = false;
    await tracker.waitFor(names, timeoutMs).catch((err: unknown) => {
      timedOut = true;
      progress(`provisioning ${label}: ${err instanceof Error ? err.message : String(err)}`);
    });
    const lastBound = Math.max(...names.map((name) => tracker.boundAt.get(name) ?? Number.NaN));
    const bound = names.filter((name) => tracker.boundAt.has(name)).length;
    // A run that timed out still says how far it got: claims Bound per second of the wait.
    const seconds = timedOut ? timeoutMs / 1000 : (lastBound - t0) / 1000;
    const perSecond = round((timedOut ? bound : n) / seconds, 1);
    progress(
      `provisioning ${label}: ${bound}/${n} Bound in ${round(seconds, 2)} s (${perSecond}/s); settling`,
    );
    // After a timeout the system is still busy: count what it wrote so far, do not wait for it.
    await quiet(() => counters(sandbox), 1000, timedOut ? 2000 : 15_000);
    // Per claim created (after a timeout, the ones not Bound have had only part of their writes).
    const writes = writeFigures(counters(sandbox), n, n, changes);
    const rss = system.peakRss();
    const totals = await system.forwarderTotals();
    progress(
      `provisioning ${label}: ${writes.objectWritesPerClaim.value} object writes + ${writes.eventWritesPerClaim.value} Events per claim; RSS ${JSON.stringify(rss)}`,
    );
    return {
      admission: options.admission,
      claims: n,
      bound,
      timedOut,
      createSeconds: round(createSeconds, 2),
      secondsUntilAllBound: round(seconds, 2),
      throughput: { ...atLeast(perSecond, THROUGHPUT_TARGET_PER_SECOND, "PVC/s") },
      writes,
      peakRssMiB: Object.fromEntries(
        Object.entries(rss).map(([name, mib]) => [name, atMost(mib, PEAK_RSS_TARGET_MIB, "MiB")]),
      ),
      idleRssMiB: system.idleRss,
      forwarder: totals,
      webhookFailuresIgnored: await ignoredWebhookFailures(sandbox.apiServer.url),
    };
  } finally {
    changes?.close();
    tracker.close();
    await system.close();
  }
}
