import type { CsiClient } from "../../csi/client.ts";
import { classifyCsiError, GrpcCode, grpcCodeOf } from "../../csi/errors.ts";
import type { CreateVolumeRequest, Volume } from "../../csi/types.ts";
import { RetryLaterError } from "../../http/errors.ts";
import { getOptional, isAlreadyExists, isNotFound, isTransient } from "../../kube/api-errors.ts";
import { claimClass } from "../../kube/claim-class.ts";
import { claimFromEvent, volumeFromEvent } from "../../kube/event-copies.ts";
import type { EventSink } from "../../kube/event-recorder.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import { retryWhileLosingRaces } from "../../kube/optimistic-update.ts";
import { progressEventsDue } from "../../kube/progress-events.ts";
import { persistentVolumeClaims, persistentVolumes, volumeAttachments } from "../../kube/resources.ts";
import { readSecretData } from "../../kube/secrets.ts";
import { readStorageClass, type StorageClassCopy } from "../../kube/storage-class-copy.ts";
import { rfc3339 } from "../../kube/time.ts";
import type {
  PersistentVolume,
  PersistentVolumeClaim,
  StorageClass,
  VolumeAttachment,
} from "../../kube/types.ts";
import {
  annSelectedNode,
  provisioningFinalizer,
  pvDeletionProtectionFinalizer,
} from "../../kube/well-known.ts";
import { retrying } from "../../retry.ts";
import { buildPersistentVolume } from "../build-persistent-volume.ts";
import {
  annDeletionSecretName,
  annDeletionSecretNamespace,
  annProvisioningFailures,
  annProvisioningRetryAfter,
  message,
  reason,
} from "../constants.ts";
import {
  claimNeedsNothing,
  decideClaim,
  hasProvisioningIntent,
  isClaimForDriver,
  nextRetryDelaySeconds,
} from "../decide-claim.ts";
import { decideVolume, isVolumeForDriver, volumeNeedsNothing } from "../decide-volume.ts";
import type { ProvisionerOptions } from "../options.ts";
import { volumeNameForClaim } from "../volume-name.ts";
import { loadCreateVolumeRequest, type NodeTopologyCopies } from "./load-request.ts";
import { type ProvisionerMetrics, provisionerMetrics } from "./provisioner-metrics.ts";
import { protectSource, releaseSource } from "./source-protection.ts";

export interface ProvisionerReport {
  object: string;
  outcome: string;
  error?: string;
}

export interface ProvisionerEvent {
  action: "add" | "update" | "delete";
  kind: string;
  apiVersion: string;
  name: string;
  namespace?: string;
  /** The object as the event carried it (untrusted; absent in Reference mode). */
  object?: Record<string, unknown>;
}

export interface ProvisionerControllerOptions {
  kube: KubeJsonClient;
  csi: CsiClient;
  events: EventSink;
  driverName: string;
  options: ProvisionerOptions;
  metrics?: ProvisionerMetrics;
  now?: () => Date;
  /** Attempts per sync when writes conflict. Default 5. */
  maxAttempts?: number;
  resyncConcurrency?: number;
  /** Watched copies of every Node and CSINode, started on first use (see load-request.ts); none: list them per claim. */
  topology?: () => NodeTopologyCopies;
  /** A watched copy of the StorageClasses, started on first use (shared/kube/storage-class-copy.ts); none: GET each. */
  storageClasses?: () => StorageClassCopy;
}

function withoutFinalizer<T extends PersistentVolume | PersistentVolumeClaim>(o: T, finalizer: string): T {
  const finalizers = (o.metadata.finalizers ?? []).filter((f) => f !== finalizer);
  const metadata = { ...o.metadata, finalizers };
  return { ...o, metadata };
}

function withoutAnnotations<T extends PersistentVolume | PersistentVolumeClaim>(o: T, keys: string[]): T {
  if (!keys.some((k) => o.metadata.annotations?.[k] !== undefined)) return o;
  const annotations = { ...o.metadata.annotations };
  for (const k of keys) delete annotations[k];
  return { ...o, metadata: { ...o.metadata, annotations } };
}

