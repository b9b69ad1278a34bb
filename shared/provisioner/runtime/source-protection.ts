// While a volume is cloned from a claim or restored from a snapshot, the
// source must not disappear: upstream puts a finalizer on it before
// CreateVolume and takes it off once no claim is still being provisioned
// from it. Stateless: "still being provisioned" is read from the claims.

import { isNotFound } from "../../kube/api-errors.ts";
import type { KubeJsonClient } from "../../kube/json-client.ts";
import { updateObject } from "../../kube/optimistic-update.ts";
import { persistentVolumeClaims, volumeSnapshots } from "../../kube/resources.ts";
import type { KubeObject, PersistentVolumeClaim } from "../../kube/types.ts";
import { provisioningFinalizer } from "../../kube/well-known.ts";
import { pvcCloneFinalizer, snapshotSourceProtectionFinalizer } from "../data-source.ts";

interface SourceRef {
  kind: "PersistentVolumeClaim" | "VolumeSnapshot";
  name: string;
  namespace: string;
}

export function sourceOf(claim: PersistentVolumeClaim): SourceRef | undefined {
  const ref = claim.spec.dataSourceRef ?? claim.spec.dataSource;
  if (!ref?.name) return undefined;
  const namespace = claim.metadata.namespace ?? "";
  if (ref.kind === "PersistentVolumeClaim" && !ref.apiGroup)
    return { kind: ref.kind, name: ref.name, namespace };
  if (ref.kind === "VolumeSnapshot" && ref.apiGroup === "snapshot.storage.k8s.io") {
    return { kind: ref.kind, name: ref.name, namespace };
  }
  return undefined;
}

function descriptorAndFinalizer(source: SourceRef) {
  return source.kind === "PersistentVolumeClaim"
    ? { r: persistentVolumeClaims, finalizer: pvcCloneFinalizer }
    : { r: volumeSnapshots, finalizer: snapshotSourceProtectionFinalizer };
}

/** Puts the protection finalizer on the claim's data source (no-op without one, or when it is already there). */
export async function protectSource(kube: KubeJsonClient, claim: PersistentVolumeClaim): Promise<void> {
  const source = sourceOf(claim);
  if (!source) return;
  const { r, finalizer } = descriptorAndFinalizer(source);
  await updateObject<KubeObject>(kube, r, source, (o) => {
    if (o.metadata.deletionTimestamp || (o.metadata.finalizers ?? []).includes(finalizer)) return undefined;
    o.metadata.finalizers = [...(o.metadata.finalizers ?? []), finalizer];
    return o;
  });
}

/** A claim that may still call CreateVolume from this source. */
function stillProvisioningFrom(
  c: PersistentVolumeClaim,
  source: SourceRef,
  except: string | undefined,
): boolean {
  if (c.metadata.uid === except) return false;
  const s = sourceOf(c);
  if (!s || s.kind !== source.kind || s.name !== source.name) return false;
  return !c.spec.volumeName && (c.metadata.finalizers ?? []).includes(provisioningFinalizer);
}

/** Takes the finalizer off the claim's data source once no other claim is still provisioned from it. */
export async function releaseSource(kube: KubeJsonClient, claim: PersistentVolumeClaim): Promise<void> {
  const source = sourceOf(claim);
  if (!source) return;
  const claims = await kube.list<PersistentVolumeClaim>(persistentVolumeClaims, {
    namespace: source.namespace,
  });
  if (claims.items.some((c) => stillProvisioningFrom(c, source, claim.metadata.uid))) return;
  const { r, finalizer } = descriptorAndFinalizer(source);
  try {
    await updateObject<KubeObject>(kube, r, source, (o) => {
      if (!(o.metadata.finalizers ?? []).includes(finalizer)) return undefined;
      o.metadata.finalizers = (o.metadata.finalizers ?? []).filter((f) => f !== finalizer);
      return o;
    });
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
}
