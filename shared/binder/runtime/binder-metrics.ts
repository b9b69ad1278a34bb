// kube-controller-manager's PersistentVolume controller metrics, with
// upstream's names and labels so dashboards and alerts carry over:
//   pv_collector_{bound,unbound}_pv_count{storage_class}
//   pv_collector_{bound,unbound}_pvc_count{namespace,storage_class,volume_attributes_class}
//   pv_collector_total_pv_count{plugin_name,volume_mode}
//   volume_operation_total_seconds / volume_operation_errors_total{plugin_name,operation_name}
//     (the counter was volume_operation_total_errors before 1.36, kubernetes PR 136399)
//   retroactive_storageclass_total, retroactive_storageclass_errors_total
// Upstream computes the pv_collector gauges from its informer caches at each
// scrape; a stateless binder has no such caches, so they are set from the
// lists every resync pass makes. Operation times come from the objects
// themselves (the claim's creation, the volume's last phase transition), not
// from a start time kept in memory, so any instance can observe them.
import type { Counter, Gauge, Histogram } from "prom-client";
import type { Executor, Executors, Plan } from "../../controller/index.ts";
import { claimClass, claimHasClass } from "../../kube/claim-class.ts";
import type { PersistentVolume, PersistentVolumeClaim, StorageClass } from "../../kube/types.ts";
import { annStorageProvisioner } from "../../kube/well-known.ts";
import { counter, gauge, histogram, processMetrics, type Registry } from "../../metrics.ts";
import { claimPhase, reason, volumePhase } from "../constants.ts";
import { isProvisionedForClaim } from "../phase-updates.ts";
import type { FollowUp, PlanStep } from "../plan.ts";

/** pkg/volume/util's buckets for volume_operation_total_seconds (seconds, up to 10 minutes). */
export const VOLUME_OPERATION_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 25, 50, 120, 300, 600];

/** Upstream's plugin_name when no plugin is known. */
export const pluginNameNotAvailable = "N/A";

/** The operation_name values upstream's PV controller records. */
export const volumeOperation = { provision: "provision", delete: "delete" } as const;

type ClaimLabel = "namespace" | "storage_class" | "volume_attributes_class";
type OperationLabel = "plugin_name" | "operation_name";

export interface BinderMetrics {
  boundVolumes: Gauge<"storage_class">;
  unboundVolumes: Gauge<"storage_class">;
  boundClaims: Gauge<ClaimLabel>;
  unboundClaims: Gauge<ClaimLabel>;
  totalVolumes: Gauge<"plugin_name" | "volume_mode">;
  operationSeconds: Histogram<OperationLabel>;
  operationErrors: Counter<OperationLabel>;
  retroactive: Counter;
  retroactiveErrors: Counter;
}

export function binderMetrics(registry: Registry = processMetrics()): BinderMetrics {
  const claimLabels = ["namespace", "storage_class", "volume_attributes_class"] as const;
  return {
    boundVolumes: gauge(registry, {
      name: "pv_collector_bound_pv_count",
      help: "Gauge measuring number of persistent volume currently bound",
      labelNames: ["storage_class"],
    }),
    unboundVolumes: gauge(registry, {
      name: "pv_collector_unbound_pv_count",
      help: "Gauge measuring number of persistent volume currently unbound",
      labelNames: ["storage_class"],
    }),
    boundClaims: gauge(registry, {
      name: "pv_collector_bound_pvc_count",
      help: "Gauge measuring number of persistent volume claim currently bound",
      labelNames: claimLabels,
    }),
    unboundClaims: gauge(registry, {
      name: "pv_collector_unbound_pvc_count",
      help: "Gauge measuring number of persistent volume claim currently unbound",
      labelNames: claimLabels,
    }),
    totalVolumes: gauge(registry, {
      name: "pv_collector_total_pv_count",
      help: "Gauge measuring total number of persistent volumes",
      labelNames: ["plugin_name", "volume_mode"],
    }),
    operationSeconds: histogram(registry, {
      name: "volume_operation_total_seconds",
      help: "Storage operation end to end duration in seconds",
      labelNames: ["plugin_name", "operation_name"],
      buckets: VOLUME_OPERATION_BUCKETS,
    }),
    operationErrors: counter(registry, {
      name: "volume_operation_errors_total",
      help: "Total volume operation errors",
      labelNames: ["plugin_name", "operation_name"],
    }),
    retroactive: counter(registry, {
      name: "retroactive_storageclass_total",
      help: "Total number of retroactive StorageClass assignments to persistent volume claim",
    }),
    retroactiveErrors: counter(registry, {
      name: "retroactive_storageclass_errors_total",
      help: "Total number of failed retroactive StorageClass assignments to persistent volume claim",
    }),
  };
}