const backoffAnnotations = [annProvisioningFailures, annProvisioningRetryAfter];

export class ProvisionerController {
  private readonly kube: KubeJsonClient;
  private readonly csi: CsiClient;
  private readonly events: EventSink;
  readonly driverName: string;
  private readonly options: ProvisionerOptions;
  private readonly metrics: ProvisionerMetrics;
  private readonly now: () => Date;
  private readonly maxAttempts: number;
  private readonly resyncConcurrency: number;
  private readonly topology: (() => NodeTopologyCopies) | undefined;
  private readonly storageClasses: (() => StorageClassCopy) | undefined;

  constructor(o: ProvisionerControllerOptions) {
    this.kube = o.kube;
    this.csi = o.csi;
    this.events = o.events;
    this.driverName = o.driverName;
    this.options = o.options;
    this.metrics = o.metrics ?? provisionerMetrics();
    this.now = o.now ?? (() => new Date());
    this.maxAttempts = o.maxAttempts ?? 5;
    this.resyncConcurrency = o.resyncConcurrency ?? 8;
    this.topology = o.topology;
    this.storageClasses = o.storageClasses;
  }

  async handleEvent(e: ProvisionerEvent): Promise<ProvisionerReport[]> {
    if (e.apiVersion !== "v1") return [];
    // A DELETED claim or PV is gone for good: everything that mattered happened while finalizers held it.
    if (e.action === "delete")
      return [{ object: `${e.kind} ${e.name}`, outcome: "deleted; nothing left to do" }];
    if (e.kind === "PersistentVolumeClaim") {
      // Observed in the event's copy: bound (or deleted, or another driver's) and no intent of ours.
      // Nothing the API could say would change that answer, so nothing is read.
      const copy = claimFromEvent(e.object);
      if (copy && claimNeedsNothing(copy, this.driverName))
        return [
          { object: `claim ${e.namespace ?? ""}/${e.name}`, outcome: "nothing to do (the event's copy)" },
        ];
      return [await this.syncClaim(e.namespace ?? "", e.name)];
    }
    if (e.kind === "PersistentVolume") {
      // Observed in the event's copy: not ours, or nothing to reclaim and the finalizer in step.
      const copy = volumeFromEvent(e.object);
      if (copy && volumeNeedsNothing(copy, this.driverName))
        return [{ object: `volume ${e.name}`, outcome: "nothing to do (the event's copy)" }];
      return [await this.syncVolume(e.name)];
    }
    return [];
  }

  /** Runs `work` again on fresh state when a conditional write lost a race. */
  private retryOnConflict(work: () => Promise<ProvisionerReport>): Promise<ProvisionerReport> {
    return retryWhileLosingRaces(work, { maxAttempts: this.maxAttempts });
  }

  // ---- claims -------------------------------------------------------------

