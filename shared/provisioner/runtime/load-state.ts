// The provisioner's loaders: the first round of a sync reads the claim (its
// class and the PV named after it) or the PV (the driver's capabilities and,
// for a deletion, the VolumeAttachments); a later round builds on the state
// the previous one decided on plus what its steps carried, without reading it
// again. Whatever a round's decision still needs (the CreateVolume request,
// the claim after a failed PV save, the deletion Secret) is read on demand.
import type { CsiClient } from "../../csi/client.ts";
import { getOptional, isTransient } from "../../kube/api-errors.ts";
import { claimClass } from "../../kube/claim-class.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import type { OwnRevisions } from "../../kube/own-revisions.ts";
import { persistentVolumeClaims, persistentVolumes } from "../../kube/resources.ts";
import { readSecretData } from "../../kube/secrets.ts";
import { readStorageClass, type StorageClassCopy } from "../../kube/storage-class-copy.ts";
import type { PersistentVolume, PersistentVolumeClaim } from "../../kube/types.ts";
import { retrying } from "../../retry.ts";
import type { ClaimState } from "../claim-state.ts";
import { annDeletionSecretName, annDeletionSecretNamespace } from "../constants.ts";
import { isVolumeForDriver } from "../decide-volume.ts";
import type { ProvisionerOptions } from "../options.ts";
import { planClaimRound } from "../plan-claim.ts";
import { planVolumeRound, type VolumeState } from "../plan-volume.ts";
import type { Needs, ProvisionerFact } from "../steps.ts";
import { volumeNameForClaim } from "../volume-name.ts";
import { type AttachmentCopy, attachmentsOf } from "./attachment-copy.ts";
import { loadCreateVolumeRequest, type NodeTopologyCopies } from "./load-request.ts";

export interface LoaderDeps {
  kube: KubeJsonClient;
  csi: CsiClient;
  driverName: string;
  options: ProvisionerOptions;
  now: () => Date;
  topology: (() => NodeTopologyCopies) | undefined;
  storageClasses: (() => StorageClassCopy) | undefined;
  /** A watched copy of the VolumeAttachments (attachment-copy.ts); none: list them per deletion. */
  attachments?: (() => AttachmentCopy) | undefined;
  /** The PV revisions this process wrote or read live: older event copies are skipped. */
  written: OwnRevisions;
}

/** The previous round's state with what its steps carried (a written claim, progress) laid over it. */
function advance<S extends { progress: object }>(previous: S, carried: readonly ProvisionerFact[]): S {
  const facts: ProvisionerFact = Object.assign({}, ...carried);
  const { claim, ...progress } = facts;
  return { ...previous, ...(claim ? { claim } : {}), progress: { ...previous.progress, ...progress } };
}

export async function loadClaimState(
  deps: LoaderDeps,
  namespace: string,
  name: string,
  previous: ClaimState | undefined,
  carried: readonly ProvisionerFact[],
): Promise<ClaimState | undefined> {
  const { kube, options } = deps;
  let s: ClaimState;
  if (previous) s = { ...advance(previous, carried), now: deps.now() };
  else {
    const claim = await getOptional(() =>
      kube.get<PersistentVolumeClaim>(persistentVolumeClaims, name, namespace),
    );
    if (!claim) return undefined;
    const pvName = volumeNameForClaim(claim, {
      prefix: options.volumeNamePrefix,
      uuidLength: options.volumeNameUuidLength,
    });
    const className = claimClass(claim);
    const [storageClass, existingVolume] = pvName.ok
      ? await Promise.all([
          className ? readStorageClass(kube, className, deps.storageClasses?.()) : undefined,
          getOptional(() => kube.get<PersistentVolume>(persistentVolumes, pvName.value)),
        ])
      : [undefined, undefined];
    const identity = options.identity;
    s = {
      claim,
      pvName,
      storageClass,
      existingVolume,
      now: deps.now(),
      driverName: deps.driverName,
      identity,
      retryInterval: options.retryInterval,
      controllerPublishReadOnly: options.controllerPublishReadOnly,
      progress: {},
    };
  }
  for (let round = planClaimRound(s); "needs" in round; round = planClaimRound(s)) {
    s = { ...(await supplyClaim(deps, s, round)), now: deps.now() };
  }
  return s;
}

