// When an object's protection finalizer is due to change, and the object with
// it added or removed. Pure: the caller writes the result with the
// resourceVersion it read.
import type { KubeObject } from "../kube/types.ts";

function finalizersOf(obj: KubeObject): string[] {
  const list = obj.metadata.finalizers;
  return Array.isArray(list) ? list : [];
}

/** Being deleted and still held by `finalizer`: the controller decides whether to let it go. */
export function isDeletionCandidate(obj: KubeObject, finalizer: string): boolean {
  return Boolean(obj.metadata.deletionTimestamp) && finalizersOf(obj).includes(finalizer);
}

/** Not being deleted and lacking `finalizer`: an object created before the admission plugin added it. */
export function needToAddFinalizer(obj: KubeObject, finalizer: string): boolean {
  return !obj.metadata.deletionTimestamp && !finalizersOf(obj).includes(finalizer);
}

export function withFinalizer<T extends KubeObject>(obj: T, finalizer: string): T {
  return { ...obj, metadata: { ...obj.metadata, finalizers: [...finalizersOf(obj), finalizer] } };
}

/** Every copy of `finalizer` goes; the others stay in their order. */
export function withoutFinalizer<T extends KubeObject>(obj: T, finalizer: string): T {
  return {
    ...obj,
    metadata: { ...obj.metadata, finalizers: finalizersOf(obj).filter((f) => f !== finalizer) },
  };
}