// ---- the pv_collector gauges -------------------------------------------------

/** In-tree volume sources that still have a plugin upstream, by the spec field that names them. */
const inTreePlugins: readonly (readonly [string, string])[] = [
  ["hostPath", "kubernetes.io/host-path"],
  ["local", "kubernetes.io/local-volume"],
  ["nfs", "kubernetes.io/nfs"],
  ["iscsi", "kubernetes.io/iscsi"],
  ["fc", "kubernetes.io/fc"],
];

/** GetFullQualifiedPluginNameForVolume: kubernetes.io/csi:<driver> for CSI; N/A when no plugin fits. */
export function volumePluginName(volume: PersistentVolume): string {
  const driver = volume.spec.csi?.driver;
  if (typeof driver === "string" && driver !== "") return `kubernetes.io/csi:${driver}`;
  for (const [field, plugin] of inTreePlugins) if (volume.spec[field]) return plugin;
  return pluginNameNotAvailable;
}

function text(v: unknown): string {
  return typeof v === "string" ? v : "";
}

export interface Inventory {
  boundVolumes: Map<string, number>;
  unboundVolumes: Map<string, number>;
  /** Keyed by JSON of [namespace, storage_class, volume_attributes_class]. */
  boundClaims: Map<string, number>;
  unboundClaims: Map<string, number>;
  /** Keyed by JSON of [plugin_name, volume_mode]. */
  totalVolumes: Map<string, number>;
}

function add(m: Map<string, number>, key: string): void {
  m.set(key, (m.get(key) ?? 0) + 1);
}

/**
 * Upstream's pvCollect / pvcCollect: a volume is bound when its phase is
 * Bound, a claim when its phase is Bound; labels read spec fields only
 * (spec.storageClassName, not the beta annotation), "" when unset.
 */
export function countInventory(
  claims: readonly PersistentVolumeClaim[],
  volumes: readonly PersistentVolume[],
): Inventory {
  const inv: Inventory = {
    boundVolumes: new Map(),
    unboundVolumes: new Map(),
    boundClaims: new Map(),
    unboundClaims: new Map(),
    totalVolumes: new Map(),
  };
  for (const v of volumes) {
    const cls = text(v.spec?.storageClassName);
    add(v.status?.phase === volumePhase.bound ? inv.boundVolumes : inv.unboundVolumes, cls);
    // The API server defaults volumeMode; an older one may leave it unset, which means Filesystem.
    add(inv.totalVolumes, JSON.stringify([volumePluginName(v), text(v.spec?.volumeMode) || "Filesystem"]));
  }
  for (const c of claims) {
    const key = JSON.stringify([
      text(c.metadata.namespace),
      text(c.spec?.storageClassName),
      text(c.spec?.volumeAttributesClassName),
    ]);
    add(c.status?.phase === claimPhase.bound ? inv.boundClaims : inv.unboundClaims, key);
  }
  return inv;
}

function setAll<L extends string>(
  g: Gauge<L>,
  counts: Map<string, number>,
  labels: (key: string) => Record<L, string>,
): void {
  // Replace, not add: label sets that disappeared since the last pass must go, as upstream's do.
  g.reset();
  for (const [key, n] of counts) g.set(labels(key), n);
}

export function recordInventory(m: BinderMetrics, inv: Inventory): void {
  const claimLabels = (key: string) => {
    const [namespace, storage_class, volume_attributes_class] = JSON.parse(key) as [string, string, string];
    return { namespace, storage_class, volume_attributes_class };
  };
  setAll(m.boundVolumes, inv.boundVolumes, (storage_class) => ({ storage_class }));
  setAll(m.unboundVolumes, inv.unboundVolumes, (storage_class) => ({ storage_class }));
  setAll(m.boundClaims, inv.boundClaims, claimLabels);
  setAll(m.unboundClaims, inv.unboundClaims, claimLabels);
  setAll(m.totalVolumes, inv.totalVolumes, (key) => {
    const [plugin_name, volume_mode] = JSON.parse(key) as [string, string];
    return { plugin_name, volume_mode };
  });
}

