// One chaos run, start to end: the sandbox in-process, N function processes
// per controller behind the shuffling dispatcher, faults in the API server
// and the CSI driver, SIGKILLs, pods coming and going; then faults off,
// resync until quiet, and the invariants. `bench/chaos.ts` prints the
// report; test/chaos runs a small one.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import type { FaultSettings } from "../../sandbox/apiserver/faults.ts";
import { MUTATING_STORAGE_PLUGINS } from "../../sandbox/apiserver/storage-admission.ts";
import type { BackingVolume, DriverStats } from "../../sandbox/csi/driver.ts";
import type { CsiFaultSettings } from "../../sandbox/csi/faults.ts";
import { seededRandom } from "../../sandbox/seeded-random.ts";
import { type Sandbox, startSandbox } from "../../sandbox/start.ts";
import { CsiClient } from "../../shared/csi/client.ts";
import { type Forwarder, startForwarder } from "../../shared/forwarder/index.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { parseQuantityBytes } from "../../shared/kube/quantity.ts";
import {
  csiDrivers,
  events as eventsResource,
  nodes,
  persistentVolumeClaims,
  persistentVolumes,
  pods,
  storageClasses,
  volumeAttachments,
  volumeAttributesClasses,
} from "../../shared/kube/resources.ts";
import type {
  CSIDriver,
  KubeObject,
  Node,
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
  VolumeAttachment,
  VolumeAttributesClass,
} from "../../shared/kube/types.ts";
import { createLogger } from "../../shared/log.ts";
import { createMetricsRegistry } from "../../shared/metrics.ts";
import { defaultProvisionerOptions } from "../../shared/provisioner/options.ts";
import { Dispatcher, type DispatcherStats } from "./dispatcher.ts";
import { type ControllerName, controllerNames, Fleet, type FleetStats, oneProcessNames } from "./fleet.ts";
import { checkInvariants, type Example, type InvariantName } from "./invariants.ts";
import { type ChaosOptions, sleep } from "./options.ts";
import { type ResizePlan, type ResizeStats, ResizeWorkload, resizePlans } from "./resize-workload.ts";
import { Trace } from "./trace.ts";
import { Watchdog } from "./watchdog.ts";
import {
  attributeClass,
  attributeClasses,
  type ClaimRole,
  claim,
  claimBytes,
  dynamicClass,
  eachLimited,
  expandableClass,
  HarnessClient,
  namespace,
  pod,
  staticVolume,
} from "./workload.ts";

/** The kinds each controller's route carries, as `npm start` routes them (sandbox/run-system.ts). */
const separateKinds: Record<Exclude<ControllerName, "controllers">, string[]> = {
  binder: ["PersistentVolumeClaim", "PersistentVolume"],
  provisioner: ["PersistentVolumeClaim", "PersistentVolume"],
  "attach-detach": ["Pod", "Node", "PersistentVolumeClaim", "PersistentVolume", "VolumeAttachment"],
  attacher: ["VolumeAttachment", "PersistentVolume"],
  resizer: ["PersistentVolumeClaim", "PersistentVolume"],
};
/** The one-process host takes every kind its controllers take. */
const routedKinds: Record<ControllerName, string[]> = {
  ...separateKinds,
  controllers: [...new Set(Object.values(separateKinds).flat())],
};

export interface ChaosReport {
  /** Every invariant 0, every claim Bound, and the system went quiet. */
  ok: boolean;
  parameters: ChaosOptions;
  durationSeconds: { total: number; setup: number; chaos: number; settle: number };
  invariants: Record<InvariantName, number>;
  /** The objects behind non-zero invariants (a few each). */
  examples: Partial<Record<InvariantName, Example[]>>;
  claims: {
    total: number;
    static: number;
    dynamic: number;
    /** Of the dynamic ones, those of the expandable class with a VolumeAttributesClass (the resize workload's). */
    resizable: number;
    churnCreatedAndDeleted: number;
    boundWhenChaosEnded: number;
    boundAtEnd: number;
  };
  events: DispatcherStats;
  kills: FleetStats;
  injectedFaults: {
    api: Record<string, number>;
    csi: { total: number; workDoneBeforeError: number; byMethod: DriverStats["injected"] };
  };
  writes: {
    /** Object writes (create/update/patch/delete, Events apart) the API server received, attempts included. */
    objectWrites: number;
    harnessObjectWrites: number;
    controllerObjectWrites: number;
    /** Controller object writes per claim of the run (churn claims included). */
    controllerObjectWritesPerClaim: number;
    eventWrites: number;
    byResource: Record<string, number>;
  };
  /** Pods the harness created and deleted, and how many of them the sandbox kubelets ran. */
  pods: {
    created: number;
    deleted: number;
    ran: number;
    ranAfterChaos: boolean;
    goneAfterChaos: boolean;
    stuckAfterChaos?: string[];
  };
  settle: {
    passes: number;
    quiet: boolean;
    /** Resync passes run (during chaos and settling), and those answered with an error. */
    resyncs: number;
    resyncFailures: number;
    lastResync: Record<string, unknown>;
  };
  watchdog: { changesSeen: number; attachedOnTwoNodes: number };
  /** Expansions and VolumeAttributesClass changes (issue 18): what the workload asked, what the end state shows. */
  resizes: ResizeStats & {
    /** Resizable claims whose final request (above 1Gi) is met everywhere with nothing left on the claim. */
    claimsExpanded: number;
    /** Of the claims that went through an infeasible expansion, those at their lowered request at the end. */
    infeasibleExpansionsRecovered: number;
    /** Resizable claims whose final class (changed from A) is applied everywhere. */
    claimsModified: number;
    /** Of the claims that went through the infeasible class, those at their rolled-back class at the end. */
    infeasibleModificationsRecovered: number;
    /** Pods the harness ran after the settle to let the kubelet finish pending file system expansions. */
    nodeExpansionPods: number;
    nodeExpansionPodsNotRunning: string[];
    /** Claims still not finished when their pod was removed (the invariants say what is left). */
    nodeExpansionNotFinished: string[];
    /** The driver's calls of these kinds, and the faults injected into them. */
    csiCalls: Record<string, number>;
    csiInjected: Record<string, number>;
  };
}

