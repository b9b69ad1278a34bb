// Reads what one binder decision needs, fresh from the API (never a cache),
// and no more: a bound claim needs one volume, only an unbound claim without
// volumeName needs the whole volume list.
import { isNotFound } from "../../kube/api-errors.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import { persistentVolumeClaims, persistentVolumes, pods, storageClasses } from "../../kube/resources.ts";
import type { PersistentVolume, PersistentVolumeClaim, Pod, StorageClass } from "../../kube/types.ts";
import { annBindCompleted } from "../constants.ts";
import { winsWithoutSearch } from "../find-best-match.ts";
import type { ClaimSyncView } from "../sync-claim.ts";
import type { VolumeSyncView } from "../sync-volume.ts";
import { claimClass, claimHasClass, hasAnnotation, isDelayBindingProvisioning } from "../volume-helpers.ts";

/** GET that answers undefined for 404. */
export async function getOptional<T>(read: () => Promise<T>): Promise<T | undefined> {
  try {
    return await read();
  } catch (err) {
    if (isNotFound(err)) return undefined;
    throw err;
  }
}

export function readClaim(
  kube: KubeJsonClient,
  namespace: string,
  name: string,
): Promise<PersistentVolumeClaim | undefined> {
  return getOptional(() => kube.get<PersistentVolumeClaim>(persistentVolumeClaims, name, namespace));
}

export function readVolume(kube: KubeJsonClient, name: string): Promise<PersistentVolume | undefined> {
  return getOptional(() => kube.get<PersistentVolume>(persistentVolumes, name));
}

/** The candidate alone when it is the certain winner; otherwise every PV (the search upstream does). */
async function matchingVolumes(
  kube: KubeJsonClient,
  claim: PersistentVolumeClaim,
  candidate: string | undefined,
): Promise<PersistentVolume[]> {
  if (candidate) {
    const v = await readVolume(kube, candidate);
    // Delay binding never skips a pre-bound volume, so the answer does not depend on the class here.
    if (v && winsWithoutSearch(v, claim, false)) return [v];
  }
  return (await kube.list<PersistentVolume>(persistentVolumes)).items;
}

export async function loadClaimView(
  kube: KubeJsonClient,
  claim: PersistentVolumeClaim,
  now: string,
  candidate?: string,
): Promise<ClaimSyncView> {
  const volumeName = claim.spec.volumeName ?? "";
  const matching = !hasAnnotation(claim, annBindCompleted) && volumeName === "";
  const className = claimClass(claim);

  const volumesRead: Promise<PersistentVolume[]> = matching
    ? matchingVolumes(kube, claim, candidate)
    : volumeName
      ? readVolume(kube, volumeName).then((v) => (v ? [v] : []))
      : Promise.resolve([]);
  // Claims with no class at all may get the default: that needs every class.
  const classesRead: Promise<StorageClass[]> =
    matching && !claimHasClass(claim)
      ? kube.list<StorageClass>(storageClasses).then((l) => l.items)
      : className && matching
        ? getOptional(() => kube.get<StorageClass>(storageClasses, className)).then((c) => (c ? [c] : []))
        : Promise.resolve([]);
  const [volumes, classes] = await Promise.all([volumesRead, classesRead]);

  // Pods matter only for the WaitForPodScheduled message of a delayed claim.
  let claimPods: Pod[] = [];
  const cls = classes.find((c) => c.metadata.name === className);
  if (matching && cls?.volumeBindingMode === "WaitForFirstConsumer" && !isDelayBindingProvisioning(claim)) {
    claimPods = (await kube.list<Pod>(pods, { namespace: claim.metadata.namespace ?? "" })).items;
  }
  return { volumes, classes, pods: claimPods, now };
}

export async function loadVolumeView(
  kube: KubeJsonClient,
  volume: PersistentVolume,
  now: string,
): Promise<VolumeSyncView> {
  const ref = volume.spec.claimRef;
  if (!ref?.uid || !ref.name) return { claim: undefined, pods: [], now };
  const claim = await readClaim(kube, ref.namespace ?? "", ref.name);
  const claimGone = !claim || claim.metadata.uid !== ref.uid;
  // Only the Recycle policy asks which pods still use the claim.
  const claimPods =
    claimGone && volume.spec.persistentVolumeReclaimPolicy === "Recycle"
      ? (await kube.list<Pod>(pods, { namespace: ref.namespace ?? "" })).items
      : [];
  return { claim, pods: claimPods, now };
}
