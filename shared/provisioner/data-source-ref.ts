// The clone or restore source a claim names, and whether another claim still
// needs that source protected: what the source-protection steps decide on.
// Pure; the reads and writes are in runtime/source-protection.ts.
import type { KubeObject, PersistentVolumeClaim } from "../kube/types.ts";
import { provisioningFinalizer } from "../kube/well-known.ts";
import { pvcCloneFinalizer, snapshotSourceProtectionFinalizer } from "./data-source.ts";
import { withFinalizer, withoutFinalizer } from "./steps.ts";

export interface SourceRef {
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

export function sourceFinalizer(source: SourceRef): string {
  return source.kind === "PersistentVolumeClaim" ? pvcCloneFinalizer : snapshotSourceProtectionFinalizer;
}

/** A claim other than `except` that may still call CreateVolume from this source. */
export function stillProvisioningFrom(
  c: PersistentVolumeClaim,
  source: SourceRef,
  except: string | undefined,
): boolean {
  if (c.metadata.uid === except) return false;
  const s = sourceOf(c);
  if (!s || s.kind !== source.kind || s.name !== source.name) return false;
  return !c.spec.volumeName && (c.metadata.finalizers ?? []).includes(provisioningFinalizer);
}

/** The source with its protection finalizer; undefined when it is being deleted or has it already. */
export function protectedSource(o: KubeObject, finalizer: string): KubeObject | undefined {
  if (o.metadata.deletionTimestamp || (o.metadata.finalizers ?? []).includes(finalizer)) return undefined;
  return withFinalizer(o, finalizer);
}

/** The source without its protection finalizer; undefined when it has none. */
export function releasedSource(o: KubeObject, finalizer: string): KubeObject | undefined {
  if (!(o.metadata.finalizers ?? []).includes(finalizer)) return undefined;
  return withoutFinalizer(o, finalizer);
}
