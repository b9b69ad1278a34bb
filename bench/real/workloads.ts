// The workloads of issue 20, each against whatever control plane is running
// on the server (ours or upstream's): provision N claims to Bound, delete
// them (claims, PVs and backing volumes gone), bind N static pairs, a PV
// created after its claim, attach N VolumeAttachments. Each returns its
// figures (seconds, and per-claim costs where the issue asks for them) and
// leaves nothing of its own behind for the next one.

import { CsiClient } from "../../shared/csi/client.ts";
import { isAlreadyExists, isNotFound } from "../../shared/kube/api-errors.ts";
import {
  csiDrivers,
  csiNodes,
  events,
  nodes,
  persistentVolumeClaims,
  persistentVolumes,
  type ResourceDescriptor,
  storageClasses,
  volumeAttachments,
} from "../../shared/kube/resources.ts";
import type { KubeObject } from "../../shared/kube/types.ts";
import { median, progress, round, sleep } from "../support.ts";
import type { CpuSeconds, CpuWindow } from "./cpu-meter.ts";
import { type ClaimCosts, claimCosts, delta, type Figures, type Tally } from "./figures.ts";
import type { Stack } from "./ours.ts";
import { type ApiServer, forceDelete, inParallel } from "./server.ts";
import type { ClusterWatch } from "./watch.ts";

export const PREFIX = "ksf-bench-";
export const NAMESPACE = "default";
export const FAST_CLASS = `${PREFIX}fast`;
export const STATIC_CLASS = `${PREFIX}static`;
export const NODE = `${PREFIX}node`;
/** The topology key of both drivers the bench runs (the sandbox's and the hostpath driver). */
export const TOPOLOGY_KEY = "topology.hostpath.csi/node";
/** Requests in flight when the bench creates or deletes many objects (a user's `kubectl apply` of a batch). */
const CLIENT_PARALLELISM = 32;

/** The kinds the bench watches, and which of their objects are the bench's. */
export const WATCHED: readonly ResourceDescriptor[] = [
  persistentVolumeClaims,
  persistentVolumes,
  volumeAttachments,
  events,
];

export function isBenchObject(r: ResourceDescriptor, o: KubeObject): boolean {
  const name = o.metadata.name ?? "";
  if (name.startsWith(PREFIX)) return true;
  const spec = (o as { spec?: Record<string, unknown> }).spec;
  if (r === persistentVolumes) {
    const ref = spec?.claimRef as { name?: string } | undefined;
    return ref?.name?.startsWith(PREFIX) === true;
  }
  if (r === volumeAttachments) {
    const source = spec?.source as { persistentVolumeName?: string } | undefined;
    return source?.persistentVolumeName?.startsWith(PREFIX) === true;
  }
  if (r === events) {
    const involved = (o as { involvedObject?: { kind?: string; name?: string } }).involvedObject;
    if (involved?.name?.startsWith(PREFIX)) return true;
    // A provisioned volume is named after its claim's uid; its Events are counted as the claim's.
    return involved?.kind === "PersistentVolume" && involved.name?.startsWith("pvc-") === true;
  }
  return false;
}

export interface WorkloadContext {
  server: ApiServer;
  watch: ClusterWatch;
  stack: Stack;
  /** Starts counting CPU seconds per process (cpu-meter.ts); a timed window starts and stops one. */
  cpu: () => CpuWindow;
  driverName: string;
  nodeId: string;
  timeoutMs: number;
  resyncSeconds: number;
}

const claimNameOf = (v: KubeObject): string =>
  (v as { spec?: { claimRef?: { name?: string } } }).spec?.claimRef?.name ?? "";

const phaseOf = (o: KubeObject | undefined): string | undefined =>
  (o as { status?: { phase?: string } } | undefined)?.status?.phase;

function claimObject(name: string, storageClassName: string, storage = "1Gi"): KubeObject {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace: NAMESPACE },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage } },
      storageClassName,
      volumeMode: "Filesystem",
    },
  } as KubeObject;
}

function staticVolume(name: string, storage: string, storageClassName: string, driver: string): KubeObject {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name },
    spec: {
      capacity: { storage },
      accessModes: ["ReadWriteOnce"],
      persistentVolumeReclaimPolicy: "Retain",
      storageClassName,
      volumeMode: "Filesystem",
      csi: { driver, volumeHandle: name },
    },
  } as KubeObject;
}

async function ensure(server: ApiServer, r: ResourceDescriptor, object: KubeObject): Promise<void> {
  try {
    await server.kube.create(r, object);
  } catch (err) {
    if (!isAlreadyExists(err)) throw err;
  }
}

