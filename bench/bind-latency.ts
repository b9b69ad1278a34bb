// Figure 5: bind latency as the number of PersistentVolumes grows. For each
// size N, a fresh system (the binder as its own process fed by the watch
// forwarder, bench/system.ts) over a sandbox seeded with N static PVs of the
// claim's class that do not match it (1Gi, the claim asks 5Gi); then, per
// run, one matching 10Gi PV is added and one claim created, and the time from
// the create call until the API server stores the claim Bound is taken.
// The forwarder starts without replaying the N volumes (replayExisting
// false): the figure is a new claim in a settled cluster, not the start-up
// resync of N volumes. One claim is bound first and not counted, so the figure
// is not that of a binder process meeting its first claim (code not yet
// optimized by V8).

import { persistentVolumeClaims, persistentVolumes } from "../shared/kube/resources.ts";
import type { KubeObject } from "../shared/kube/types.ts";
import { claim, median, progress, round, sleep, type Target, trackBoundClaims } from "./support.ts";
import { startSystem } from "./system.ts";

export const BIND_GROWTH_TARGET = 2;
const CLASS = "static";

export interface BindLatencyOptions {
  /** PV counts. Default [100, 1000, 10000]. */
  sizes?: readonly number[];
  /** Claims bound per size (median reported). Default 15: a bind takes 10-20 ms, and five of them
   *  were too few for a steady median on a noisy machine. */
  runs?: number;
  timeoutMs?: number;
}

export interface BindLatencyResult {
  unit: "ms";
  measured: string;
  runs: number;
  /** Existing PV count -> median ms from claim create to Bound. */
  medianMs: Record<string, number>;
  runsMs: Record<string, number[]>;
  /** API requests per bind (verb + resource), from the claim create until 200 ms after Bound. */
  requestsPerBind: Record<string, Record<string, number>>;
  /** Existing PV count -> the binder's peak RSS (it keeps a watched copy of every PV), MiB. */
  binderPeakRssMiB: Record<string, number>;
  /** Largest size's median over the smallest's. */
  growth: Target;
}

function volume(name: string, storage: string): KubeObject {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name },
    spec: {
      capacity: { storage },
      accessModes: ["ReadWriteOnce"],
      persistentVolumeReclaimPolicy: "Retain",
      storageClassName: CLASS,
      volumeMode: "Filesystem",
      csi: { driver: "static.example.com", volumeHandle: name },
    },
    status: { phase: "Available" },
  };
}

const staticClass: KubeObject = {
  apiVersion: "storage.k8s.io/v1",
  kind: "StorageClass",
  metadata: { name: CLASS },
  provisioner: "kubernetes.io/no-provisioner",
  reclaimPolicy: "Retain",
  volumeBindingMode: "Immediate",
};

async function bindAt(
  size: number,
  runs: number,
  timeoutMs: number,
): Promise<{ times: number[]; requests: Record<string, number>; binderPeakRssMiB: number }> {
  const system = await startSystem({
    controllers: ["binder"],
    admission: false,
    replayExisting: false,
    before: (bs) => {
      const registry = bs.sandbox.apiServer.registry;
      registry.seed(staticClass);
      for (let i = 0; i < size; i++) registry.seed(volume(`static-${String(i).padStart(6, "0")}`, "1Gi"));
    },
  });
  const { sandbox } = system.bs;
  const tracker = trackBoundClaims(sandbox);
  const times: number[] = [];
  const requests = new Map<string, number>();
  let binderPeakRssMiB = Number.NaN;
  /** A matching volume, then a claim for it; the time from the claim create to its stored Bound. */
  const bindOne = async (suffix: string): Promise<number> => {
    // Through the API, so the binder hears of the volume the way it would in a cluster.
    await system.kube.create(persistentVolumes, volume(`match-${suffix}`, "10Gi"));
    await sleep(50);
    const name = `bind-${suffix}`;
    sandbox.apiServer.counters.clear();
    const t0 = performance.now();
    await system.kube.create(
      persistentVolumeClaims,
      claim(name, { storageClassName: CLASS, storage: "5Gi" }),
    );
    await tracker.waitFor([name], timeoutMs);
    const ms = round((tracker.boundAt.get(name) ?? Number.NaN) - t0, 1);
    // Let the follow-up events (the bind's own writes coming back) finish before counting.
    await sleep(200);
    return ms;
  };
  try {
    // Not counted: a settled cluster's binder has bound claims before.
    await bindOne("warm-up");
    for (let r = 0; r < runs; r++) {
      times.push(await bindOne(String(r)));
      for (const [key, count] of sandbox.apiServer.counters)
        requests.set(key, (requests.get(key) ?? 0) + count);
    }
    binderPeakRssMiB = system.peakRss().binder ?? Number.NaN;
  } finally {
    tracker.close();
    await system.close();
  }
  // Per bind, the bench's own claim create left out.
  requests.set("create persistentvolumeclaims", (requests.get("create persistentvolumeclaims") ?? 0) - runs);
  const perBind = Object.fromEntries(
    [...requests]
      .filter(([, n]) => n > 0)
      .sort()
      .map(([key, n]) => [key, round(n / runs, 1)]),
  );
  return { times, requests: perBind, binderPeakRssMiB };
}

export async function runBindLatency(options: BindLatencyOptions = {}): Promise<BindLatencyResult> {
  const sizes = (options.sizes ?? [100, 1000, 10_000]).map((s) => Math.max(0, Math.min(s, 100_000)));
  const runs = Math.max(1, Math.min(options.runs ?? 15, 50));
  const timeoutMs = Math.max(1000, Math.min(options.timeoutMs ?? 60_000, 600_000));
  const medianMs: Record<string, number> = {};
  const runsMs: Record<string, number[]> = {};
  const requestsPerBind: Record<string, Record<string, number>> = {};
  const binderPeakRssMiB: Record<string, number> = {};
  for (const size of sizes) {
    progress(`bind latency: ${size} existing PVs, ${runs} claims`);
    const { times, requests, binderPeakRssMiB: rss } = await bindAt(size, runs, timeoutMs);
    runsMs[size] = times;
    binderPeakRssMiB[size] = rss;
    requestsPerBind[size] = requests;
    medianMs[size] = round(median(times), 1);
    progress(
      `bind latency: ${size} PVs: median ${medianMs[size]} ms (${times.join(", ")}); binder peak RSS ${rss} MiB`,
    );
  }
  const first = medianMs[sizes[0] ?? 0] ?? Number.NaN;
  const last = medianMs[sizes[sizes.length - 1] ?? 0] ?? Number.NaN;
  const growth = round(last / first, 2);
  return {
    unit: "ms",
    measured: "claim create -> stored Bound, with N non-matching static PVs of its class and one matching",
    runs,
    medianMs,
    runsMs,
    requestsPerBind,
    binderPeakRssMiB,
    growth: {
      value: growth,
      target: `<= ${BIND_GROWTH_TARGET}x (${sizes[sizes.length - 1]} PVs over ${sizes[0]})`,
      met: Number.isFinite(growth) && growth <= BIND_GROWTH_TARGET,
    },
  };
}
