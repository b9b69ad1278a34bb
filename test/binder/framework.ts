// Table-test framework for the binder's pure decisions, in the shape of
// upstream's binder tests: initial objects, one sync, expected objects and
// Events. Plans are applied to an in-memory world the way the API server
// would apply the writes (spec writes keep status, status writes keep spec).
import assert from "node:assert/strict";
import { claimPhase, volumePhase } from "../../shared/binder/constants.ts";
import type { FollowUp, SyncPlan } from "../../shared/binder/plan.ts";
import { syncClaim } from "../../shared/binder/sync-claim.ts";
import { syncVolume } from "../../shared/binder/sync-volume.ts";
import type { PersistentVolume, PersistentVolumeClaim, Pod, StorageClass } from "../../shared/kube/types.ts";

export const testNamespace = "default";
export const now = "2026-01-01T00:00:00Z";
export const classEmpty = "";
export const classGold = "gold";
export const classSilver = "silver";
export const classWait = "wait";
export const classExternal = "external";
export const mockProvisioner = "example.com/mock-provisioner";

export const annBoundByController = "pv.kubernetes.io/bound-by-controller";
export const annBindCompleted = "pv.kubernetes.io/bind-completed";
export const annDynamicallyProvisioned = "pv.kubernetes.io/provisioned-by";
export const annStorageProvisioner = "volume.kubernetes.io/storage-provisioner";
export const annBetaStorageProvisioner = "volume.beta.kubernetes.io/storage-provisioner";
export const annSelectedNode = "volume.kubernetes.io/selected-node";

const provisionerAnnotations = new Set([
  annDynamicallyProvisioned,
  annStorageProvisioner,
  annBetaStorageProvisioner,
]);

function annotate(keys: string[]): Record<string, string> | undefined {
  if (keys.length === 0) return undefined;
  return Object.fromEntries(keys.map((k) => [k, provisionerAnnotations.has(k) ? mockProvisioner : "yes"]));
}

/** A volume as upstream's tests build it: RWO+ROX, Filesystem, bound to a claim in the test namespace when named. */
export function newVolume(
  name: string,
  capacity: string,
  boundToClaimUid: string,
  boundToClaimName: string,
  phase: string,
  reclaimPolicy: string,
  storageClass: string,
  ...annotations: string[]
): PersistentVolume {
  const v: PersistentVolume = {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name, resourceVersion: "1" },
    spec: {
      capacity: { storage: capacity },
      accessModes: ["ReadWriteOnce", "ReadOnlyMany"],
      persistentVolumeReclaimPolicy: reclaimPolicy,
      storageClassName: storageClass,
      volumeMode: "Filesystem",
      csi: { driver: "hostpath.csi.k8s.io", volumeHandle: name },
    },
    status: phase ? { phase } : {},
  };
  if (boundToClaimName) {
    v.spec.claimRef = {
      kind: "PersistentVolumeClaim",
      apiVersion: "v1",
      namespace: testNamespace,
      name: boundToClaimName,
      ...(boundToClaimUid ? { uid: boundToClaimUid } : {}),
    };
  }
  const a = annotate(annotations);
  if (a) v.metadata.annotations = a;
  return v;
}

/** A claim as upstream's tests build it; a Bound claim carries access modes and its request as capacity. */
export function newClaim(
  name: string,
  uid: string,
  capacity: string,
  boundToVolume: string,
  phase: string,
  storageClass: string | undefined,
  ...annotations: string[]
): PersistentVolumeClaim {
  const c: PersistentVolumeClaim = {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace: testNamespace, uid, resourceVersion: "1" },
    spec: {
      accessModes: ["ReadWriteOnce", "ReadOnlyMany"],
      resources: { requests: { storage: capacity } },
      volumeMode: "Filesystem",
      ...(boundToVolume ? { volumeName: boundToVolume } : {}),
      ...(storageClass !== undefined ? { storageClassName: storageClass } : {}),
    },
    status: { phase },
  };
  const a = annotate(annotations);
  if (a) c.metadata.annotations = a;
  if (phase === claimPhase.bound) {
    c.status = { phase, accessModes: [...(c.spec.accessModes ?? [])], capacity: { storage: capacity } };
  }
  return c;
}

export function withLabels<T extends PersistentVolume>(labels: Record<string, string>, v: T): T {
  return { ...v, metadata: { ...v.metadata, labels: { ...labels } } };
}

