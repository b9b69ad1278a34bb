// Figures of the real-server bench, computed from what was counted: watch
// changes per kind, kube-apiserver's request counters, timings. Pure.

import { atMost, median, round, type Target } from "../support.ts";

/** Counts keyed by a label such as "MODIFIED persistentvolumeclaims" or "GET persistentvolumes". */
export type Tally = Record<string, number>;

const SAMPLE = /^apiserver_request_total\{([^}]*)\}\s+(\S+)/;
const LABEL = /(\w+)="((?:[^"\\]|\\.)*)"/g;

/**
 * kube-apiserver's `apiserver_request_total` summed by verb and resource
 * ("LIST persistentvolumes", "PUT persistentvolumeclaims/status"). Requests
 * that name no resource (/metrics, /healthz) are left out.
 */
export function requestTotals(metricsText: string): Tally {
  const out: Tally = {};
  for (const line of metricsText.split("\n")) {
    const m = SAMPLE.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of m[1]!.matchAll(LABEL)) labels[l[1]!] = l[2]!;
    const value = Number(m[2]);
    if (!labels.resource || !labels.verb || !Number.isFinite(value)) continue;
    const key = `${labels.verb} ${labels.resource}${labels.subresource ? `/${labels.subresource}` : ""}`;
    out[key] = (out[key] ?? 0) + value;
  }
  return out;
}

/** after - before, keys that did not move left out. */
export function delta(before: Tally, after: Tally): Tally {
  const out: Tally = {};
  for (const [key, n] of Object.entries(after)) {
    const d = n - (before[key] ?? 0);
    if (d !== 0) out[key] = d;
  }
  return out;
}

export function sumWhere(tally: Tally, pick: (key: string) => boolean): number {
  let total = 0;
  for (const [key, n] of Object.entries(tally)) if (pick(key)) total += n;
  return total;
}

/** Reads the way the issue counts them: GET and LIST requests (watches apart). */
export const isRead = (key: string): boolean => key.startsWith("GET ") || key.startsWith("LIST ");

export function perClaim(tally: Tally, claims: number): Tally {
  const out: Tally = {};
  for (const [key, n] of Object.entries(tally).sort()) out[key] = round(n / claims, 2);
  return out;
}

export const OBJECT_WRITES_TARGET = 4;
export const EVENTS_TARGET = 1;

export interface ClaimCosts {
  objectWritesPerClaim: Target;
  eventsPerClaim: Target;
  /** GET + LIST requests per claim, from kube-apiserver's counters; undefined when /metrics could not be read. */
  apiReadsPerClaim?: number;
  changesPerClaim: Tally;
  requestsPerClaim?: Tally;
}

/**
 * Writes and Events per claim from the watch (every stored change is one
 * watch event), the bench's own claim creates taken out, and reads from
 * the request counters when there are any.
 */
export function claimCosts(
  changes: Tally,
  claims: number,
  ownCreates: number,
  requests: Tally | undefined,
  ownReads = 0,
): ClaimCosts {
  const theirs: Tally = { ...changes };
  const own = "ADDED persistentvolumeclaims";
  theirs[own] = (theirs[own] ?? 0) - ownCreates;
  if (theirs[own] === 0) delete theirs[own];
  const events = sumWhere(theirs, (k) => k.endsWith(" events"));
  const objects = sumWhere(theirs, (k) => !k.endsWith(" events"));
  const costs: ClaimCosts = {
    objectWritesPerClaim: atMost(round(objects / claims, 2), OBJECT_WRITES_TARGET),
    eventsPerClaim: atMost(round(events / claims, 2), EVENTS_TARGET),
    changesPerClaim: perClaim(theirs, claims),
  };
  if (requests !== undefined) {
    costs.apiReadsPerClaim = round(Math.max(0, sumWhere(requests, isRead) - ownReads) / claims, 2);
    costs.requestsPerClaim = perClaim(requests, claims);
  }
  return costs;
}

/** Flat figure name -> value, the lower the better (seconds, writes, reads). */
export type Figures = Record<string, number>;

/** The median of each figure over rounds (figures missing in a round are left out of it). */
export function medianFigures(rounds: readonly Figures[]): Figures {
  const names = new Set(rounds.flatMap((r) => Object.keys(r)));
  const out: Figures = {};
  for (const name of [...names].sort()) {
    const values = rounds
      .map((r) => r[name])
      .filter((v): v is number => v !== undefined && Number.isFinite(v));
    if (values.length > 0) out[name] = round(median(values), 3);
  }
  return out;
}

export interface Ratio {
  ours: number;
  upstream: number;
  /** upstream / ours: above 1, ours is faster (or does less). */
  upstreamOverOurs: number;
}

/** Per figure both sides have: upstream's value over ours. */
export function ratios(ours: Figures, upstream: Figures): Record<string, Ratio> {
  const out: Record<string, Ratio> = {};
  for (const [name, mine] of Object.entries(ours)) {
    const theirs = upstream[name];
    if (theirs === undefined) continue;
    const r = mine === 0 ? (theirs === 0 ? 1 : Number.POSITIVE_INFINITY) : theirs / mine;
    out[name] = { ours: mine, upstream: theirs, upstreamOverOurs: round(r, 2) };
  }
  return out;
}

/** One judged figure, as `npm run bench` prints them: the value beside its target. */
export interface SummaryLine {
  figure: string;
  value: number;
  target: string;
  met: boolean;
}

/** Issue 20's targets on a real server: at least this many times faster than tuned upstream. */
export const SPEEDUP_TARGET = 2;
export const LATE_VOLUME_TARGET_SECONDS = 1;

/** The timed workloads' figures in the order they run: provision, delete, bind at each size, attach. */
function timedFigures(names: readonly string[]): string[] {
  const binds = names
    .filter((n) => /^bind\.\d+\.seconds$/.test(n))
    .sort((x, y) => Number(x.split(".")[1]) - Number(y.split(".")[1]));
  return ["provision.seconds", "delete.seconds", ...binds, "attach.seconds"].filter((n) => names.includes(n));
}

/**
 * The issue's "must show" lines that the figures at hand can judge: writes
 * and Events per claim and the late PV always; the speed-ups only with
 * upstream's figures (the comparison mode).
 */
export function realSummary(ours: Figures, ratio?: Record<string, Ratio>): SummaryLine[] {
  const lines: SummaryLine[] = [];
  const limit = (figure: string, max: number, strict = false): void => {
    const value = ours[figure];
    if (value === undefined) return;
    lines.push({
      figure,
      value,
      target: `${strict ? "<" : "<="} ${max}`,
      met: strict ? value < max : value <= max,
    });
  };
  limit("provision.objectWritesPerClaim", OBJECT_WRITES_TARGET);
  limit("provision.eventsPerClaim", EVENTS_TARGET);
  limit("lateVolume.medianSeconds", LATE_VOLUME_TARGET_SECONDS, true);
  for (const figure of timedFigures(Object.keys(ours))) {
    const r = ratio?.[figure];
    if (!r) continue;
    lines.push({
      figure: `${figure} (upstream / ours)`,
      value: r.upstreamOverOurs,
      target: `>= ${SPEEDUP_TARGET}`,
      met: r.upstreamOverOurs >= SPEEDUP_TARGET,
    });
  }
  return lines;
}