/** The classes, the CSIDriver and the node (with its CSINode) every workload may need. */
export async function prepareCluster(server: ApiServer, driverName: string, nodeId: string): Promise<void> {
  await ensure(server, storageClasses, {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: { name: FAST_CLASS },
    provisioner: driverName,
    reclaimPolicy: "Delete",
    volumeBindingMode: "Immediate",
  } as KubeObject);
  await ensure(server, storageClasses, {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: { name: STATIC_CLASS },
    provisioner: "kubernetes.io/no-provisioner",
    reclaimPolicy: "Retain",
    volumeBindingMode: "Immediate",
  } as KubeObject);
  await ensure(server, csiDrivers, {
    apiVersion: "storage.k8s.io/v1",
    kind: "CSIDriver",
    metadata: { name: driverName },
    spec: { attachRequired: true, podInfoOnMount: false },
  } as KubeObject);
  // The node as a kubelet with the driver registered leaves it: its topology label and CSINode entry.
  await ensure(server, nodes, {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name: NODE, labels: { [TOPOLOGY_KEY]: nodeId } },
  } as KubeObject);
  await ensure(server, csiNodes, {
    apiVersion: "storage.k8s.io/v1",
    kind: "CSINode",
    metadata: { name: NODE },
    spec: { drivers: [{ name: driverName, nodeID: nodeId, topologyKeys: [TOPOLOGY_KEY] }] },
  } as KubeObject);
}

/** Removes everything of the bench from the server (also what an interrupted run left). */
export async function cleanCluster(server: ApiServer): Promise<void> {
  const { kube } = server;
  const mine = async (r: ResourceDescriptor): Promise<KubeObject[]> =>
    (await kube.list<KubeObject>(r, r.namespaced ? { namespace: NAMESPACE } : {})).items.filter((o) =>
      isBenchObject(r, o),
    );
  await forceDelete(kube, volumeAttachments, await mine(volumeAttachments));
  await forceDelete(kube, persistentVolumeClaims, await mine(persistentVolumeClaims));
  await forceDelete(kube, persistentVolumes, await mine(persistentVolumes));
  await forceDelete(kube, events, await mine(events));
  for (const [r, name] of [
    [csiNodes, NODE],
    [nodes, NODE],
    [storageClasses, FAST_CLASS],
    [storageClasses, STATIC_CLASS],
  ] as const)
    await kube.delete(r, name).catch((err: unknown) => {
      if (!isNotFound(err)) throw err;
    });
}

/** A timed window: its seconds so far, the CPU it counts, and kube-apiserver's requests since it began. */
interface TimedWindow {
  seconds(): number;
  cpu: CpuWindow;
  /** What moved in kube-apiserver's request counts; undefined when /metrics cannot be read. */
  requests(): Promise<Tally | undefined>;
}

/** Starts a timed window on a quiet, idle stack (quietStart). */
async function startTimedWindow(ctx: WorkloadContext): Promise<TimedWindow> {
  await quietStart(ctx);
  const before = await ctx.server.requestCounts();
  const cpu = ctx.cpu();
  const t0 = performance.now();
  return {
    seconds: () => (performance.now() - t0) / 1000,
    cpu,
    async requests() {
      const after = await ctx.server.requestCounts();
      return before && after ? delta(before, after) : undefined;
    },
  };
}

/** Each count divided by `n` (at least 1), to two places. */
function perItem(tally: Tally, n: number): Tally {
  const out: Tally = {};
  for (const [k, v] of Object.entries(tally)) out[k] = round(v / Math.max(1, n), 2);
  return out;
}

/**
 * Before a timed window: no change for 2 s and an idle control plane, so
 * both stacks start idle, as a burst on a cluster follows quiet. Upstream's
 * client-side token buckets (QPS 100, burst 200) refill in those 2 s;
 * without the wait, writes of the step before (an attach run's detaches, the
 * binder's pass over new PVs) start upstream's window with an empty bucket.
 */
async function quietStart(ctx: WorkloadContext): Promise<void> {
  await settle(ctx.watch, 2000);
  await cpuQuiet(ctx);
}

/** At most this much CPU (seconds) per half second, the stack and the control plane together. */
const QUIET_CPU_SECONDS = 0.05;

/**
 * Waits (at most `maxMs`) for a half second in which the stack and the
 * control plane together used at most a tenth of a core: kube-apiserver and
 * etcd digest the step before (a sweep of 2,000 objects, a compaction) after
 * the watch has gone quiet, and that CPU would land in the window.
 */
