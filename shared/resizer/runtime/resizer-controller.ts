// The CSI external-resizer as a stateless controller on the shared runtime
// (shared/controller): its two controllers (expansion, modification) as two
// key kinds of one spec. Claim and PV events name claims; the loader reads
// the claim, its PV and what the decision may need (the pods using it, after
// an offline-only driver refused; the classes it names); the executors patch
// the claim and PV, call the driver and record Events. What must survive
// lives in the claim: allocatedResources and its statuses, conditions, and
// the backoff annotations.
import { ControllerRuntime, type ControllerSpec, type Executors } from "../../controller/index.ts";
import type { CsiClient } from "../../csi/client.ts";
import { CsiError, grpcCodeOf } from "../../csi/errors.ts";
import { BadRequestError, RetryLaterError } from "../../http/errors.ts";
import { getOptional } from "../../kube/api-errors.ts";
import { claimFromEvent, volumeFromEvent } from "../../kube/event-copies.ts";
import { EventRecorder, type EventSink } from "../../kube/event-recorder.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import { podClaimNames } from "../../kube/pod-claims.ts";
import { formatBytes } from "../../kube/quantity.ts";
import {
  persistentVolumeClaims,
  persistentVolumes,
  pods,
  volumeAttributesClasses,
} from "../../kube/resources.ts";
import { type RetryInterval, upstreamRetryInterval } from "../../kube/retry-interval.ts";
import { readSecretData } from "../../kube/secrets.ts";
import type {
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
  SecretReference,
  VolumeAttributesClass,
} from "../../kube/types.ts";
import { markedInUse } from "../claim-status.ts";
import { eventComponent } from "../constants.ts";
import { planExpansion } from "../expand.ts";
import { planModification } from "../modify.ts";
import type {
  CsiFailure,
  DriverAbilities,
  ResizerCarry,
  ResizerKey,
  ResizerState,
  ResizerStep,
} from "../steps.ts";

export interface ResizerReport {
  /** "claim <namespace>/<name>" (expansion) or "claim <namespace>/<name> (modify)". */
  object: string;
  outcome: string;
  writes: number;
}

export interface ResizerControllerOptions {
  kube: KubeJsonClient;
  csi: CsiClient;
  driverName: string;
  /** What the driver can do, read once at start (readAbilities). */
  abilities: DriverAbilities;
  /** Where Events go; default a recorder with source "external-resizer <driver>". */
  events?: EventSink;
  /** --extra-modify-metadata. Default false. */
  extraModifyMetadata?: boolean;
  /** --handle-volume-inuse-error. Default true. */
  handleVolumeInUseError?: boolean;
  /** RETRY_INTERVAL_START_SECONDS / RETRY_INTERVAL_MAX_SECONDS; upstream's 1 s and 5 min by default. */
  retryInterval?: RetryInterval;
  now?: () => Date;
  maxAttempts?: number;
  resyncConcurrency?: number;
  /** WORKERS (--workers): claims synced at once; undefined: no cap. */
  workers?: number | undefined;
  /** Rounds one sync may chain (a test stops a protocol midway with a small one). Default 16. */
  maxRounds?: number;
}

/** The driver's abilities: controller capabilities (cached by the client) and the node's EXPAND_VOLUME. */
export async function readAbilities(csi: CsiClient): Promise<DriverAbilities> {
  const c = await csi.capabilities();
  // A controller-only plugin may not serve the Node service: then it cannot expand on nodes.
  const node = await csi.nodeGetCapabilities().catch(() => ({ capabilities: [] }));
  return {
    controllerExpand: c.expandVolume,
    nodeExpand: node.capabilities.some((n) => n.rpc?.type === "EXPAND_VOLUME"),
    modify: c.modifyVolume,
    singleNodeMultiWriter: c.singleNodeMultiWriter,
  };
}

type ResizerSpec = ControllerSpec<ResizerKey, ResizerState, ResizerStep, never, ResizerCarry, ResizerReport>;

function keyId(key: ResizerKey): string {
  return `claim ${key.namespace}/${key.name}${key.kind === "modify" ? " (modify)" : ""}`;
}

function failureOf(err: unknown): CsiFailure {
  const message = err instanceof Error ? err.message : String(err);
  return {
    code: grpcCodeOf(err),
    message,
    details: err instanceof CsiError ? err.details : message,
  };
}