export function withLabelSelector(
  labels: Record<string, string>,
  c: PersistentVolumeClaim,
): PersistentVolumeClaim {
  return { ...c, spec: { ...c.spec, selector: { matchLabels: { ...labels } } } };
}

export function withExpectedCapacity(capacity: string, c: PersistentVolumeClaim): PersistentVolumeClaim {
  return { ...c, status: { ...c.status, capacity: { storage: capacity } } };
}

export function withVolumeMode<T extends PersistentVolume | PersistentVolumeClaim>(mode: string, o: T): T {
  return { ...o, spec: { ...o.spec, volumeMode: mode } };
}

/** The object names a VolumeAttributesClass; undefined leaves the field unset. */
export function withVolumeAttributesClass<T extends PersistentVolume | PersistentVolumeClaim>(
  name: string | undefined,
  o: T,
): T {
  const spec = { ...o.spec };
  if (name === undefined) delete spec.volumeAttributesClassName;
  else spec.volumeAttributesClassName = name;
  return { ...o, spec };
}

/** A claim whose status records `name` as its current VolumeAttributesClass (as bind sets it from the volume). */
export function withCurrentVolumeAttributesClass(
  name: string,
  c: PersistentVolumeClaim,
): PersistentVolumeClaim {
  return { ...c, status: { ...c.status, currentVolumeAttributesClassName: name } };
}

export function withAccessModes(modes: string[], c: PersistentVolumeClaim): PersistentVolumeClaim {
  return { ...c, spec: { ...c.spec, accessModes: modes } };
}

export function withAnnotation<T extends PersistentVolume | PersistentVolumeClaim>(
  key: string,
  value: string,
  o: T,
): T {
  return { ...o, metadata: { ...o.metadata, annotations: { ...o.metadata.annotations, [key]: value } } };
}

export function withReclaimPolicy(policy: string, v: PersistentVolume): PersistentVolume {
  return { ...v, spec: { ...v.spec, persistentVolumeReclaimPolicy: policy } };
}

export function withoutCsi(v: PersistentVolume): PersistentVolume {
  const spec = { ...v.spec };
  delete spec.csi;
  return { ...v, spec: { ...spec, hostPath: { path: `/tmp/${v.metadata.name}` } } };
}

export function storageClass(
  name: string,
  provisioner: string,
  options: { bindingMode?: string; isDefault?: boolean; created?: string } = {},
): StorageClass {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: {
      name,
      creationTimestamp: options.created ?? "2025-01-01T00:00:00Z",
      ...(options.isDefault
        ? { annotations: { "storageclass.kubernetes.io/is-default-class": "true" } }
        : {}),
    },
    provisioner,
    reclaimPolicy: "Delete",
    volumeBindingMode: options.bindingMode ?? "Immediate",
  };
}

export function pod(name: string, claimName: string, nodeName?: string, phase = "Pending"): Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: testNamespace, uid: `uid-${name}` },
    spec: {
      ...(nodeName ? { nodeName } : {}),
      volumes: [{ name: "data", persistentVolumeClaim: { claimName } }],
    },
    status: { phase },
  };
}

export const defaultClasses: StorageClass[] = [
  storageClass(classWait, mockProvisioner, { bindingMode: "WaitForFirstConsumer" }),
  storageClass(classExternal, mockProvisioner),
];

/** The objects one test sees, changed only by applying plans. */
export class World {
  volumes = new Map<string, PersistentVolume>();
  claims = new Map<string, PersistentVolumeClaim>();
  events: string[] = [];
  eventMessages: string[] = [];
  writes = 0;
  readonly classes: StorageClass[];
  readonly pods: Pod[];

  constructor(
    volumes: PersistentVolume[],
    claims: PersistentVolumeClaim[],
    classes: StorageClass[],
    pods: Pod[],
  ) {
    for (const v of volumes) this.volumes.set(v.metadata.name, structuredClone(v));
    for (const c of claims) this.claims.set(`${c.metadata.namespace}/${c.metadata.name}`, structuredClone(c));
    this.classes = classes;
    this.pods = pods;
  }

  syncClaim(c: PersistentVolumeClaim): SyncPlan {
    return syncClaim(structuredClone(c), {
      volumes: [...this.volumes.values()].map((v) => structuredClone(v)),
      classes: this.classes,
      pods: this.pods,
      now,
    });
  }

  syncVolume(v: PersistentVolume): SyncPlan {
    const ref = v.spec.claimRef;
    const claim = ref ? this.claims.get(`${ref.namespace}/${ref.name}`) : undefined;
    return syncVolume(structuredClone(v), {
      claim: claim && structuredClone(claim),
      pods: this.pods,
      now,
    });
  }

