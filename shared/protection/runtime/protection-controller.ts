// The pvc-protection and pv-protection controllers of kube-controller-manager
// as one stateless controller on the shared runtime (shared/controller): each
// event names the claims and PVs to check, each check takes the object from
// the event (or reads it), decides (../decide-*.ts) and writes the whole
// object back conditional on that copy's resourceVersion. A lost race is
// decided again on a fresh read; a lost event is caught by the resync.
import { ControllerRuntime, type ControllerSpec, type Executors } from "../../controller/index.ts";
import type { ControllerEvent } from "../../http/controller-function.ts";
import { BadRequestError } from "../../http/errors.ts";
import { getOptional } from "../../kube/api-errors.ts";
import { claimFromEvent, volumeFromEvent } from "../../kube/event-copies.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import { podClaimNames } from "../../kube/pod-claims.ts";
import { persistentVolumeClaims, persistentVolumes, pods } from "../../kube/resources.ts";
import {
  finalizerChangeOps,
  type JsonPatchOp,
  TestFailedError,
  testedPatch,
} from "../../kube/tested-patch.ts";
import type { KubeObject, PersistentVolume, PersistentVolumeClaim, Pod } from "../../kube/types.ts";
import { type ClaimInput, claimNeedsNoSync, decideClaim } from "../decide-claim.ts";
import { decideVolume, volumeNeedsNoSync } from "../decide-volume.ts";
import { podFromEvent } from "../pod-from-event.ts";
import { podMayFreeClaims } from "../pod-usage.ts";
import { LivePodLists } from "./live-pod-lists.ts";
import { type ProtectionMetrics, protectionMetrics } from "./protection-metrics.ts";
import { claimPlan, type ProtectionStep, volumePlan } from "./protection-plan.ts";

/** Tested-patch ops for a finalizer change decided on `basis`; a copy too thin to pin is a lost race (read live). */
function pinnedOps(
  basis: KubeObject,
  finalizers: readonly string[],
  pinned: readonly string[],
): JsonPatchOp[] {
  const ops = finalizerChangeOps(basis, finalizers, pinned);
  if (!ops)
    throw new TestFailedError(
      `${basis.kind ?? "object"} ${basis.metadata.name}: the event's copy cannot be pinned`,
    );
  return ops;
}

export interface ProtectionReport {
  /** "claim <namespace>/<name>", "volume <name>" or "pod <namespace>/<name>". */
  object: string;
  outcome: string;
  writes: number;
}

export interface ProtectionControllerOptions {
  kube: KubeJsonClient;
  metrics?: ProtectionMetrics;
  /** Attempts of one check while its writes lose races. Default 5. */
  maxAttempts?: number;
  /** Checks a resync runs at once. Default 4. */
  resyncConcurrency?: number;
  /** Keys synced at once, events and resync together (WORKERS); default no cap. */
  workers?: number | undefined;
}

interface ClaimSyncHints {
  /** The claim as a list or the event carried it, used for the first attempt instead of a GET. */
  copy?: PersistentVolumeClaim;
  /** performance.now() once `copy` was in hand: a live pod list must start after it. */
  copiedAt?: number;
  /** `copy` came from the event, not from a list of ours: a hint whose writes must be tested patches. */
  fromEvent?: boolean;
  /** Pods at hand: a reason to keep the finalizer, never to remove it. */
  cachedPods?: readonly Pod[];
}

type ProtectionKey =
  | ({ kind: "claim"; namespace: string; name: string } & ClaimSyncHints)
  | { kind: "volume"; name: string; copy?: PersistentVolume; fromEvent?: boolean };

/** `basis`: the event's copy the state was taken from, instead of a read (its writes are then tested patches). */
type ProtectionState =
  | { kind: "claim"; input: ClaimInput; basis?: PersistentVolumeClaim }
  | { kind: "volume"; volume: PersistentVolume; basis?: PersistentVolume };

function keyId(key: ProtectionKey): string {
  return key.kind === "claim" ? `claim ${key.namespace}/${key.name}` : `volume ${key.name}`;
}

function namespaceOf(e: ControllerEvent): string {
  if (!e.namespace) throw new BadRequestError(`a ${e.kind} event must name the object's namespace`);
  return e.namespace;
}