const writeVerbs = ["create", "update", "patch", "delete", "deletecollection"];

function writeCounts(counters: Record<string, number>): {
  objects: number;
  events: number;
  byResource: Record<string, number>;
} {
  let objects = 0;
  let events = 0;
  const byResource: Record<string, number> = {};
  for (const [key, n] of Object.entries(counters)) {
    const [verb, resource = ""] = key.split(" ");
    if (!verb || !writeVerbs.includes(verb)) continue;
    if (resource === "events") events += n;
    else {
      objects += n;
      byResource[key] = n;
    }
  }
  return { objects, events, byResource };
}

async function getJson<T>(url: string, init: RequestInit = {}): Promise<T> {
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(30_000) });
  const text = await res.text();
  if (!res.ok) throw new Error(`${init.method ?? "GET"} ${url}: ${res.status} ${text.slice(0, 300)}`);
  return (text ? JSON.parse(text) : undefined) as T;
}

const putJson = (url: string, body: unknown): Promise<unknown> =>
  getJson(url, {
    method: "PUT",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });

function shuffle<T>(items: T[], random: () => number): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}

/** Latest moment, in ms from now, that a claim or attachment asked to be retried at (0: none pending). */
function pendingBackoffMs(objects: readonly KubeObject[], now: number): number {
  let latest = 0;
  for (const o of objects) {
    for (const [k, v] of Object.entries(o.metadata.annotations ?? {})) {
      if (!k.endsWith("retry-after")) continue;
      const at = Date.parse(v);
      if (Number.isFinite(at) && at - now > latest) latest = at - now;
    }
  }
  return latest;
}

/** Sleeps up to `ms`, waking early once `go()` turns false, so loops stop promptly at the end of the chaos. */
async function sleepWhile(ms: number, go: () => boolean): Promise<void> {
  const until = Date.now() + ms;
  while (go() && Date.now() < until) await sleep(Math.min(250, until - Date.now()));
}

/** A pod on the claim, until Running (scheduler, attach, node status, kubelet), then deleted until gone. */
async function runOnePod(
  harness: HarnessClient,
  claimName: string,
): Promise<{ ran: boolean; gone: boolean; stuck?: string[] }> {
  const name = "pod-after-chaos";
  await harness.create(pods, pod(name, claimName));
  const until = async (check: (p: Pod | undefined) => boolean): Promise<boolean> => {
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      const p = (await harness.list<Pod>(pods)).find((x) => x.metadata.name === name);
      if (check(p)) return true;
      await sleep(250);
    }
    return false;
  };
  const ran = await until((p) => p?.status?.phase === "Running");
  const stuck = ran ? undefined : await whyNotRunning(harness, name, claimName);
  await harness.delete(pods, name, namespace);
  const gone = await until((p) => p === undefined);
  return { ran, gone, ...(stuck ? { stuck } : {}) };
}