async function cpuQuiet(ctx: WorkloadContext, maxMs = 10_000): Promise<void> {
  const deadline = performance.now() + maxMs;
  while (performance.now() < deadline) {
    const slice = ctx.cpu();
    await sleep(500);
    const spent = slice.stop();
    if (!spent) return;
    const busy = Object.entries(spent.byProcess)
      .filter(([name]) => name !== "other" && name !== "bench")
      .reduce((sum, [, seconds]) => sum + seconds, 0);
    if (busy <= QUIET_CPU_SECONDS) return;
  }
  progress(`  (the stack and the control plane were still busy after ${maxMs / 1000} s; timing anyway)`);
}

/** Waits until the watch has seen no change for `quietMs` (at most `maxMs`): trailing writes land. */
async function settle(watch: ClusterWatch, quietMs = 2000, maxMs = 30_000): Promise<void> {
  const deadline = performance.now() + maxMs;
  let last = JSON.stringify(watch.tally());
  let since = performance.now();
  while (performance.now() < deadline) {
    await sleep(200);
    const now = JSON.stringify(watch.tally());
    if (now !== last) {
      last = now;
      since = performance.now();
    } else if (performance.now() - since >= quietMs) return;
  }
}

const benchClaims = (watch: ClusterWatch, prefix: string): KubeObject[] =>
  [...watch.objects(persistentVolumeClaims.plural).values()].filter((c) =>
    c.metadata.name?.startsWith(prefix),
  );

/** Removes claims and volumes of a workload, then waits until the watch has seen them go. */
async function sweep(ctx: WorkloadContext, prefix: string): Promise<void> {
  const claims = benchClaims(ctx.watch, prefix);
  const claimNames = new Set(claims.map((c) => c.metadata.name));
  const volumes = [...ctx.watch.objects(persistentVolumes.plural).values()].filter(
    (v) => v.metadata.name?.startsWith(prefix) || claimNames.has(claimNameOf(v)),
  );
  await forceDelete(ctx.server.kube, persistentVolumeClaims, claims);
  await forceDelete(ctx.server.kube, persistentVolumes, volumes);
  await ctx.watch.until(
    () =>
      benchClaims(ctx.watch, prefix).length === 0 &&
      volumes.every((v) => !ctx.watch.objects(persistentVolumes.plural).has(`/${v.metadata.name}`)),
    60_000,
    `the ${prefix}* objects to be gone`,
  );
}

export interface ProvisionResult {
  claims: number;
  seconds: number;
  throughputPerSecond: number;
  costs: ClaimCosts;
  cpuSeconds?: CpuSeconds;
}