  syncClaim(namespace: string, name: string): Promise<ProvisionerReport> {
    const object = `claim ${namespace}/${name}`;
    return this.retryOnConflict(async () => {
      const claim = await getOptional(() =>
        this.kube.get<PersistentVolumeClaim>(persistentVolumeClaims, name, namespace),
      );
      if (!claim) return { object, outcome: "claim is gone" };
      const pvName = volumeNameForClaim(claim, {
        prefix: this.options.volumeNamePrefix,
        uuidLength: this.options.volumeNameUuidLength,
      });
      if (!pvName.ok) return { object, outcome: "ignored", error: pvName.error };
      const className = claimClass(claim);
      const [storageClass, existingVolume] = await Promise.all([
        className ? readStorageClass(this.kube, className, this.storageClasses?.()) : undefined,
        getOptional(() => this.kube.get<PersistentVolume>(persistentVolumes, pvName.value)),
      ]);
      const decision = decideClaim(claim, {
        driverName: this.driverName,
        storageClass,
        existingVolume,
        now: this.now(),
      });
      switch (decision.action) {
        case "ignore":
          return { object, outcome: decision.reason };
        case "backoff":
          return { object, outcome: `backing off until ${decision.until}` };
        case "fail":
          await this.events.event(claim, "Warning", reason.provisioningFailed, decision.message);
          return { object, outcome: "provisioning failed", error: decision.message };
        case "release-intent":
          if (decision.warning)
            await this.events.event(claim, "Warning", reason.provisioningFailed, decision.warning);
          await this.releaseIntent(claim);
          return { object, outcome: `released the provisioning intent: ${decision.reason}` };
        case "add-intent": {
          // The intent is on record before the driver ever hears of the volume.
          const finalizers = [...(claim.metadata.finalizers ?? []), provisioningFinalizer];
          const recorded = await this.kube.replace(persistentVolumeClaims, {
            ...claim,
            metadata: { ...claim.metadata, finalizers },
          });
          return this.provision(object, recorded, storageClass!, pvName.value);
        }
        case "provision":
          return this.provision(object, claim, storageClass!, pvName.value);
        case "cleanup":
          return this.cleanup(object, claim, storageClass, pvName.value, decision.reason);
      }
    });
  }

  private async provision(
    object: string,
    claim: PersistentVolumeClaim,
    storageClass: StorageClass,
    pvName: string,
  ): Promise<ProvisionerReport> {
    const started = performance.now();
    const labels = { class: storageClass.metadata.name, source: dataSourceKind(claim) };
    // A retry or a slow claim is told it is being provisioned; a fast first attempt only hears the outcome.
    const isRetry = claim.metadata.annotations?.[annProvisioningFailures] !== undefined;
    if (isRetry || progressEventsDue(claim.metadata.creationTimestamp, this.now())) {
      await this.events.event(
        claim,
        "Normal",
        reason.provisioning,
        message.provisioning(`${claim.metadata.namespace}/${claim.metadata.name}`),
      );
    }
    const capabilities = await this.csi.capabilities();
    const built = await loadCreateVolumeRequest(this.kube, {
      claim,
      storageClass,
      pvName,
      driverName: this.driverName,
      options: this.options,
      capabilities,
      topology: this.topology,
    });
    if (built.kind === "populator") {
      await this.events.event(claim, "Normal", built.event.reason, built.event.message);
      return { object, outcome: built.reason };
    }
    if (built.kind === "reschedule") {
      await this.reschedule(claim, storageClass, built.error);
      this.metrics.provisionFailed.inc(labels);
      return { object, outcome: "rescheduled", error: built.error };
    }
    if (built.kind === "error") {
      await this.failFinal(claim, storageClass, built.error, "final");
      this.metrics.provisionFailed.inc(labels);
      return { object, outcome: "provisioning failed", error: built.error };
    }

    // The source of a clone or restore must outlive the copy.
    await protectSource(this.kube, claim);
    let volume: Volume;
    try {
      const response = await this.csi.createVolume(built.request);
      if (!response.volume) throw new Error("CreateVolume returned no volume");
      volume = response.volume;
    } catch (err) {
      this.metrics.provisionFailed.inc(labels);
      const report = await this.createFailed(
        object,
        claim,
        storageClass,
        err,
        built.selectedNode !== undefined,
      );
      await releaseSource(this.kube, claim);
      return report;
    }

    const pv = buildPersistentVolume({
      claim,
      storageClass,
      pvName,
      driverName: this.driverName,
      identity: this.options.identity,
      fsType: built.plan.classParameters.fsType,
      volume,
      secretRefs: built.plan.secretRefs,
    });
    if (!pv.ok) {
      // Too small to use: give it back and try again later (the intent stays until it is gone).
      await this.deleteBackingVolume(volume.volumeId, built.request.secrets);
      await this.failFinal(claim, storageClass, pv.error, "final");
      return { object, outcome: "provisioning failed", error: pv.error };
    }
    try {
      await this.saveVolume(pv.value);
    } catch (err) {
      await this.takeBackUnrecorded(claim, volume, built.request.secrets, err);
      throw err;
    }
    await releaseSource(this.kube, claim);
    await this.events.event(claim, "Normal", reason.provisioningSucceeded, message.succeeded(pvName));
    this.metrics.provisionTotal.inc(labels);
    this.metrics.provisionDuration.observe(labels, (performance.now() - started) / 1000);
    // Failures recorded earlier are history now; the finalizer itself goes with the bind.
    if (backoffAnnotations.some((k) => claim.metadata.annotations?.[k] !== undefined)) {
      await this.kube.replace(persistentVolumeClaims, withoutAnnotations(claim, backoffAnnotations));
    }
    return { object, outcome: `provisioned volume ${pvName}` };
  }