function resizerSpec(o: ResizerControllerOptions): ResizerSpec {
  const { kube, csi, driverName, abilities } = o;
  const now = o.now ?? (() => new Date());
  const events: EventSink = o.events ?? new EventRecorder(kube, { component: eventComponent(driverName) });
  const expands = abilities.controllerExpand || abilities.nodeExpand;
  const modifies = abilities.modify;
  const extraModifyMetadata = o.extraModifyMetadata ?? false;
  const handleInUse = o.handleVolumeInUseError ?? true;
  const retryInterval = o.retryInterval ?? upstreamRetryInterval;
  const answer = (object: string, outcome: string) => ({ reports: [{ object, outcome, writes: 0 }] });

  function claimKeys(namespace: string, name: string): ResizerKey[] {
    return [
      ...(expands ? [{ kind: "expand" as const, namespace, name }] : []),
      ...(modifies ? [{ kind: "modify" as const, namespace, name }] : []),
    ];
  }

  async function secretsOf(ref: SecretReference | undefined): Promise<Record<string, string> | undefined> {
    if (!ref?.name || !ref.namespace) return undefined;
    const read = await readSecretData(kube, { name: ref.name, namespace: ref.namespace });
    if (!read.ok) throw new Error(read.error);
    return read.value;
  }

  /** A pod that is not finished and lists the claim (upstream's in-use check of offline drivers). */
  async function podUsing(namespace: string, claimName: string): Promise<string | undefined> {
    const list = await kube.list<Pod>(pods, { namespace });
    const user = list.items.find(
      (p) =>
        p.status?.phase !== "Succeeded" &&
        p.status?.phase !== "Failed" &&
        podClaimNames(p).includes(claimName),
    );
    return user?.metadata.name;
  }

  async function classesOf(claim: PersistentVolumeClaim): Promise<Map<string, VolumeAttributesClass>> {
    const names = new Set(
      [
        claim.spec.volumeAttributesClassName,
        claim.status?.modifyVolumeStatus?.targetVolumeAttributesClassName,
      ].filter((n): n is string => typeof n === "string" && n !== ""),
    );
    const found = new Map<string, VolumeAttributesClass>();
    for (const name of names) {
      const vac = await getOptional(() => kube.get<VolumeAttributesClass>(volumeAttributesClasses, name));
      if (vac) found.set(name, vac);
    }
    return found;
  }

  const executors: Executors<ResizerStep, ResizerKey, ResizerCarry> = {
    async "patch-claim-status"(step, run) {
      const id = `claim ${step.namespace}/${step.name}`;
      const rv = run.precondition(id, step.resourceVersion);
      const body = { ...(rv ? { metadata: { resourceVersion: rv } } : {}), status: step.status };
      const written = await kube.patch<PersistentVolumeClaim>(
        persistentVolumeClaims,
        step.name,
        step.namespace,
        body,
        "merge",
        { subresource: "status" },
      );
      run.wrote(id, written.metadata.resourceVersion);
      if (step.carry) run.carry(step.carry);
      return 1;
    },
    async "patch-claim-annotations"(step, run) {
      const id = `claim ${step.namespace}/${step.name}`;
      const rv = run.precondition(id, step.resourceVersion);
      const body = { metadata: { annotations: step.annotations, ...(rv ? { resourceVersion: rv } : {}) } };
      const written = await kube.patch<PersistentVolumeClaim>(
        persistentVolumeClaims,
        step.name,
        step.namespace,
        body,
        "merge",
      );
      run.wrote(id, written.metadata.resourceVersion);
      return 1;
    },
    async "patch-volume"(step, run) {
      await kube.patch<PersistentVolume>(
        persistentVolumes,
        step.name,
        undefined,
        {
          ...(step.resourceVersion ? { metadata: { resourceVersion: step.resourceVersion } } : {}),
          spec: step.spec,
        },
        "merge",
      );
      run.carry(step.carry);
      return 1;
    },
    async event(step, run) {
      run.defer(events.event(step.claim, step.type, step.reason, step.message));
      return 0;
    },
    async "expand-volume"(step, run) {
      try {
        const secrets = await secretsOf(step.secretRef);
        const response = await csi.controllerExpandVolume({
          ...step.request,
          ...(secrets ? { secrets } : {}),
        });
        // A driver answering 0 has not said the size: the requested one stands.
        const bytes =
          response.capacityBytes > 0n
            ? response.capacityBytes
            : (step.request.capacityRange?.requiredBytes ?? 0n);
        run.carry({
          kind: "resized",
          target: step.target,
          capacity: formatBytes(bytes),
          nodeExpansionRequired: response.nodeExpansionRequired,
        });
      } catch (err) {
        run.carry({ kind: "expand-failed", target: step.target, failure: failureOf(err) });
      }
      return 0;
    },
    async "modify-volume"(step, run) {
      try {
        const secrets = await secretsOf(step.secretRef);
        await csi.controllerModifyVolume({
          volumeId: step.volumeId,
          mutableParameters: step.mutableParameters,
          ...(secrets ? { secrets } : {}),
        });
        run.carry({ kind: "modified", target: step.target });
      } catch (err) {
        run.carry({ kind: "modify-failed", target: step.target, failure: failureOf(err) });
      }
      return 0;
    },
    async "retry-later"(step) {
      throw new RetryLaterError(step.message, step.delaySeconds);
    },
  };

  return {
    keyId,
    async keysOf(e) {
      if (e.apiVersion !== "v1") return [];
      if (e.kind === "PersistentVolumeClaim") {
        if (!e.namespace) throw new BadRequestError("a PersistentVolumeClaim event must name its namespace");
        const object = `claim ${e.namespace}/${e.name}`;
        if (e.action === "delete") return answer(object, "deleted");
        const copy = claimFromEvent(e.object);
        // Only a Bound claim is resized or modified; binding it is an event of its own.
        if (copy && (copy.status?.phase !== "Bound" || !copy.spec?.volumeName))
          return answer(object, "not Bound (the event's copy)");
        return claimKeys(e.namespace, e.name);
      }
      if (e.kind === "PersistentVolume") {
        const object = `volume ${e.name}`;
        if (e.action === "delete") return answer(object, "deleted");
        const copy = volumeFromEvent(e.object);
        if (copy && copy.spec?.csi?.driver !== driverName)
          return answer(object, `not a volume of ${driverName} (the event's copy)`);
        const pv = copy ?? (await getOptional(() => kube.get<PersistentVolume>(persistentVolumes, e.name)));
        if (!pv) return answer(object, "volume is gone");
        if (pv.spec.csi?.driver !== driverName) return answer(object, `not a volume of ${driverName}`);
        const ref = pv.spec.claimRef;
        if (!ref?.name || !ref.namespace) return answer(object, "bound to no claim");
        return claimKeys(ref.namespace, ref.name);
      }
      return [];
    },
    async load(key, { round, carried }) {
      const claim = await getOptional(() =>
        kube.get<PersistentVolumeClaim>(persistentVolumeClaims, key.name, key.namespace),
      );
      if (!claim) return undefined;
      const volumeName = claim.spec.volumeName;
      const pv = volumeName
        ? await getOptional(() => kube.get<PersistentVolume>(persistentVolumes, volumeName))
        : undefined;
      const carry = round > 1 ? carried.at(-1) : undefined;
      const base = { driverName, now: now(), retryInterval, claim, pv, ...(carry ? { carried: carry } : {}) };
      if (key.kind === "expand") {
        // Only after the driver said FailedPrecondition does upstream look at the claim's pods.
        const inUseBy =
          handleInUse && !carry && markedInUse(claim) ? await podUsing(key.namespace, key.name) : undefined;
        return { kind: "expand", abilities, ...base, ...(inUseBy ? { inUseBy } : {}) };
      }
      return { kind: "modify", ...base, classes: await classesOf(claim), extraModifyMetadata };
    },
    absent: () => "claim is gone",
    decide: (state) => (state.kind === "expand" ? planExpansion(state) : planModification(state)),
    executors,
    report: (r, key) => ({ object: keyId(key), outcome: r.outcome, writes: r.writes }),
    async resyncKeys() {
      const list = await kube.list<PersistentVolume>(persistentVolumes);
      const keys: ResizerKey[] = [];
      for (const pv of list.items) {
        const ref = pv.spec.claimRef;
        if (pv.spec.csi?.driver !== driverName || !ref?.name || !ref.namespace) continue;
        keys.push(...claimKeys(ref.namespace, ref.name));
      }
      return { waves: [keys], counts: { claims: new Set(keys.map((k) => `${k.namespace}/${k.name}`)).size } };
    },
  };
}

export class ResizerController extends ControllerRuntime<
  ResizerKey,
  ResizerState,
  ResizerStep,
  never,
  ResizerCarry,
  ResizerReport
> {
  readonly driverName: string;
  readonly abilities: DriverAbilities;

  constructor(o: ResizerControllerOptions) {
    super(resizerSpec(o), {
      maxAttempts: o.maxAttempts ?? 5,
      resyncConcurrency: Math.max(1, o.resyncConcurrency ?? 4),
      workers: o.workers,
      ...(o.maxRounds !== undefined ? { maxRounds: o.maxRounds } : {}),
    });
    this.driverName = o.driverName;
    this.abilities = o.abilities;
  }

  /** One claim's expansion, to its end or its first failure. */
  syncExpansion(namespace: string, name: string): Promise<ResizerReport> {
    return this.sync({ kind: "expand", namespace, name });
  }

  /** One claim's VolumeAttributesClass modification. */
  syncModification(namespace: string, name: string): Promise<ResizerReport> {
    return this.sync({ kind: "modify", namespace, name });
  }
}
