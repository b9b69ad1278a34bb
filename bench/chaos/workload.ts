// What the chaos run asks of the cluster: a second node, a StorageClass of
// the sandbox CSI driver, static PVs (Retain) over backing volumes created
// through the driver, claims for both, pods that come and go; plus the
// harness's own API calls, which meet the same injected faults and so retry.
import { isAlreadyExists, isNotFound, isTransient, statusCodeOf } from "../../shared/kube/api-errors.ts";
import type { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { persistentVolumeClaims, type ResourceDescriptor } from "../../shared/kube/resources.ts";
import type { KubeObject, PersistentVolume, PersistentVolumeClaim, Pod } from "../../shared/kube/types.ts";
import { sleep } from "./options.ts";

export const namespace = "default";
export const dynamicClassName = "chaos-dynamic";
/** The class of the claims the workload grows and re-tiers (issue 18). */
export const expandableClassName = "chaos-expandable";
export const claimSize = "1Gi";
export const claimBytes = 1024 ** 3;

export type ClaimRole = "static" | "dynamic" | "resizable" | "churn-static" | "churn-dynamic";

/**
 * The VolumeAttributesClasses of the run: A and B the sandbox driver
 * accepts (same keys, so B's parameters replace A's), C one it refuses
 * (tier "gold" is INVALID_ARGUMENT: an infeasible modification).
 */
export const attributeClasses = {
  a: { name: "chaos-vac-a", parameters: { tier: "standard", iops: "1000" } },
  b: { name: "chaos-vac-b", parameters: { tier: "premium", iops: "4000" } },
  c: { name: "chaos-vac-c", parameters: { tier: "gold", iops: "9000" } },
} as const;

export function attributeClass(driverName: string, which: keyof typeof attributeClasses): KubeObject {
  const { name, parameters } = attributeClasses[which];
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttributesClass",
    metadata: { name },
    driverName,
    parameters: { ...parameters },
  };
}

/** Like the dynamic class, but claims of it may grow. */
export function expandableClass(driverName: string): KubeObject {
  return { ...dynamicClass(driverName), metadata: { name: expandableClassName }, allowVolumeExpansion: true };
}

export function dynamicClass(driverName: string): KubeObject {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: { name: dynamicClassName },
    provisioner: driverName,
    reclaimPolicy: "Delete",
    volumeBindingMode: "Immediate",
  };
}

export function staticVolume(name: string, driverName: string, volumeHandle: string): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name, labels: { "chaos.kube-storage-functions.io/role": "static" } },
    spec: {
      capacity: { storage: claimSize },
      accessModes: ["ReadWriteOnce"],
      persistentVolumeReclaimPolicy: "Retain",
      // "" = no class: only claims asking for no class match it.
      storageClassName: "",
      volumeMode: "Filesystem",
      csi: { driver: driverName, volumeHandle, fsType: "ext4" },
    },
  };
}

export function claim(name: string, role: ClaimRole): PersistentVolumeClaim {
  const isStatic = role === "static" || role === "churn-static";
  const resizable = role === "resizable";
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace, labels: { "chaos.kube-storage-functions.io/role": role } },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: claimSize } },
      storageClassName: isStatic ? "" : resizable ? expandableClassName : dynamicClassName,
      volumeMode: "Filesystem",
      ...(resizable ? { volumeAttributesClassName: attributeClasses.a.name } : {}),
    },
  };
}

/** A pod for the sandbox scheduler to place (where its claim's volume can be used) and a kubelet to run. */
export function pod(name: string, claimName: string): Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace, labels: { "chaos.kube-storage-functions.io/role": "pod" } },
    spec: {
      containers: [{ name: "app", image: "busybox" }],
      volumes: [{ name: "data", persistentVolumeClaim: { claimName } }],
    },
  };
}

/** Harness calls retried through injected faults; counted, since they are writes the controllers did not make. */
export class HarnessClient {
  readonly kube: KubeJsonClient;
  writes = 0;
  retries = 0;

  constructor(kube: KubeJsonClient) {
    this.kube = kube;
  }

  /** Bounded retries of 409 (injected on writes), 5xx/429 and transport errors. */
  private async retrying<T>(write: boolean, call: () => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      if (write) this.writes++;
      try {
        return await call();
      } catch (err) {
        const again = statusCodeOf(err) === 409 || isTransient(err) || (statusCodeOf(err) ?? 0) >= 500;
        if (!again || attempt >= 30) throw err;
        this.retries++;
        await sleep(Math.min(1000, 20 * 2 ** attempt));
      }
    }
  }

  /** Creates; an object that already exists (our earlier attempt got through) counts as created. */
  async create(r: ResourceDescriptor, o: KubeObject): Promise<void> {
    await this.retrying(true, async () => {
      try {
        await this.kube.create(r, o);
      } catch (err) {
        if (!isAlreadyExists(err)) throw err;
      }
    });
  }

  /** A JSON merge patch of the claim's spec (what `kubectl patch` does for a user). */
  async patchClaimSpec(name: string, spec: Record<string, unknown>): Promise<void> {
    await this.retrying(true, () =>
      this.kube.patch(persistentVolumeClaims, name, namespace, { spec }, "merge").then(() => undefined),
    );
  }

  /** Deletes; an object already gone counts as deleted. */
  async delete(r: ResourceDescriptor, name: string, ns?: string): Promise<void> {
    await this.retrying(true, async () => {
      try {
        await this.kube.delete(r, name, ns);
      } catch (err) {
        if (!isNotFound(err)) throw err;
      }
    });
  }

  list<T extends KubeObject>(r: ResourceDescriptor): Promise<T[]> {
    return this.retrying(false, async () => (await this.kube.list<T>(r)).items);
  }
}

/** Runs `work` over `items` with at most `concurrency` at once. */
export async function eachLimited<T>(
  items: readonly T[],
  concurrency: number,
  work: (item: T, index: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      await work(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, items.length)) }, worker));
}