  /**
   * The PV that records a created volume could not be written. While the claim still carries our
   * intent, a later sync records the volume (CreateVolume answers with the same one) or cleans it up.
   * Observed otherwise (claim gone, recreated, or its intent released by another instance's cleanup
   * while this CreateVolume was still queued at the driver): nothing would ever name the volume
   * again, so it is deleted now.
   */
  private async takeBackUnrecorded(
    claim: PersistentVolumeClaim,
    volume: Volume,
    secrets: CreateVolumeRequest["secrets"],
    saveError: unknown,
  ): Promise<void> {
    try {
      // No later event leads back here, so transient trouble is waited out a little.
      const current = await retrying(
        () =>
          getOptional(() =>
            this.kube.get<PersistentVolumeClaim>(
              persistentVolumeClaims,
              claim.metadata.name,
              claim.metadata.namespace ?? "",
            ),
          ),
        { maxAttempts: 4, baseDelayMs: 100, retryable: isTransient },
      );
      if (current && current.metadata.uid === claim.metadata.uid && hasProvisioningIntent(current)) return;
      await retrying(() => this.deleteBackingVolume(volume.volumeId, secrets), {
        maxAttempts: 4,
        baseDelayMs: 100,
        retryable: () => true,
      });
    } catch (err) {
      throw new RetryLaterError(
        `volume ${volume.volumeId} was created for claim ${claim.metadata.namespace}/${claim.metadata.name}, which no longer holds it, and neither recording nor deleting it worked: ${err instanceof Error ? err.message : String(err)}`,
        1,
        { cause: saveError },
      );
    }
  }

  /** Creates the PV; one that already exists for this claim (a retry, another instance) is success. */
  private async saveVolume(pv: PersistentVolume): Promise<void> {
    try {
      await this.kube.create(persistentVolumes, pv);
    } catch (err) {
      if (!isAlreadyExists(err)) throw err;
      const existing = await this.kube.get<PersistentVolume>(persistentVolumes, pv.metadata.name);
      if (existing.spec.claimRef?.uid !== pv.spec.claimRef?.uid) {
        throw new Error(`PersistentVolume ${pv.metadata.name} exists and belongs to another claim`);
      }
    }
  }

  private async createFailed(
    object: string,
    claim: PersistentVolumeClaim,
    storageClass: StorageClass,
    err: unknown,
    nodeSelected: boolean,
  ): Promise<ProvisionerReport> {
    const text = err instanceof Error ? err.message : String(err);
    const errorClass = classifyCsiError(err, { nodeSelected });
    switch (errorClass) {
      case "in-progress":
        // The driver may still be creating it: keep the intent, retry the same request soon.
        await this.events.event(
          claim,
          "Warning",
          reason.provisioningFailed,
          message.failed(storageClass.metadata.name, text),
        );
        throw new RetryLaterError(`CreateVolume for ${object} is still in progress: ${text}`, 1, {
          cause: err,
        });
      case "reschedule":
        await this.reschedule(claim, storageClass, text);
        return { object, outcome: "rescheduled", error: text };
      case "infeasible":
        await this.failFinal(claim, storageClass, text, "infeasible");
        return { object, outcome: "provisioning failed (infeasible)", error: text };
      case "final":
        await this.failFinal(claim, storageClass, text, "final", grpcCodeOf(err) === GrpcCode.ALREADY_EXISTS);
        return { object, outcome: "provisioning failed", error: text };
    }
  }