/** What a pod that did not run was waiting for: its status, its claim, the attachment and node status. */
async function whyNotRunning(harness: HarnessClient, podName: string, claimName: string): Promise<string[]> {
  const p = (await harness.list<Pod>(pods)).find((x) => x.metadata.name === podName);
  const c = (await harness.list<PersistentVolumeClaim>(persistentVolumeClaims)).find(
    (x) => x.metadata.name === claimName,
  );
  const pvName = c?.spec.volumeName;
  const vas = (await harness.list<VolumeAttachment>(volumeAttachments)).filter(
    (v) => v.spec.source.persistentVolumeName === pvName,
  );
  const node = (await harness.list<Node>(nodes)).find((n) => n.metadata.name === p?.spec.nodeName);
  const events = (await harness.list<KubeObject>(eventsResource))
    .filter((e) => (e as { involvedObject?: { name?: string } }).involvedObject?.name === podName)
    .map((e) => `${(e as { reason?: string }).reason}: ${(e as { message?: string }).message}`);
  return [
    `pod node ${p?.spec.nodeName ?? "-"} status ${JSON.stringify(p?.status ?? {})}`,
    `claim ${claimName} ${c?.status?.phase} volume ${pvName}`,
    ...vas.map(
      (v) =>
        `va ${v.metadata.name} node ${v.spec.nodeName} ${JSON.stringify(v.status ?? {})} deleting ${v.metadata.deletionTimestamp ?? "-"} annotations ${JSON.stringify(v.metadata.annotations ?? {})}`,
    ),
    `node inUse ${JSON.stringify(node?.status?.volumesInUse ?? [])} attached ${JSON.stringify(node?.status?.volumesAttached ?? [])}`,
    ...events,
  ];
}

const resizeMethods = ["ControllerExpandVolume", "ControllerModifyVolume", "NodeExpandVolume"] as const;

function pick<V>(
  from: Partial<Record<string, V>>,
  keys: readonly string[],
  value: (v: V | undefined) => number,
): Record<string, number> {
  return Object.fromEntries(keys.map((k) => [k, value(from[k])]));
}

const GiB = 1024 ** 3;

/** What the end state shows of the resize plans (the invariants say whether anything was lost). */
function resizeOutcomes(
  plans: readonly ResizePlan[],
  claims: readonly PersistentVolumeClaim[],
  broken: Record<InvariantName, string[]>,
): {
  claimsExpanded: number;
  infeasibleExpansionsRecovered: number;
  claimsModified: number;
  infeasibleModificationsRecovered: number;
} {
  const lostResize = new Set(broken.resizesLost);
  const lostModify = new Set(broken.modificationsLost);
  const byName = new Map(claims.map((c) => [c.metadata.name, c]));
  const out = {
    claimsExpanded: 0,
    infeasibleExpansionsRecovered: 0,
    claimsModified: 0,
    infeasibleModificationsRecovered: 0,
  };
  for (const plan of plans) {
    const c = byName.get(plan.claim);
    if (c?.status?.phase !== "Bound") continue;
    const key = `${namespace}/${plan.claim}`;
    const request = c.spec.resources?.requests?.storage;
    const grown = request !== undefined && Number(parseQuantityBytes(request)) > claimBytes;
    const capacity = c.status?.capacity?.storage;
    const met =
      grown &&
      !lostResize.has(key) &&
      capacity !== undefined &&
      Number(parseQuantityBytes(capacity)) >= Number(parseQuantityBytes(request));
    if (met) out.claimsExpanded++;
    if (met && plan.growth === "infeasible" && Number(parseQuantityBytes(request)) === 2 * GiB)
      out.infeasibleExpansionsRecovered++;
    const vac = c.spec.volumeAttributesClassName;
    const applied =
      vac !== attributeClasses.a.name &&
      !lostModify.has(key) &&
      c.status?.currentVolumeAttributesClassName === vac;
    if (applied) out.claimsModified++;
    if (applied && (plan.retier === "a-b-c-b" || plan.retier === "a-c-b") && vac === attributeClasses.b.name)
      out.infeasibleModificationsRecovered++;
  }
  return out;
}

/**
 * Runs a pod on every claim whose file system waits for one (NodeResizePending or
 * FileSystemResizePending), keeps it until its claim is finished (capacity at the request, no
 * storage status: a claim grown twice may need the kubelet's online expansion after the mount's),
 * then deletes the pods and waits until they are gone.
 */