function protectionSpec(
  kube: KubeJsonClient,
  metrics: ProtectionMetrics,
): ControllerSpec<ProtectionKey, ProtectionState, ProtectionStep, never, never, ProtectionReport> {
  const answer = (object: string, outcome: string) => ({ reports: [{ object, outcome, writes: 0 }] });
  const livePods = new LivePodLists(kube, metrics);

  /** A deleted, terminated or unscheduled pod may free its claims: check each of them. */
  async function podKeys(e: ControllerEvent, namespace: string) {
    const object = `pod ${namespace}/${e.name}`;
    const deleted = e.action === "delete";
    let pod: Pod | undefined;
    if (e.object) pod = podFromEvent(e.object);
    else if (!deleted) pod = await getOptional(() => kube.get<Pod>(pods, e.name, namespace));
    // Which claims a vanished pod named is not known any more; the resync checks every claim.
    if (!pod) return answer(object, "pod is gone and its volumes unknown; left to the resync");
    if (!podMayFreeClaims(pod, deleted))
      return answer(object, "scheduled and not terminated: frees no claim");
    const claims = podClaimNames(pod);
    if (claims.length === 0) return answer(object, "uses no claim");
    // A deleted pod's copy is its last state: it uses nothing any more.
    const cachedPods = deleted ? [] : [pod];
    return claims.map((name): ProtectionKey => ({ kind: "claim", namespace, name, cachedPods }));
  }

  const executors: Executors<ProtectionStep, ProtectionKey> = {
    async "write-claim"(step) {
      const { name, namespace } = step.claim.metadata;
      if (step.basis) {
        // An event's copy is a hint, not the truth: the patch applies only where the stored claim agrees.
        const pinned = step.change === "removed" ? ["/metadata/deletionTimestamp"] : [];
        const finalizers = step.claim.metadata.finalizers ?? [];
        await testedPatch(
          kube,
          persistentVolumeClaims,
          name,
          namespace,
          pinnedOps(step.basis, finalizers, pinned),
        );
      } else await kube.replace(persistentVolumeClaims, step.claim);
      const counter = step.change === "added" ? metrics.finalizersAdded : metrics.finalizersRemoved;
      counter.inc({ kind: "PersistentVolumeClaim" });
      return 1;
    },
    async "write-volume"(step) {
      if (step.basis) {
        const pinned = step.change === "removed" ? ["/metadata/deletionTimestamp", "/status/phase"] : [];
        const finalizers = step.volume.metadata.finalizers ?? [];
        const ops = pinnedOps(step.basis, finalizers, pinned);
        await testedPatch(kube, persistentVolumes, step.volume.metadata.name, undefined, ops);
      } else await kube.replace(persistentVolumes, step.volume);
      const counter = step.change === "added" ? metrics.finalizersAdded : metrics.finalizersRemoved;
      counter.inc({ kind: "PersistentVolume" });
      return 1;
    },
    async held(step) {
      metrics.keptInUse.inc({ kind: step.kind });
      return 0;
    },
  };

  return {
    keyId,
    async keysOf(e) {
      if (e.apiVersion !== "v1") return [];
      switch (e.kind) {
        case "PersistentVolumeClaim": {
          const namespace = namespaceOf(e);
          const object = `claim ${namespace}/${e.name}`;
          // A claim that is gone was let go already: upstream reacts to adds and updates only.
          if (e.action === "delete") return answer(object, "deleted");
          const copy = claimFromEvent(e.object);
          if (copy && claimNeedsNoSync(copy)) return answer(object, "protected (the event's copy)");
          // The first attempt decides on the event's copy, as upstream on its informer's: the write is
          // conditional on its resourceVersion, so a stale copy loses the race and the retry reads live.
          const own = copy?.metadata.name === e.name && (copy.metadata.namespace ?? "") === namespace;
          return [
            {
              kind: "claim",
              namespace,
              name: e.name,
              ...(own ? { copy, copiedAt: performance.now(), fromEvent: true } : {}),
            },
          ];
        }
        case "PersistentVolume": {
          if (e.action === "delete") return answer(`volume ${e.name}`, "deleted");
          const copy = volumeFromEvent(e.object);
          if (copy && volumeNeedsNoSync(copy))
            return answer(`volume ${e.name}`, "protected (the event's copy)");
          return [
            {
              kind: "volume",
              name: e.name,
              ...(copy?.metadata.name === e.name ? { copy, fromEvent: true } : {}),
            },
          ];
        }
        case "Pod":
          return podKeys(e, namespaceOf(e));
        default:
          return [];
      }
    },
    async load(key, { attempt }) {
      // A retry reads afresh: the copy and the pass's lists lost the race that brought us here.
      const first = attempt === 1;
      if (key.kind === "volume") {
        if (first && key.copy)
          return { kind: "volume", volume: key.copy, ...(key.fromEvent ? { basis: key.copy } : {}) };
        const volume = await getOptional(() => kube.get<PersistentVolume>(persistentVolumes, key.name));
        return volume ? { kind: "volume", volume } : undefined;
      }
      const fromCopy = first && key.copy !== undefined && key.copiedAt !== undefined;
      const copiedAt = fromCopy ? key.copiedAt! : performance.now();
      const claim = fromCopy
        ? key.copy
        : await getOptional(() =>
            kube.get<PersistentVolumeClaim>(persistentVolumeClaims, key.name, key.namespace),
          );
      if (!claim) return undefined;
      const cachedPods = key.cachedPods ?? [];
      const basis = fromCopy && key.fromEvent ? { basis: claim } : {};
      // The decision says whether the pods at hand settle it; only then is the namespace listed.
      const asked = decideClaim({ claim, cachedPods });
      if (asked.op !== "list-pods") return { kind: "claim", input: { claim, cachedPods }, ...basis };
      const listed = await livePods.podsIn(asked.namespace, copiedAt);
      return { kind: "claim", input: { claim, cachedPods, livePods: listed }, ...basis };
    },
    absent: (key) => (key.kind === "claim" ? "claim is gone" : "volume is gone"),
    decide: (state) => {
      const plan =
        state.kind === "claim" ? claimPlan(decideClaim(state.input)) : volumePlan(decideVolume(state.volume));
      if (!state.basis) return plan;
      const basis = state.basis;
      return {
        ...plan,
        steps: plan.steps.map((step) =>
          step.op === "write-claim" && state.kind === "claim"
            ? { ...step, basis: basis as PersistentVolumeClaim }
            : step.op === "write-volume" && state.kind === "volume"
              ? { ...step, basis: basis as PersistentVolume }
              : step,
        ),
      };
    },
    executors,
    report: (r) => ({ object: r.id, outcome: r.outcome, writes: r.writes }),
    async resyncKeys() {
      const [claimList, volumeList] = await Promise.all([
        kube.list<PersistentVolumeClaim>(persistentVolumeClaims),
        kube.list<PersistentVolume>(persistentVolumes),
      ]);
      // Pod lists for these copies must start after they were read.
      const copiedAt = performance.now();
      const claims = claimList.items.filter((c) => !claimNeedsNoSync(c));
      const volumes = volumeList.items.filter((v) => !volumeNeedsNoSync(v));
      const keys: ProtectionKey[] = [
        ...claims.map((c): ProtectionKey => {
          const namespace = c.metadata.namespace ?? "";
          return { kind: "claim", namespace, name: c.metadata.name, copy: c, copiedAt };
        }),
        ...volumes.map((v): ProtectionKey => ({ kind: "volume", name: v.metadata.name, copy: v })),
      ];
      return { waves: [keys], counts: { claims: claims.length, volumes: volumes.length } };
    },
  };
}

export class ProtectionController extends ControllerRuntime<
  ProtectionKey,
  ProtectionState,
  ProtectionStep,
  never,
  never,
  ProtectionReport
> {
  constructor(o: ProtectionControllerOptions) {
    super(protectionSpec(o.kube, o.metrics ?? protectionMetrics()), {
      maxAttempts: o.maxAttempts ?? 5,
      resyncConcurrency: Math.max(1, o.resyncConcurrency ?? 4),
      workers: o.workers,
    });
  }

  /** One claim: read, decide (listing the namespace's pods if it must), write; a lost race decides again. */
  syncClaim(namespace: string, name: string, hints: ClaimSyncHints = {}): Promise<ProtectionReport> {
    return this.sync({ kind: "claim", namespace, name, ...hints });
  }

  /** One PV: read, decide, write; a lost race decides again. */
  syncVolume(name: string, copy?: PersistentVolume): Promise<ProtectionReport> {
    return this.sync({ kind: "volume", name, ...(copy ? { copy } : {}) });
  }
}