  /**
   * A final answer to this exact request means no volume exists under its
   * name, so the intent can go with the backoff write. ALREADY_EXISTS is the
   * exception: something exists that this request cannot reconcile, so the
   * intent stays and blocks the claim's deletion until someone looks.
   */
  private async failFinal(
    claim: PersistentVolumeClaim,
    storageClass: StorageClass,
    error: string,
    kind: "final" | "infeasible",
    keepIntent = false,
  ): Promise<void> {
    await this.events.event(
      claim,
      "Warning",
      reason.provisioningFailed,
      kind === "infeasible" ? message.infeasible : message.failed(storageClass.metadata.name, error),
    );
    const failures = Number(claim.metadata.annotations?.[annProvisioningFailures] ?? "0") + 1;
    const seconds =
      kind === "infeasible"
        ? nextRetryDelaySeconds(Number.MAX_SAFE_INTEGER)
        : nextRetryDelaySeconds(failures);
    const retryAfter = rfc3339(new Date(this.now().getTime() + seconds * 1000));
    let next: PersistentVolumeClaim = {
      ...claim,
      metadata: {
        ...claim.metadata,
        annotations: {
          ...claim.metadata.annotations,
          [annProvisioningFailures]: String(failures),
          [annProvisioningRetryAfter]: retryAfter,
        },
      },
    };
    if (!keepIntent) next = withoutFinalizer(next, provisioningFinalizer);
    await this.kube.replace(persistentVolumeClaims, next);
  }

  /** RESOURCE_EXHAUSTED on the selected node, or the node is gone: let the scheduler pick another. */
  private async reschedule(
    claim: PersistentVolumeClaim,
    storageClass: StorageClass,
    error: string,
  ): Promise<void> {
    await this.events.event(
      claim,
      "Warning",
      reason.provisioningFailed,
      message.failed(storageClass.metadata.name, error),
    );
    const next = withoutFinalizer(withoutAnnotations(claim, [annSelectedNode]), provisioningFinalizer);
    await this.kube.replace(persistentVolumeClaims, next);
  }

  private async releaseIntent(claim: PersistentVolumeClaim): Promise<void> {
    await releaseSource(this.kube, claim);
    await this.kube.replace(
      persistentVolumeClaims,
      withoutAnnotations(withoutFinalizer(claim, provisioningFinalizer), backoffAnnotations),
    );
  }