async function finishNodeExpansion(
  harness: HarnessClient,
  say: (line: string) => void,
  resyncAll: () => Promise<void>,
): Promise<{ pods: number; notRunning: string[]; notFinished: string[] }> {
  const waiting = (await harness.list<PersistentVolumeClaim>(persistentVolumeClaims)).filter(
    (c) =>
      c.status?.phase === "Bound" &&
      (c.status.allocatedResourceStatuses?.storage === "NodeResizePending" ||
        (c.status.conditions ?? []).some((x) => x.type === "FileSystemResizePending")),
  );
  if (waiting.length === 0) return { pods: 0, notRunning: [], notFinished: [] };
  say(`settle: ${waiting.length} claims wait for a pod to grow their file system; running one on each`);
  const names = waiting.map((c) => ({ pod: `finish-${c.metadata.name}`, claim: c.metadata.name }));
  await eachLimited(names, 8, (n) => harness.create(pods, pod(n.pod, n.claim)));
  const running = new Set<string>();
  const finished = new Set<string>();
  const ours = new Set(names.map((n) => n.pod));
  const mine = new Set(names.map((n) => n.claim));
  const deadline = Date.now() + 60_000;
  let nextResync = Date.now() + 2000;
  while ((running.size < names.length || finished.size < names.length) && Date.now() < deadline) {
    await sleep(250);
    // As the PingSource would: a retry after a backoff (a detach, say) comes from a resync, not an event.
    if (Date.now() >= nextResync) {
      await resyncAll();
      nextResync = Date.now() + 2000;
    }
    for (const p of await harness.list<Pod>(pods))
      if (ours.has(p.metadata.name) && p.status?.phase === "Running") running.add(p.metadata.name);
    for (const c of await harness.list<PersistentVolumeClaim>(persistentVolumeClaims)) {
      const want = c.spec.resources?.requests?.storage;
      const have = c.status?.capacity?.storage;
      if (
        mine.has(c.metadata.name) &&
        want !== undefined &&
        have !== undefined &&
        parseQuantityBytes(have) >= parseQuantityBytes(want) &&
        c.status?.allocatedResourceStatuses?.storage === undefined
      )
        finished.add(c.metadata.name);
    }
  }
  await eachLimited(names, 8, (n) => harness.delete(pods, n.pod, namespace));
  while ((await harness.list<Pod>(pods)).length > 0 && Date.now() < deadline + 60_000) await sleep(250);
  return {
    pods: names.length,
    notRunning: names.filter((n) => !running.has(n.pod)).map((n) => n.pod),
    notFinished: names.filter((n) => !finished.has(n.claim)).map((n) => n.claim),
  };
}