/** Creates `n` claims of the driver's class at once; seconds until the watch saw every one Bound. */
export async function provision(ctx: WorkloadContext, n: number): Promise<ProvisionResult> {
  const prefix = `${PREFIX}prov-`;
  const names = Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(5, "0")}`);
  const timed = await startTimedWindow(ctx);
  const tally0 = ctx.watch.tally();
  await inParallel(names, CLIENT_PARALLELISM, (name) =>
    ctx.server.kube.create(persistentVolumeClaims, claimObject(name, FAST_CLASS)),
  );
  const claims = ctx.watch.objects(persistentVolumeClaims.plural);
  await ctx.watch.until(
    () => names.every((name) => phaseOf(claims.get(`${NAMESPACE}/${name}`)) === "Bound"),
    ctx.timeoutMs,
    `${n} claims to be Bound`,
  );
  const seconds = timed.seconds();
  const cpuSeconds = timed.cpu.stop();
  progress(`  provision: ${n} claims Bound in ${round(seconds, 2)} s; counting trailing writes`);
  await settle(ctx.watch);
  const changes = delta(tally0, ctx.watch.tally());
  const requests = await timed.requests();
  return {
    claims: n,
    seconds: round(seconds, 2),
    throughputPerSecond: round(n / seconds, 1),
    costs: claimCosts(changes, n, n, requests),
    ...(cpuSeconds ? { cpuSeconds } : {}),
  };
}

export interface DeleteResult {
  claims: number;
  seconds: number;
  /** Seconds until the last PV was gone from the API (the backing volumes may take a little longer). */
  secondsUntilVolumesGoneFromApi: number;
  /** Whether the backing volumes could be checked (the sandbox driver tells; others do not). */
  backingVolumesChecked: boolean;
  changesPerClaim: Tally;
  cpuSeconds?: CpuSeconds;
  /** kube-apiserver requests until the PVs were gone from the API, per claim, by verb and resource (the bench's deletes included). */
  requestsPerClaim?: Tally;
}

/** Deletes the claims `provision` made; seconds until claims, PVs and backing volumes are gone. */
export async function deleteProvisioned(ctx: WorkloadContext): Promise<DeleteResult> {
  const prefix = `${PREFIX}prov-`;
  const claims = benchClaims(ctx.watch, prefix);
  const names = new Set(claims.map((c) => c.metadata.name));
  const pvs = [...ctx.watch.objects(persistentVolumes.plural).values()].filter((v) =>
    names.has(claimNameOf(v)),
  );
  const handles = pvs.map(
    (v) => (v as { spec?: { csi?: { volumeHandle?: string } } }).spec?.csi?.volumeHandle,
  );
  const timed = await startTimedWindow(ctx);
  const tally0 = ctx.watch.tally();
  await inParallel(claims, CLIENT_PARALLELISM, (c) =>
    ctx.server.kube.delete(persistentVolumeClaims, c.metadata.name!, NAMESPACE).catch((err: unknown) => {
      if (!isNotFound(err)) throw err;
    }),
  );
  const volumes = ctx.watch.objects(persistentVolumes.plural);
  await ctx.watch.until(
    () =>
      benchClaims(ctx.watch, prefix).length === 0 && pvs.every((v) => !volumes.has(`/${v.metadata.name}`)),
    ctx.timeoutMs,
    `${claims.length} claims and their PVs to be gone`,
  );
  const apiSeconds = timed.seconds();
  const requests = await timed.requests();
  const requestsPerClaim = requests && perItem(requests, claims.length);
  const backing = ctx.stack.backingVolumes;
  if (backing) {
    const deadline = performance.now() + ctx.timeoutMs;
    for (;;) {
      const left = new Set(await backing());
      if (!handles.some((h) => h !== undefined && left.has(h))) break;
      if (performance.now() > deadline) throw new Error("backing volumes still there after the timeout");
      await sleep(100);
    }
  }
  const seconds = timed.seconds();
  const cpuSeconds = timed.cpu.stop();
  progress(`  delete: ${claims.length} claims, PVs and volumes gone in ${round(seconds, 2)} s`);
  await settle(ctx.watch, 1000, 10_000);
  const changes = delta(tally0, ctx.watch.tally());
  const perClaim = perItem(changes, claims.length);
  return {
    claims: claims.length,
    seconds: round(seconds, 2),
    secondsUntilVolumesGoneFromApi: round(apiSeconds, 2),
    backingVolumesChecked: backing !== undefined,
    changesPerClaim: perClaim,
    ...(cpuSeconds ? { cpuSeconds } : {}),
    ...(requestsPerClaim ? { requestsPerClaim } : {}),
  };
}

/** Waits until the watch shows every named PV Available (the binder's first pass over new PVs). */
async function volumesAvailable(ctx: WorkloadContext, names: readonly string[]): Promise<void> {
  const volumes = ctx.watch.objects(persistentVolumes.plural);
  await ctx.watch.until(
    () => names.every((n) => phaseOf(volumes.get(`/${n}`)) === "Available"),
    ctx.timeoutMs,
    `${names.length} PVs to be Available`,
  );
}

export interface BindResult {
  pairs: number;
  seconds: number;
  cpuSeconds?: CpuSeconds;
  /** kube-apiserver requests in the timed window per pair, by verb and resource (the bench's create included). */
  requestsPerPair?: Tally;
}

/** `n` static PVs (Available), then `n` claims at once; seconds until every claim is Bound. */
export async function bindStatic(ctx: WorkloadContext, n: number): Promise<BindResult> {
  const prefix = `${PREFIX}bind${n}-`;
  const names = Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(5, "0")}`);
  try {
    await inParallel(names, CLIENT_PARALLELISM, (name) =>
      ctx.server.kube.create(
        persistentVolumes,
        staticVolume(name, "1Gi", STATIC_CLASS, `static.${ctx.driverName}`),
      ),
    );
    await volumesAvailable(ctx, names);
    const claims = ctx.watch.objects(persistentVolumeClaims.plural);
    const timed = await startTimedWindow(ctx);
    await inParallel(names, CLIENT_PARALLELISM, (name) =>
      ctx.server.kube.create(persistentVolumeClaims, claimObject(name, STATIC_CLASS)),
    );
    await ctx.watch.until(
      () => names.every((name) => phaseOf(claims.get(`${NAMESPACE}/${name}`)) === "Bound"),
      ctx.timeoutMs,
      `${n} static claims to be Bound`,
    );
    const seconds = timed.seconds();
    const cpuSeconds = timed.cpu.stop();
    progress(`  bind: ${n} static pairs Bound in ${round(seconds, 2)} s`);
    const requests = await timed.requests();
    const requestsPerPair = requests && perItem(requests, n);
    return {
      pairs: n,
      seconds: round(seconds, 2),
      ...(cpuSeconds ? { cpuSeconds } : {}),
      ...(requestsPerPair ? { requestsPerPair } : {}),
    };
  } finally {
    await sweep(ctx, prefix);
  }
}

