// kube-apiserver's PersistentVolumeClaimResize admission plugin (on by
// default): a claim's storage request may grow only while it is Bound, and
// only when its class, unchanged and non-empty, exists and sets
// allowVolumeExpansion: true. It runs after validation, before webhooks.
import { compareQuantities, isValidQuantity } from "../../shared/kube/quantity.ts";
import { annBetaStorageClass } from "../../shared/kube/well-known.ts";
import type { KubeObject } from "./store.ts";

type Obj = Record<string, unknown>;

function obj(v: unknown): Obj {
  return v && typeof v === "object" && !Array.isArray(v) ? (v as Obj) : {};
}

function storageOf(o: KubeObject): string {
  const v = obj(obj(obj(o.spec).resources).requests).storage;
  return typeof v === "string" && isValidQuantity(v) ? v : "0";
}

/** GetPersistentVolumeClaimClass: the beta annotation first, then spec.storageClassName. */
function classOf(o: KubeObject): string {
  const annotated = o.metadata.annotations?.[annBetaStorageClass];
  if (annotated !== undefined) return annotated;
  const name = obj(o.spec).storageClassName;
  return typeof name === "string" ? name : "";
}

export const onlyBoundCanExpand = "Only bound persistent volume claims can be expanded";
export const classMustAllowResize =
  "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize";

/** Why the update may not grow the claim, or undefined when it is no growth or allowed. */
export function claimResizeRefusal(
  next: KubeObject,
  old: KubeObject,
  storageClass: (name: string) => Readonly<KubeObject> | undefined,
): string | undefined {
  if (compareQuantities(storageOf(next), storageOf(old)) <= 0) return undefined;
  if (obj(old.status).phase !== "Bound") return onlyBoundCanExpand;
  const name = classOf(next);
  if (name === "" || name !== classOf(old)) return classMustAllowResize;
  return storageClass(name)?.allowVolumeExpansion === true ? undefined : classMustAllowResize;
}