export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const t0 = Date.now();
  const random = seededRandom(options.seed);
  const say = (line: string): void => {
    if (options.verbose) process.stderr.write(`chaos +${((Date.now() - t0) / 1000).toFixed(1)}s ${line}\n`);
  };
  const dir = await mkdtemp(join(tmpdir(), "ksf-chaos-"));
  const cleanups: (() => Promise<void>)[] = [
    async () => void (await rm(dir, { recursive: true, force: true })),
  ];
  const cleanup = async (): Promise<void> => {
    for (const c of cleanups.reverse()) await c().catch(() => undefined);
  };
  try {
    // The fleet runs no protection controller.
    const sandbox: Sandbox = await startSandbox({ dir, disableAdmissionPlugins: MUTATING_STORAGE_PLUGINS });
    cleanups.push(() => sandbox.close());
    const apiUrl = sandbox.apiServer.url;
    const driverName = sandbox.csi.driver.config.name;

    // The sandbox does not count the faults it injects; the harness owns the process, so it counts them here.
    const apiFaults: Record<string, number> = {};
    const injector = sandbox.apiServer.faults;
    const failureFor = injector.failureFor.bind(injector);
    injector.failureFor = (verb, resource, name) => {
      const failure = failureFor(verb, resource, name);
      if (failure) apiFaults[String(failure.code)] = (apiFaults[String(failure.code)] ?? 0) + 1;
      return failure;
    };

    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(sandbox.kubeconfigPath);
    const kube = new KubeJsonClient(kubeConfig);
    cleanups.push(() => kube.close());
    const harness = new HarnessClient(kube);

    // --- setup: the StorageClass, static PVs over real backing volumes (the sandbox has two nodes) ---
    const staticCount = Math.ceil(options.claims / 2);
    const dynamicCount = options.claims - staticCount;
    const churnStatic = Math.floor(options.churnClaims / 2);
    const churnDynamic = options.churnClaims - churnStatic;
    const pad = (i: number): string => String(i).padStart(4, "0");
    const resizableCount = Math.floor(dynamicCount * options.resizableFraction);
    await harness.create(storageClasses, dynamicClass(driverName));
    await harness.create(storageClasses, expandableClass(driverName));
    for (const which of ["a", "b", "c"] as const)
      await harness.create(volumeAttributesClasses, attributeClass(driverName, which));
    const csi = await CsiClient.connect({
      endpoint: sandbox.csi.endpoint,
      timeoutMs: 30_000,
      registry: createMetricsRegistry({ defaultMetrics: false }),
    });
    cleanups.push(async () => csi.close());
    const staticVolumes = new Map<string, string>();
    // One spare per churn claim: a claim deleted while two racing syncs had each reserved a volume for
    // it releases both, as upstream releases a volume whose claim is gone (Retain keeps it Released).
    const staticNames = Array.from(
      { length: staticCount + 2 * churnStatic },
      (_, i) => `chaos-static-${pad(i)}`,
    );
    await eachLimited(staticNames, 8, async (name) => {
      const created = await csi.createVolume({
        name,
        capacityRange: { requiredBytes: BigInt(claimBytes) },
        volumeCapabilities: [{ mount: { fsType: "ext4" }, accessMode: { mode: "SINGLE_NODE_WRITER" } }],
      });
      const handle = created.volume?.volumeId;
      if (!handle) throw new Error(`CreateVolume ${name} returned no volume id`);
      staticVolumes.set(name, handle);
      await harness.create(persistentVolumes, staticVolume(name, driverName, handle));
    });
    const hosts = options.oneProcess ? oneProcessNames : controllerNames;
    say(
      `setup: ${staticVolumes.size} static PVs with backing volumes; starting ${options.instances}x${hosts.length} functions (${hosts.join(", ")})`,
    );

    const fleet = new Fleet({
      instances: options.instances,
      controllers: hosts,
      env: {
        KUBECONFIG: sandbox.kubeconfigPath,
        CSI_ENDPOINT: sandbox.csi.endpoint,
        DRIVER_NAME: driverName,
        PROVISIONER_DRIVERS: driverName,
        ...(options.oneProcess ? { CONTROLLERS: controllerNames.join(",") } : {}),
      },
    });
    cleanups.push(() => fleet.stop());
    await fleet.start();
    const dispatcher = new Dispatcher({
      fleet,
      random,
      duplicateProbability: options.duplicateProbability,
      maxHoldMs: options.maxHoldMs,
      concurrency: options.dispatchConcurrency,
    });
    await dispatcher.start();
    cleanups.push(() => dispatcher.close());
    const forwarder: Forwarder = startForwarder({
      kubeConfig,
      routes: hosts.map((c) => ({ url: dispatcher.routeUrl(c), kinds: routedKinds[c] })),
      logger: createLogger({ name: "forwarder", level: "error" }),
      metrics: createMetricsRegistry({ defaultMetrics: false }),
      // Faults hit the forwarder's relists too; it should come back quickly, not after 30 s.
      informerBackoff: { baseMs: 100, maxMs: 2000 },
      retry: { baseMs: 50, maxMs: 2000 },
      shutdownGraceMs: 2000,
    });
    cleanups.push(() => forwarder.close());
    await forwarder.ready;

    const claimKey = (name: string): string => `${namespace}/${name}`;
    const claimsOf = (prefix: string, count: number, role: ClaimRole) =>
      Array.from({ length: count }, (_, i) => ({ name: `${prefix}-${pad(i)}`, role }));
    const mainClaims = [
      ...claimsOf("claim-s", staticCount, "static"),
      ...claimsOf("claim-d", dynamicCount - resizableCount, "dynamic"),
      ...claimsOf("claim-r", resizableCount, "resizable"),
    ];
    const churnClaims = [
      ...claimsOf("churn-s", churnStatic, "churn-static"),
      ...claimsOf("churn-d", churnDynamic, "churn-dynamic"),
    ];
    const trace = new Trace();
    const watchdog = new Watchdog({
      staticPvNames: staticVolumes.keys(),
      trackedClaims: mainClaims.map((c) => claimKey(c.name)),
      trace,
    });
    // The driver's sizes, seen after every call that may change them: none may ever go down.
    const noteDriverSizes = (volumeId?: string): void => {
      for (const b of sandbox.csi.driver.listBackingVolumes()) {
        if (volumeId === undefined || b.volumeId === volumeId)
          watchdog.noteDriverVolume(b.volumeId, b.capacityBytes, b.nodeCapacityBytes);
      }
    };
    noteDriverSizes();
    const unwrapDriver = trace.wrapDriver(sandbox.csi.driver, noteDriverSizes);
    cleanups.push(async () => unwrapDriver());
    watchdog.watch(sandbox.apiServer.store);
    cleanups.push(async () => watchdog.stop());
    const tSetup = Date.now();

    // --- chaos: faults on ---
    const csiFaults: CsiFaultSettings = {
      errorProbability: options.csiErrorProbability,
      errorCodes: ["UNAVAILABLE", "DEADLINE_EXCEEDED"],
      afterProbability: options.csiAfterProbability,
      seed: options.seed,
    };
    await putJson(`${sandbox.csi.adminUrl}/faults`, csiFaults);
    let tick = 0;
    const apiFaultSettings = (): FaultSettings => ({
      conflictProbability: options.apiConflictProbability,
      errorProbability: options.apiErrorProbability,
      // One code at a time in the sandbox, so the code flips every second: half 500s, half 503s.
      errorCode: tick % 2 === 0 ? 500 : 503,
      // Not watch: a failed watch only delays the forwarder, which the dispatcher's own faults already cover.
      verbs: ["get", "list", "create", "update", "patch", "delete"],
      seed: options.seed + tick,
    });
    await putJson(`${apiUrl}/_sandbox/faults`, apiFaultSettings());
    let chaosOn = true;
    const faultFlipper = (async () => {
      while (chaosOn) {
        await sleep(1000);
        if (!chaosOn) break;
        tick++;
        await putJson(`${apiUrl}/_sandbox/faults`, apiFaultSettings()).catch(() => undefined);
      }
    })();
    say("chaos: faults on, creating claims");

    // Resync answers that were not 2xx (faults, or the instance was killed mid-pass): counted, and tried elsewhere.
    let resyncFailures = 0;
    let resyncs = 0;
    const lastResync: Record<string, unknown> = {};
    const resync = async (c: ControllerName): Promise<void> => {
      for (let attempt = 1; attempt <= 3; attempt++) {
        const target = fleet.pick(c, random);
        if (!target) {
          await sleep(500);
          continue;
        }
        try {
          lastResync[c] = await getJson(`${target.url}/resync`, { method: "POST" });
          resyncs++;
          return;
        } catch (err) {
          resyncFailures++;
          lastResync[c] = { error: String(err).slice(0, 300) };
        }
      }
    };
    // What a PingSource does in a cluster: lost events (DESIGN invariant 5) are repaired by the next pass.
    const ticker = (async () => {
      if (options.resyncIntervalMs <= 0) return;
      while (chaosOn) {
        await sleepWhile(options.resyncIntervalMs, () => chaosOn);
        if (chaosOn) await Promise.all(hosts.map((c) => resync(c)));
      }
    })();

    const killer = (async () => {
      if (options.killIntervalMs <= 0) return;
      while (chaosOn) {
        await sleepWhile(options.killIntervalMs * (0.5 + random()), () => chaosOn);
        if (chaosOn) fleet.killOne(random);
      }
    })();

    const podCounts = { created: 0, deleted: 0 };
    const livePods = new Map<string, number>();
    const podDeletions = new Set<Promise<void>>();
    const deletePod = (name: string): void => {
      livePods.delete(name);
      const p = harness
        .delete(pods, name, namespace)
        .then(() => void podCounts.deleted++)
        .catch((err: unknown) => say(`pod ${name} delete failed: ${String(err)}`))
        .finally(() => podDeletions.delete(p));
      podDeletions.add(p);
    };
    const podChurn = (async () => {
      if (options.maxPods <= 0) return;
      for (let i = 0; chaosOn; i++) {
        await sleep(options.podIntervalMs);
        const now = Date.now();
        for (const [name, until] of livePods) if (until <= now) deletePod(name);
        if (!chaosOn || livePods.size >= options.maxPods) continue;
        const c = mainClaims[Math.floor(random() * mainClaims.length)]!;
        const name = `pod-${i}`;
        const lifetime =
          options.podMinLifetimeMs + random() * (options.podMaxLifetimeMs - options.podMinLifetimeMs);
        try {
          await harness.create(pods, pod(name, c.name));
          podCounts.created++;
          livePods.set(name, Date.now() + lifetime);
        } catch (err) {
          say(`pod ${name} create failed: ${String(err)}`);
        }
      }
    })();

    // The resize workload's pods, on the claim it grows: kept until the workload lets them go (the
    // file system grown online, or its wait over), then deleted by the pod churn like the others.
    let workloadPods = 0;
    const keptPodMs = 10 * 60_000;
    const startPod = async (claimName: string): Promise<string | undefined> => {
      if (!chaosOn) return undefined;
      const name = `pod-r${workloadPods++}-${claimName}`;
      try {
        await harness.create(pods, pod(name, claimName));
        podCounts.created++;
        livePods.set(name, Date.now() + keptPodMs);
        return name;
      } catch (err) {
        say(`pod ${name} create failed: ${String(err)}`);
        return undefined;
      }
    };
    const endPod = (name: string): void => {
      if (livePods.has(name)) livePods.set(name, Date.now());
    };
    const resizeWorkload = new ResizeWorkload({
      harness,
      random,
      claim: (name) => watchdog.claim(name),
      startPod,
      endPod,
      stepTimeoutMs: options.resizeStepTimeoutMs,
      say,
    });
    let resized = false;
    const resizing = resizeWorkload
      .run(
        resizePlans(
          mainClaims.filter((c) => c.role === "resizable").map((c) => c.name),
          random,
        ),
      )
      .then(() => {
        resized = true;
      });

    const churnDeletions: Promise<void>[] = [];
    const toCreate = shuffle([...mainClaims, ...churnClaims], random);
    const creation = eachLimited(toCreate, options.createConcurrency, async (c) => {
      await harness.create(persistentVolumeClaims, claim(c.name, c.role));
      if (c.role === "churn-static" || c.role === "churn-dynamic") {
        const delay = 200 + random() * 5000;
        churnDeletions.push(
          sleep(delay).then(() => harness.delete(persistentVolumeClaims, c.name, namespace)),
        );
      }
    });

    let created = false;
    void creation.then(() => {
      created = true;
      say(`chaos: all ${toCreate.length} claims created`);
    });
    let lastProgress = Date.now();
    for (;;) {
      await sleep(250);
      const elapsed = (Date.now() - tSetup) / 1000;
      const bound = watchdog.boundClaims;
      if (Date.now() - lastProgress >= 5000) {
        lastProgress = Date.now();
        const d = dispatcher.stats();
        const f = fleet.stats();
        say(
          `chaos: ${bound}/${options.claims} bound, events ${d.received} in / ${d.delivered} delivered / ${d.dropped} dropped, kills ${f.killed}, pods ${livePods.size}`,
        );
      }
      if (!created) continue;
      if (elapsed < options.chaosSeconds) continue;
      // The resize workload's waits are bounded by its step timeout; the chaos lasts until it is through.
      if (!resized && elapsed < options.maxChaosSeconds) continue;
      if (bound >= options.boundFractionToEndChaos * options.claims || elapsed >= options.maxChaosSeconds)
        break;
    }
    await creation;
    const boundWhenChaosEnded = watchdog.boundClaims;

    // --- end of chaos: kills and pods stop, faults off, every pod goes ---
    chaosOn = false;
    resizeWorkload.stop();
    await Promise.all([killer, podChurn, faultFlipper, ticker]);
    await Promise.all(churnDeletions);
    await fleet.restarts();
    await getJson(`${apiUrl}/_sandbox/faults`, { method: "DELETE" });
    await getJson(`${sandbox.csi.adminUrl}/faults`, { method: "DELETE" });
    // Its last patches (a lowered request, a rolled-back class) go out now if the chaos cut the waits short.
    await resizing;
    await resizeWorkload.pods();
    for (const name of [...livePods.keys()]) deletePod(name);
    await Promise.all([...podDeletions]);
    // Pods created by an attempt whose answer was lost exist without the harness knowing: list them.
    for (const p of await harness.list<Pod>(pods)) deletePod(p.metadata.name);
    await Promise.all([...podDeletions]);
    // A scheduled pod goes once its kubelet has unpublished and unstaged its volume.
    const podsDeadline = Date.now() + 60_000;
    while ((await harness.list<Pod>(pods)).length > 0 && Date.now() < podsDeadline) await sleep(250);
    const tChaos = Date.now();
    say(
      `settle: faults off, pods gone, ${boundWhenChaosEnded}/${options.claims} bound; resyncing until quiet`,
    );

    // --- settle: resync one instance of each controller until two passes write nothing ---
    const counters = (): Promise<Record<string, number>> =>
      getJson<Record<string, number>>(`${apiUrl}/_sandbox/counters`);
    const drained = async (): Promise<void> => {
      // Watch events of the last writes may still be on their way to the forwarder: a short pause first.
      for (let i = 0; i < 600; i++) {
        await sleep(i === 0 ? 500 : 100);
        const waiting = forwarder.stats().destinations.reduce((n, d) => n + d.waiting + d.inFlight, 0);
        // A retry held for a function's backoff is not waited for: the settle waits for the backoff itself.
        if (waiting === 0 && dispatcher.idleButBackoff(1000)) return;
      }
    };
    let passes = 0;
    const settle = async (): Promise<boolean> => {
      let quietPasses = 0;
      const settleDeadline = Date.now() + options.settleMaxSeconds * 1000;
      for (let pass = 1; pass <= options.settleMaxPasses && Date.now() < settleDeadline; pass++) {
        passes++;
        const before = writeCounts(await counters()).objects;
        await Promise.all(hosts.map((c) => resync(c)));
        await drained();
        const wrote = writeCounts(await counters()).objects - before;
        quietPasses = wrote === 0 ? quietPasses + 1 : 0;
        say(`settle: pass ${passes} wrote ${wrote} objects, ${watchdog.boundClaims}/${options.claims} bound`);
        if (quietPasses < 2) continue;
        // Quiet may only mean "backing off": wait for the latest retry-after a claim or attachment asked for.
        const [cs, vas] = await Promise.all([
          harness.list<PersistentVolumeClaim>(persistentVolumeClaims),
          harness.list<VolumeAttachment>(volumeAttachments),
        ]);
        const wait = pendingBackoffMs([...cs, ...vas], Date.now());
        if (wait > 0 && Date.now() + wait < settleDeadline) {
          say(`settle: quiet, but a retry is due in ${Math.ceil(wait / 1000)} s; waiting`);
          await sleep(wait + 250);
          quietPasses = 0;
          continue;
        }
        return true;
      }
      return false;
    };
    let quiet = await settle();
    // A grown file system waits for a pod (FileSystemResizePending): as a user would, start one on
    // every such claim, let the kubelet expand it, remove the pods, and settle again.
    const finishing = await finishNodeExpansion(harness, say, async () => {
      await Promise.all(hosts.map((c) => resync(c)));
    });
    if (finishing.pods > 0) quiet = await settle();
    const tSettle = Date.now();

    // --- the verdict ---
    noteDriverSizes();
    const [
      claims,
      volumes,
      attachments,
      nodeList,
      drivers,
      podList,
      backing,
      driverStats,
      finalCounters,
      attributeClasses,
    ] = await Promise.all([
      harness.list<PersistentVolumeClaim>(persistentVolumeClaims),
      harness.list<PersistentVolume>(persistentVolumes),
      harness.list<VolumeAttachment>(volumeAttachments),
      harness.list<Node>(nodes),
      harness.list<CSIDriver>(csiDrivers),
      harness.list<Pod>(pods),
      getJson<{ volumes: BackingVolume[] }>(`${sandbox.csi.adminUrl}/volumes`),
      getJson<DriverStats>(`${sandbox.csi.adminUrl}/stats`),
      counters(),
      harness.list<VolumeAttributesClass>(volumeAttributesClasses),
    ]);
    const seen = watchdog.report();
    const result = checkInvariants(
      {
        claims,
        volumes,
        attachments,
        nodes: nodeList,
        drivers,
        pods: podList.map((p) => p.metadata.name),
        backingVolumes: backing.volumes,
        attributeClasses,
      },
      {
        mainClaims: mainClaims.map((c) => claimKey(c.name)),
        churnClaims: churnClaims.map((c) => claimKey(c.name)),
        staticVolumes,
        volumeNamePrefix: defaultProvisionerOptions(driverName).volumeNamePrefix,
      },
      seen,
      trace,
    );
    // Once quiet and judged, the whole path still works: one pod on a surviving claim runs, then goes.
    const after = await runOnePod(harness, mainClaims[Math.floor(random() * mainClaims.length)]!.name);
    const writes = writeCounts(finalCounters);
    let csiInjected = 0;
    let csiAfter = 0;
    for (const v of Object.values(driverStats.injected)) {
      csiInjected += (v?.before ?? 0) + (v?.after ?? 0);
      csiAfter += v?.after ?? 0;
    }
    const controllerWrites = writes.objects - harness.writes;
    const allZero = Object.values(result.counts).every((n) => n === 0);
    const report: ChaosReport = {
      ok: allZero && quiet,
      parameters: options,
      durationSeconds: {
        total: (Date.now() - t0) / 1000,
        setup: (tSetup - t0) / 1000,
        chaos: (tChaos - tSetup) / 1000,
        settle: (tSettle - tChaos) / 1000,
      },
      invariants: result.counts,
      examples: result.examples,
      claims: {
        total: options.claims,
        static: staticCount,
        dynamic: dynamicCount,
        resizable: resizableCount,
        churnCreatedAndDeleted: churnClaims.length,
        boundWhenChaosEnded,
        boundAtEnd: seen.boundClaims,
      },
      events: dispatcher.stats(),
      kills: fleet.stats(),
      injectedFaults: {
        api: apiFaults,
        csi: { total: csiInjected, workDoneBeforeError: csiAfter, byMethod: driverStats.injected },
      },
      writes: {
        objectWrites: writes.objects,
        harnessObjectWrites: harness.writes,
        controllerObjectWrites: controllerWrites,
        controllerObjectWritesPerClaim:
          Math.round((controllerWrites / (options.claims + options.churnClaims)) * 100) / 100,
        eventWrites: writes.events,
        byResource: writes.byResource,
      },
      pods: {
        ...podCounts,
        ran: seen.podsRan,
        ranAfterChaos: after.ran,
        goneAfterChaos: after.gone,
        ...(after.stuck ? { stuckAfterChaos: after.stuck } : {}),
      },
      settle: { passes, quiet, resyncs, resyncFailures, lastResync },
      watchdog: { changesSeen: seen.changesSeen, attachedOnTwoNodes: seen.attachedOnTwoNodes.length },
      resizes: {
        ...resizeWorkload.stats,
        ...resizeOutcomes(resizeWorkload.plans, claims, result.objects),
        nodeExpansionPods: finishing.pods,
        nodeExpansionPodsNotRunning: finishing.notRunning,
        nodeExpansionNotFinished: finishing.notFinished,
        csiCalls: pick(driverStats.calls, resizeMethods, (n) => n ?? 0),
        csiInjected: pick(driverStats.injected, resizeMethods, (v) => (v?.before ?? 0) + (v?.after ?? 0)),
      },
    };
    say(`done: ok=${report.ok}`);
    return report;
  } finally {
    await cleanup();
  }
}