  /** Applies a plan like the API server applies the writes; returns the follow-ups. */
  apply(plan: SyncPlan): FollowUp[] {
    for (const step of plan.steps) {
      switch (step.op) {
        case "event":
          this.events.push(`${step.type} ${step.reason}`);
          this.eventMessages.push(step.message);
          break;
        case "update-volume": {
          const old = this.volumes.get(step.volume.metadata.name)!;
          this.volumes.set(step.volume.metadata.name, {
            ...structuredClone(step.volume),
            status: old.status,
          });
          this.writes++;
          break;
        }
        case "update-volume-status": {
          const old = this.volumes.get(step.volume.metadata.name)!;
          this.volumes.set(step.volume.metadata.name, {
            ...old,
            status: structuredClone(step.volume.status),
          });
          this.writes++;
          break;
        }
        case "update-claim": {
          const key = `${step.claim.metadata.namespace}/${step.claim.metadata.name}`;
          const old = this.claims.get(key)!;
          this.claims.set(key, { ...structuredClone(step.claim), status: old.status });
          this.writes++;
          break;
        }
        case "update-claim-status": {
          const key = `${step.claim.metadata.namespace}/${step.claim.metadata.name}`;
          const old = this.claims.get(key)!;
          this.claims.set(key, { ...old, status: structuredClone(step.claim.status) });
          this.writes++;
          break;
        }
      }
    }
    return plan.followUps;
  }
}

/** Drops what the comparison should not see: resourceVersions and transition times. */
function normalize<T extends PersistentVolume | PersistentVolumeClaim>(o: T): T {
  const c = structuredClone(o) as T;
  delete c.metadata.resourceVersion;
  if (c.status) delete c.status.lastPhaseTransitionTime;
  const spec = c.spec as PersistentVolume["spec"];
  if (spec.claimRef) delete spec.claimRef.resourceVersion;
  return c;
}

export interface SyncCase {
  name: string;
  initialVolumes: PersistentVolume[];
  expectedVolumes: PersistentVolume[];
  initialClaims: PersistentVolumeClaim[];
  expectedClaims: PersistentVolumeClaim[];
  /** Every Event emitted, in order, as "Type Reason" (stricter than upstream, which checks a prefix). */
  expectedEvents: string[];
  /** The sync ends in an error (upstream's testSyncClaimError). */
  expectError?: boolean;
  test: "claim" | "volume";
  classes?: StorageClass[];
  pods?: Pod[];
}

export function runSyncCase(c: SyncCase): World {
  const world = new World(c.initialVolumes, c.initialClaims, c.classes ?? defaultClasses, c.pods ?? []);
  const plan =
    c.test === "claim" ? world.syncClaim(c.initialClaims[0]!) : world.syncVolume(c.initialVolumes[0]!);
  world.apply(plan);
  assert.equal(plan.error !== undefined, c.expectError ?? false, `error: ${plan.error ?? "none"}`);
  assertWorld(world, c.expectedVolumes, c.expectedClaims);
  assert.deepEqual(world.events, c.expectedEvents, "events");
  return world;
}

export function assertWorld(
  world: World,
  volumes: PersistentVolume[],
  claims: PersistentVolumeClaim[],
): void {
  assert.deepEqual([...world.volumes.values()].map(normalize), volumes.map(normalize), "volumes");
  assert.deepEqual([...world.claims.values()].map(normalize), claims.map(normalize), "claims");
}

/**
 * Upstream's multi-sync: sync the first object, then keep syncing whatever
 * changed, then everything, until a full pass writes nothing.
 */
export function runMultiSync(c: SyncCase, maxPasses = 20): World {
  const world = new World(c.initialVolumes, c.initialClaims, c.classes ?? defaultClasses, c.pods ?? []);
  world.apply(
    c.test === "claim" ? world.syncClaim(c.initialClaims[0]!) : world.syncVolume(c.initialVolumes[0]!),
  );
  for (let pass = 0; pass < maxPasses; pass++) {
    const before = world.writes;
    for (const claim of [...world.claims.values()]) world.apply(world.syncClaim(claim));
    for (const volume of [...world.volumes.values()]) world.apply(world.syncVolume(volume));
    if (world.writes === before) {
      assertWorld(world, c.expectedVolumes, c.expectedClaims);
      return world;
    }
  }
  assert.fail(`no steady state after ${maxPasses} passes`);
}

export { claimPhase, volumePhase };
