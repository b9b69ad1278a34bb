// While a volume is cloned from a claim or restored from a snapshot, the
// source must not disappear: upstream puts a finalizer on it before
// CreateVolume and takes it off once no claim is still being provisioned
// from it (decided by ../plan-claim.ts on the namespace's claims).
import { isNotFound } from "../../kube/api-errors.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import { updateObject } from "../../kube/optimistic-update.ts";
import { persistentVolumeClaims, volumeSnapshots } from "../../kube/resources.ts";
import type { KubeObject } from "../../kube/types.ts";
import { protectedSource, releasedSource, type SourceRef, sourceFinalizer } from "../data-source-ref.ts";

function descriptorAndFinalizer(source: SourceRef) {
  const finalizer = sourceFinalizer(source);
  return source.kind === "PersistentVolumeClaim"
    ? { r: persistentVolumeClaims, finalizer }
    : { r: volumeSnapshots, finalizer };
}

/** Puts the protection finalizer on the source (unless it is there, or the source is being deleted). */
export async function protectSource(kube: KubeJsonClient, source: SourceRef): Promise<void> {
  const { r, finalizer } = descriptorAndFinalizer(source);
  await updateObject<KubeObject>(kube, r, source, (o) => protectedSource(o, finalizer));
}

/** Takes the protection finalizer off the source (a source already gone is fine). */
export async function releaseSource(kube: KubeJsonClient, source: SourceRef): Promise<void> {
  const { r, finalizer } = descriptorAndFinalizer(source);
  try {
    await updateObject<KubeObject>(kube, r, source, (o) => releasedSource(o, finalizer));
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
}
