// Defaulting that kube-apiserver applies on every write, for the fields the
// storage controllers read. Mutates the object it is given (a private copy).
import type { KubeObject } from "./store.ts";

type Obj = Record<string, unknown>;

function section(o: KubeObject, key: string): Obj {
  const v = o[key];
  if (v && typeof v === "object" && !Array.isArray(v)) return v as Obj;
  const fresh: Obj = {};
  o[key] = fresh;
  return fresh;
}

const defaulters: Record<string, (o: KubeObject) => void> = {
  persistentvolumes(o) {
    const spec = section(o, "spec");
    spec.persistentVolumeReclaimPolicy ??= "Retain";
    spec.volumeMode ??= "Filesystem";
  },
  persistentvolumeclaims(o) {
    const spec = section(o, "spec");
    spec.volumeMode ??= "Filesystem";
  },
  storageclasses(o) {
    o.reclaimPolicy ??= "Delete";
    o.volumeBindingMode ??= "Immediate";
  },
  csidrivers(o) {
    const spec = section(o, "spec");
    spec.attachRequired ??= true;
    spec.podInfoOnMount ??= false;
    spec.requiresRepublish ??= false;
    spec.storageCapacity ??= false;
    spec.fsGroupPolicy ??= "ReadWriteOnceWithFSType";
    spec.volumeLifecycleModes ??= ["Persistent"];
  },
  pods(o) {
    const spec = section(o, "spec");
    spec.restartPolicy ??= "Always";
    spec.schedulerName ??= "default-scheduler";
  },
};

export function applyDefaults(plural: string, o: KubeObject): void {
  defaulters[plural]?.(o);
}