// ---- operations, from the plans the binder carries out -----------------------

/** What a planned step means to the metrics once it has run (or failed). */
export type StepMeaning =
  /** The claim gets the default class: retroactive_storageclass_*. */
  | { kind: "retroactive" }
  /** The claim is handed to its external provisioner: a failure is a provision error. */
  | { kind: "provision-handoff"; plugin: string }
  /** The claim becomes Bound to a volume provisioned for it: the provision ends. */
  | { kind: "provisioned-bound"; plugin: string; startedAt: string | undefined }
  /** The volume has no deleter and goes Failed: a delete error. */
  | { kind: "delete-failed" };

/** The state a binder decision was made on, as far as the metrics care. */
export type DecidedOn =
  | {
      kind: "claim";
      claim: PersistentVolumeClaim;
      volumes: readonly PersistentVolume[];
      classes: readonly StorageClass[];
    }
  | { kind: "volume"; volume: PersistentVolume };

/** Upstream's plugin_name of a provision: the class's provisioner, else the one the claim was handed to. */
function claimProvisioner(claim: PersistentVolumeClaim, classes: readonly StorageClass[]): string {
  const cls = classes.find((c) => c.metadata.name === claimClass(claim));
  return cls?.provisioner || claim.metadata.annotations?.[annStorageProvisioner] || pluginNameNotAvailable;
}

function volumeNamed(plan: readonly PlanStep[], seen: readonly PersistentVolume[], name: string) {
  for (let i = plan.length - 1; i >= 0; i--) {
    const s = plan[i];
    if ((s?.op === "update-volume" || s?.op === "update-volume-status") && s.volume.metadata.name === name)
      return s.volume;
  }
  return seen.find((v) => v.metadata.name === name);
}

/** Which steps of a plan the metrics follow, and what each means (pure). */
export function meaningOfSteps(on: DecidedOn, steps: readonly PlanStep[]): Map<PlanStep, StepMeaning> {
  const out = new Map<PlanStep, StepMeaning>();
  for (const step of steps) {
    if (on.kind === "volume") {
      if (step.op === "event" && step.reason === reason.volumeFailedDelete)
        out.set(step, { kind: "delete-failed" });
      continue;
    }
    const before = on.claim;
    if (step.op === "update-claim") {
      if (!claimHasClass(before) && claimHasClass(step.claim)) out.set(step, { kind: "retroactive" });
      else {
        const after = step.claim.metadata.annotations?.[annStorageProvisioner];
        if (after && after !== before.metadata.annotations?.[annStorageProvisioner])
          out.set(step, { kind: "provision-handoff", plugin: after });
      }
    } else if (
      step.op === "update-claim-status" &&
      step.claim.status?.phase === claimPhase.bound &&
      before.status?.phase !== claimPhase.bound
    ) {
      const volume = volumeNamed(steps, on.volumes, step.claim.spec.volumeName ?? "");
      if (volume && isProvisionedForClaim(volume, before)) {
        const plugin = claimProvisioner(step.claim, on.classes);
        out.set(step, { kind: "provisioned-bound", plugin, startedAt: before.metadata.creationTimestamp });
      }
    }
  }
  return out;
}

/** Seconds from an RFC 3339 time to now; undefined when the time is missing, malformed or ahead. */
export function secondsSince(time: unknown, now: Date): number | undefined {
  if (typeof time !== "string" || time === "") return undefined;
  const at = Date.parse(time);
  if (Number.isNaN(at) || at > now.getTime()) return undefined;
  return (now.getTime() - at) / 1000;
}

const dns1123Subdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Recently observed deleted volumes (by uid), so a repeated DELETE event is not timed twice. */
const RECENT_DELETES = 1024;

/**
 * The binder's hooks for the metrics: tag a plan's steps when it is decided,
 * count them when they run, set the gauges from a resync's lists, and time
 * a deletion when the volume's DELETE event arrives.
 */
export class BinderInstruments {
  readonly metrics: BinderMetrics;
  private readonly now: () => Date;
  // Steps are the plan's own objects; the executors receive the same ones.
  private readonly meanings = new WeakMap<PlanStep, StepMeaning>();
  private readonly recentDeletes = new Set<string>();

  constructor(metrics: BinderMetrics, now: () => Date = () => new Date()) {
    this.metrics = metrics;
    this.now = now;
  }