  /**
   * The claim no longer wants the volume an earlier attempt may have created.
   * CreateVolume is idempotent by name, so asking again with the same request
   * returns that volume (or makes one); then it is deleted, or, if the class
   * retains volumes, recorded in a PV that the binder releases.
   */
  private async cleanup(
    object: string,
    claim: PersistentVolumeClaim,
    storageClass: StorageClass | undefined,
    pvName: string,
    why: string,
  ): Promise<ProvisionerReport> {
    if (!storageClass) {
      const text = `cannot clean up a possible volume ${pvName}: StorageClass "${claimClass(claim)}" is gone; remove finalizer ${provisioningFinalizer} by hand once the volume is checked`;
      await this.events.event(claim, "Warning", reason.provisioningFailed, text);
      return { object, outcome: "cleanup blocked", error: text };
    }
    const built = await loadCreateVolumeRequest(this.kube, {
      claim,
      storageClass,
      pvName,
      driverName: this.driverName,
      options: this.options,
      capabilities: await this.csi.capabilities(),
      topology: this.topology,
    });
    if (built.kind !== "ready") {
      const text = `cannot clean up a possible volume ${pvName}: ${"error" in built ? built.error : built.reason}`;
      await this.events.event(claim, "Warning", reason.provisioningFailed, text);
      return { object, outcome: "cleanup blocked", error: text };
    }
    let volume: Volume;
    try {
      const response = await this.csi.createVolume(built.request);
      if (!response.volume) throw new Error("CreateVolume returned no volume");
      volume = response.volume;
    } catch (err) {
      const errorClass = classifyCsiError(err);
      if (errorClass === "in-progress" || grpcCodeOf(err) === GrpcCode.ALREADY_EXISTS) {
        throw new RetryLaterError(
          `cleanup of ${pvName}: ${err instanceof Error ? err.message : String(err)}`,
          1,
          {
            cause: err,
          },
        );
      }
      // A final answer to the same request: no such volume exists.
      await this.releaseIntent(claim);
      return { object, outcome: `no volume to clean up (${why})` };
    }
    if ((storageClass.reclaimPolicy ?? "Delete") === "Delete") {
      await this.deleteBackingVolume(volume.volumeId, built.request.secrets);
      await this.releaseIntent(claim);
      return { object, outcome: `deleted unused volume ${volume.volumeId} (${why})` };
    }
    // Retained classes never lose a volume: record it; the binder releases it and the policy keeps it.
    const pv = buildPersistentVolume({
      claim,
      storageClass,
      pvName,
      driverName: this.driverName,
      identity: this.options.identity,
      fsType: built.plan.classParameters.fsType,
      volume,
      secretRefs: built.plan.secretRefs,
    });
    if (pv.ok) await this.saveVolume(pv.value);
    await this.releaseIntent(claim);
    return { object, outcome: `recorded retained volume ${pvName} (${why})` };
  }

  private async deleteBackingVolume(
    volumeId: string,
    secrets: CreateVolumeRequest["secrets"],
  ): Promise<void> {
    try {
      await this.csi.deleteVolume({ volumeId, ...(secrets ? { secrets } : {}) });
    } catch (err) {
      // Already gone is what we wanted (upstream retried NOT_FOUND forever: external-provisioner 1277).
      if (grpcCodeOf(err) !== GrpcCode.NOT_FOUND) throw err;
    }
  }

  // ---- volumes ------------------------------------------------------------

  syncVolume(name: string): Promise<ProvisionerReport> {
    const object = `volume ${name}`;
    return this.retryOnConflict(async () => {
      const pv = await getOptional(() => this.kube.get<PersistentVolume>(persistentVolumes, name));
      if (!pv) return { object, outcome: "volume is gone" };
      if (!isVolumeForDriver(pv, this.driverName))
        return { object, outcome: `not provisioned by ${this.driverName}` };
      const capabilities = await this.csi.capabilities();
      const reclaimable = pv.status?.phase === "Released" || pv.metadata.deletionTimestamp !== undefined;
      const attachments =
        reclaimable && capabilities.publishUnpublishVolume
          ? (await this.kube.list<VolumeAttachment>(volumeAttachments)).items
          : [];
      const decision = decideVolume(pv, {
        driverName: this.driverName,
        attachments,
        driverPublishes: capabilities.publishUnpublishVolume,
      });
      switch (decision.action) {
        case "ignore":
          return { object, outcome: decision.reason };
        case "blocked":
          await this.events.event(pv, "Warning", reason.volumeFailedDelete, decision.message);
          return { object, outcome: "deletion waits for detach", error: decision.message };
        case "add-finalizer":
          await this.kube.replace(persistentVolumes, {
            ...pv,
            metadata: {
              ...pv.metadata,
              finalizers: [...(pv.metadata.finalizers ?? []), pvDeletionProtectionFinalizer],
            },
          });
          return { object, outcome: "added finalizer" };
        case "remove-finalizer":
          await this.kube.replace(persistentVolumes, withoutFinalizer(pv, pvDeletionProtectionFinalizer));
          return { object, outcome: `removed finalizer: ${decision.reason}` };
        case "delete":
          return this.deleteVolume(object, pv);
      }
    });
  }