export interface LateVolumeResult {
  runs: number;
  medianSeconds: number;
  runsSeconds: number[];
}

/**
 * A claim with no volume to bind, left Pending long enough for the binder to
 * have looked; then its PV is created: seconds from that create to Bound.
 */
export async function lateVolume(ctx: WorkloadContext, runs: number): Promise<LateVolumeResult> {
  const times: number[] = [];
  const timeoutMs = Math.min(ctx.timeoutMs, (ctx.resyncSeconds * 2 + 30) * 1000);
  for (let r = 0; r < runs; r++) {
    const prefix = `${PREFIX}late${r}-`;
    const name = `${prefix}claim`;
    try {
      await ctx.server.kube.create(persistentVolumeClaims, claimObject(name, STATIC_CLASS));
      await sleep(2000);
      const claims = ctx.watch.objects(persistentVolumeClaims.plural);
      if (phaseOf(claims.get(`${NAMESPACE}/${name}`)) === "Bound")
        throw new Error(`${name} was Bound before its PV existed`);
      const t0 = performance.now();
      await ctx.server.kube.create(
        persistentVolumes,
        staticVolume(`${prefix}pv`, "1Gi", STATIC_CLASS, `static.${ctx.driverName}`),
      );
      await ctx.watch.until(
        () => phaseOf(claims.get(`${NAMESPACE}/${name}`)) === "Bound",
        timeoutMs,
        `${name} to be Bound`,
      );
      times.push(round((performance.now() - t0) / 1000, 2));
      progress(`  late volume: run ${r + 1}/${runs}: Bound ${times.at(-1)} s after its PV was created`);
    } finally {
      await sweep(ctx, prefix);
    }
  }
  return { runs, medianSeconds: round(median(times), 2), runsSeconds: times };
}

export interface AttachResult {
  attachments: number;
  seconds: number;
  cpuSeconds?: CpuSeconds;
  /** kube-apiserver requests in the timed window per attachment, by verb and resource (the bench's create included). */
  requestsPerAttachment?: Tally;
}

/**
 * `n` volumes made on the driver directly and their PVs (Available), then
 * `n` VolumeAttachments to the bench's node at once (as the attach/detach
 * controller creates them): seconds until every one is `status.attached`.
 */