  /** Returns the plan unchanged, its steps remembered for the executors. */
  decided<P extends Plan<PlanStep, FollowUp>>(on: DecidedOn, plan: P): P {
    for (const [step, meaning] of meaningOfSteps(on, plan.steps)) this.meanings.set(step, meaning);
    return plan;
  }

  inventory(claims: readonly PersistentVolumeClaim[], volumes: readonly PersistentVolume[]): void {
    recordInventory(this.metrics, countInventory(claims, volumes));
  }

  /** Wraps each executor: a tagged step is counted once it succeeds or throws. */
  executors(inner: Executors<PlanStep, FollowUp>): Executors<PlanStep, FollowUp> {
    const wrapped: Record<string, Executor<PlanStep, FollowUp, never>> = {};
    for (const [op, execute] of Object.entries(inner) as [string, Executor<PlanStep, FollowUp, never>][]) {
      wrapped[op] = async (step, run) => {
        const meaning = this.meanings.get(step);
        if (!meaning) return execute(step, run);
        try {
          const done = await execute(step, run);
          this.succeeded(meaning);
          return done;
        } catch (err) {
          this.failed(meaning);
          throw err;
        }
      };
    }
    return wrapped as unknown as Executors<PlanStep, FollowUp>;
  }

  /**
   * A volume's DELETE event: a Released or Failed volume with reclaim policy
   * Delete ends its delete operation here, timed from its last phase
   * transition (when it was released). `provisionerOf` names the class's
   * provisioner, upstream's plugin_name for external deleters.
   */
  async volumeGone(
    copy: PersistentVolume,
    provisionerOf: (className: string) => Promise<string | undefined>,
  ): Promise<void> {
    // The copy is the event's, untrusted: a malformed one is simply not timed, and never fails the event.
    try {
      await this.timeDeletion(copy, provisionerOf);
    } catch {
      // nothing to count
    }
  }

  private async timeDeletion(
    copy: PersistentVolume,
    provisionerOf: (className: string) => Promise<string | undefined>,
  ): Promise<void> {
    if (!copy.metadata || !copy.spec || typeof copy.spec !== "object") return;
    const phase = copy.status?.phase;
    if (copy.spec.persistentVolumeReclaimPolicy !== "Delete") return;
    if (phase !== volumePhase.released && phase !== volumePhase.failed) return;
    const seconds = secondsSince(copy.status?.lastPhaseTransitionTime, this.now());
    if (seconds === undefined) return;
    const uid = text(copy.metadata.uid) || text(copy.metadata.name);
    if (this.recentDeletes.has(uid)) return;
    this.recentDeletes.add(uid);
    if (this.recentDeletes.size > RECENT_DELETES) {
      const oldest = this.recentDeletes.values().next().value;
      if (oldest !== undefined) this.recentDeletes.delete(oldest);
    }
    const className = text(copy.spec.storageClassName);
    const lookup = dns1123Subdomain.test(className) && className.length <= 253;
    const plugin = (lookup ? await provisionerOf(className).catch(() => undefined) : undefined) ?? "";
    this.metrics.operationSeconds.observe(
      { plugin_name: plugin || pluginNameNotAvailable, operation_name: volumeOperation.delete },
      seconds,
    );
  }

  private succeeded(m: StepMeaning): void {
    switch (m.kind) {
      case "retroactive":
        this.metrics.retroactive.inc();
        return;
      case "provisioned-bound": {
        const seconds = secondsSince(m.startedAt, this.now());
        if (seconds !== undefined)
          this.metrics.operationSeconds.observe(
            { plugin_name: m.plugin, operation_name: volumeOperation.provision },
            seconds,
          );
        return;
      }
      case "delete-failed":
        // Upstream finds no deleter plugin, so its plugin_name is N/A.
        this.metrics.operationErrors.inc({
          plugin_name: pluginNameNotAvailable,
          operation_name: volumeOperation.delete,
        });
        return;
      case "provision-handoff":
        return;
    }
  }

  private failed(m: StepMeaning): void {
    switch (m.kind) {
      case "retroactive":
        // Upstream counts every attempt in the total, failed ones in both.
        this.metrics.retroactive.inc();
        this.metrics.retroactiveErrors.inc();
        return;
      case "provision-handoff":
        this.metrics.operationErrors.inc({
          plugin_name: m.plugin,
          operation_name: volumeOperation.provision,
        });
        return;
      case "provisioned-bound":
      case "delete-failed":
        return;
    }
  }
}