async function supplyClaim(deps: LoaderDeps, s: ClaimState, { needs }: Needs): Promise<ClaimState> {
  const { kube, csi } = deps;
  if (needs === "current-claim") {
    const { name, namespace = "" } = s.claim.metadata;
    try {
      // No later event leads back here, so transient trouble is waited out a little.
      const again = { maxAttempts: 4, baseDelayMs: 100, retryable: isTransient };
      const pvName = s.pvName.ok ? s.pvName.value : undefined;
      const [claim, volume] = await Promise.all([
        retrying(
          () => getOptional(() => kube.get<PersistentVolumeClaim>(persistentVolumeClaims, name, namespace)),
          again,
        ),
        pvName
          ? retrying(() => getOptional(() => kube.get<PersistentVolume>(persistentVolumes, pvName)), again)
          : undefined,
      ]);
      return { ...s, current: { claim, volume } };
    } catch (error) {
      return { ...s, current: { error } };
    }
  }
  if (needs === "source-claims") {
    const list = await kube.list<PersistentVolumeClaim>(persistentVolumeClaims, {
      namespace: s.claim.metadata.namespace ?? "",
    });
    return { ...s, sourceClaims: list.items };
  }
  if (needs !== "request" || !s.pvName.ok || !s.storageClass || s.request)
    throw new Error(`the claim round asked for ${needs}, which a claim state cannot supply`);
  const startedAt = s.startedAt ?? performance.now();
  const request = await loadCreateVolumeRequest(kube, {
    claim: s.claim,
    storageClass: s.storageClass,
    pvName: s.pvName.value,
    driverName: deps.driverName,
    options: deps.options,
    capabilities: await csi.capabilities(),
    topology: deps.topology,
  });
  return { ...s, request, startedAt };
}

export async function loadVolumeState(
  deps: LoaderDeps,
  name: string,
  previous: VolumeState | undefined,
  carried: readonly ProvisionerFact[],
): Promise<VolumeState | undefined> {
  const { kube, csi, driverName } = deps;
  let s: VolumeState;
  if (previous) s = advance(previous, carried);
  else {
    const volume = await getOptional(() => kube.get<PersistentVolume>(persistentVolumes, name));
    if (!volume) return undefined;
    deps.written.note(volume);
    s = { volume, driverName, driverPublishes: false, attachments: [], progress: {} };
    if (isVolumeForDriver(volume, driverName)) {
      const driverPublishes = (await csi.capabilities()).publishUnpublishVolume;
      const reclaimable =
        volume.status?.phase === "Released" || volume.metadata.deletionTimestamp !== undefined;
      const attachments =
        reclaimable && driverPublishes ? await attachmentsOf(kube, volume, deps.attachments?.()) : [];
      s = { ...s, driverPublishes, attachments };
    }
  }
  for (let round = planVolumeRound(s); "needs" in round; round = planVolumeRound(s)) {
    if (round.needs !== "secrets" || s.secrets) throw new Error(`the volume round asked for ${round.needs}`);
    s = { ...s, startedAt: performance.now(), secrets: await deletionSecrets(kube, s.volume) };
  }
  return s;
}

async function deletionSecrets(
  kube: KubeJsonClient,
  volume: PersistentVolume,
): Promise<VolumeState["secrets"]> {
  const annotations = volume.metadata.annotations ?? {};
  const name = annotations[annDeletionSecretName];
  const namespace = annotations[annDeletionSecretNamespace];
  if (!name || !namespace) return { ok: true, value: undefined };
  return readSecretData(kube, { name, namespace });
}