  private async deleteVolume(object: string, pv: PersistentVolume): Promise<ProvisionerReport> {
    const started = performance.now();
    const labels = { class: pv.spec.storageClassName ?? "" };
    const annotations = pv.metadata.annotations ?? {};
    let secrets: Record<string, string> | undefined;
    const secretName = annotations[annDeletionSecretName];
    const secretNamespace = annotations[annDeletionSecretNamespace];
    if (secretName && secretNamespace) {
      const data = await readSecretData(this.kube, { name: secretName, namespace: secretNamespace });
      if (!data.ok) {
        await this.events.event(pv, "Warning", reason.volumeFailedDelete, data.error);
        this.metrics.deleteFailed.inc(labels);
        return { object, outcome: "delete failed", error: data.error };
      }
      secrets = data.value;
    }
    try {
      await this.deleteBackingVolume(pv.spec.csi?.volumeHandle ?? "", secrets);
    } catch (err) {
      const text = err instanceof Error ? err.message : String(err);
      await this.events.event(pv, "Warning", reason.volumeFailedDelete, text);
      this.metrics.deleteFailed.inc(labels);
      if (classifyCsiError(err) === "in-progress") {
        throw new RetryLaterError(`DeleteVolume for ${object}: ${text}`, 1, { cause: err });
      }
      return { object, outcome: "delete failed", error: text };
    }
    // The backing volume is gone: the PV object follows, then our finalizer lets it go.
    const remaining = await this.deletePvObject(pv);
    if (remaining && (remaining.metadata.finalizers ?? []).includes(pvDeletionProtectionFinalizer)) {
      await this.kube.replace(persistentVolumes, withoutFinalizer(remaining, pvDeletionProtectionFinalizer));
    }
    this.metrics.deleteTotal.inc(labels);
    this.metrics.deleteDuration.observe(labels, (performance.now() - started) / 1000);
    return { object, outcome: `deleted volume ${pv.spec.csi?.volumeHandle ?? ""}` };
  }

  /** Deletes the PV (only this incarnation of it); returns it while finalizers still hold it. */
  private async deletePvObject(pv: PersistentVolume): Promise<PersistentVolume | undefined> {
    try {
      const held = await this.kube.delete(persistentVolumes, pv.metadata.name, undefined, {
        preconditions: { uid: pv.metadata.uid ?? "" },
      });
      return held as PersistentVolume | undefined;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  // ---- resync ---------------------------------------------------------------

  async resync(): Promise<{ claims: number; volumes: number; errors: string[] }> {
    const [claims, volumes] = await Promise.all([
      this.kube.list<PersistentVolumeClaim>(persistentVolumeClaims),
      this.kube.list<PersistentVolume>(persistentVolumes),
    ]);
    const mine = claims.items.filter((c) => hasProvisioningIntent(c) || isClaimForDriver(c, this.driverName));
    const ours = volumes.items.filter((v) => isVolumeForDriver(v, this.driverName));
    const errors: string[] = [];
    const jobs: (() => Promise<ProvisionerReport>)[] = [
      ...mine.map((c) => () => this.syncClaim(c.metadata.namespace ?? "", c.metadata.name)),
      ...ours.map((v) => () => this.syncVolume(v.metadata.name)),
    ];
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < jobs.length) {
        const job = jobs[next++]!;
        try {
          const r = await job();
          if (r.error) errors.push(`${r.object}: ${r.error}`);
        } catch (err) {
          errors.push(err instanceof Error ? err.message : String(err));
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.resyncConcurrency, jobs.length) }, worker));
    return { claims: mine.length, volumes: ours.length, errors };
  }
}

function dataSourceKind(claim: PersistentVolumeClaim): string {
  return claim.spec.dataSourceRef?.kind ?? claim.spec.dataSource?.kind ?? "";
}