export async function attach(ctx: WorkloadContext, n: number): Promise<AttachResult> {
  const prefix = `${PREFIX}att-`;
  const names = Array.from({ length: n }, (_, i) => `${prefix}${String(i).padStart(5, "0")}`);
  const csi = await CsiClient.connect({ endpoint: ctx.stack.csiEndpoint, probe: { readyTimeoutMs: 30_000 } });
  const handles = new Map<string, string>();
  const vas = ctx.watch.objects(volumeAttachments.plural);
  try {
    await inParallel(names, 8, async (name) => {
      const created = await csi.createVolume({
        name,
        capacityRange: { requiredBytes: 1n << 30n },
        volumeCapabilities: [{ mount: {}, accessMode: { mode: "SINGLE_NODE_WRITER" } }],
      });
      const handle = created.volume?.volumeId;
      if (!handle) throw new Error(`CreateVolume ${name} returned no volume id`);
      handles.set(name, handle);
      const pv = staticVolume(name, "1Gi", "", ctx.driverName) as KubeObject & {
        spec: { csi: { volumeHandle: string } };
      };
      pv.spec.csi.volumeHandle = handle;
      await ctx.server.kube.create(persistentVolumes, pv);
    });
    // As for binding: the binder's first pass over the new PVs is not part of the timed window (a
    // VolumeAttachment names a PV the binder settled long before its pod was scheduled).
    await volumesAvailable(ctx, names);
    const timed = await startTimedWindow(ctx);
    await inParallel(names, CLIENT_PARALLELISM, (name) =>
      ctx.server.kube.create(volumeAttachments, {
        apiVersion: "storage.k8s.io/v1",
        kind: "VolumeAttachment",
        metadata: { name },
        spec: { attacher: ctx.driverName, nodeName: NODE, source: { persistentVolumeName: name } },
      } as KubeObject),
    );
    await ctx.watch.until(
      () =>
        names.every(
          (name) =>
            (vas.get(`/${name}`) as { status?: { attached?: boolean } } | undefined)?.status?.attached ===
            true,
        ),
      ctx.timeoutMs,
      `${n} VolumeAttachments to be attached`,
    );
    const seconds = timed.seconds();
    const cpuSeconds = timed.cpu.stop();
    progress(`  attach: ${n} VolumeAttachments attached in ${round(seconds, 2)} s`);
    const requests = await timed.requests();
    const requestsPerAttachment = requests && perItem(requests, n);
    return {
      attachments: n,
      seconds: round(seconds, 2),
      ...(cpuSeconds ? { cpuSeconds } : {}),
      ...(requestsPerAttachment ? { requestsPerAttachment } : {}),
    };
  } finally {
    // Detach through the attacher first (it unpublishes), then force what is left.
    await inParallel(names, CLIENT_PARALLELISM, (name) =>
      ctx.server.kube.delete(volumeAttachments, name).catch((err: unknown) => {
        if (!isNotFound(err)) throw err;
      }),
    ).catch(() => undefined);
    await ctx.watch
      .until(() => names.every((name) => !vas.has(`/${name}`)), 60_000, "the VolumeAttachments to be gone")
      .catch(() => undefined);
    await forceDelete(
      ctx.server.kube,
      volumeAttachments,
      [...vas.values()].filter((v) => v.metadata.name?.startsWith(prefix)),
    );
    await sweep(ctx, prefix);
    await inParallel([...handles.values()], 8, (volumeId) => csi.deleteVolume({ volumeId })).catch(
      () => undefined,
    );
    csi.close();
  }
}

/**
 * The selected workloads once at size `n`, results dropped: the timed runs
 * then meet processes that have run those paths before (V8 has optimized
 * them, connections are open), as a controller on a cluster does after its
 * first minutes. Upstream's stack gets the same pass.
 */
export async function warmUp(ctx: WorkloadContext, n: number, workloads: ReadonlySet<string>): Promise<void> {
  progress(`  warm-up (not timed): ${n} claims, pairs and attachments`);
  if (workloads.has("provision") || workloads.has("lateVolume")) {
    await provision(ctx, n);
    await deleteProvisioned(ctx);
  }
  if (workloads.has("bind")) await bindStatic(ctx, n);
  if (workloads.has("attach")) await attach(ctx, n);
  progress("  warm-up done");
}

/** The flat figures of one round (lower is better), for medians and ratios. */
export interface RoundResult {
  provision?: ProvisionResult;
  delete?: DeleteResult;
  bind?: BindResult[];
  lateVolume?: LateVolumeResult;
  attach?: AttachResult;
}

export function flatFigures(r: RoundResult): Figures {
  const f: Figures = {};
  if (r.provision) {
    f["provision.seconds"] = r.provision.seconds;
    f["provision.objectWritesPerClaim"] = r.provision.costs.objectWritesPerClaim.value;
    f["provision.eventsPerClaim"] = r.provision.costs.eventsPerClaim.value;
    if (r.provision.costs.apiReadsPerClaim !== undefined)
      f["provision.apiReadsPerClaim"] = r.provision.costs.apiReadsPerClaim;
  }
  if (r.delete) f["delete.seconds"] = r.delete.seconds;
  for (const b of r.bind ?? []) f[`bind.${b.pairs}.seconds`] = b.seconds;
  if (r.lateVolume) f["lateVolume.medianSeconds"] = r.lateVolume.medianSeconds;
  if (r.attach) f["attach.seconds"] = r.attach.seconds;
  // The machine's CPU seconds in each timed window: what the stack made every process on it spend.
  const cpu: [string, CpuSeconds | undefined][] = [
    ["provision", r.provision?.cpuSeconds],
    ["delete", r.delete?.cpuSeconds],
    ...(r.bind ?? []).map((b): [string, CpuSeconds | undefined] => [`bind.${b.pairs}`, b.cpuSeconds]),
    ["attach", r.attach?.cpuSeconds],
  ];
  for (const [workload, seconds] of cpu) if (seconds) f[`${workload}.machineCpuSeconds`] = seconds.machine;
  return f;
}
