// The watched copies that more than one hosted controller keeps, kept once:
// the binder and the attacher both watch every PV, the binder and the
// provisioner every StorageClass. One copy each halves their memory and the
// watch streams kube-apiserver sends this process. Started by the first
// controller that asks, read through the host's own API client.
import type { KubeConfig } from "@kubernetes/client-node";
import { volumeClaimIndexKey } from "../../shared/binder/volume-helpers.ts";
import type { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { persistentVolumes } from "../../shared/kube/resources.ts";
import { lazyStorageClassCopy } from "../../shared/kube/storage-class-copy.ts";
import type { PersistentVolume } from "../../shared/kube/types.ts";
import { lazyWatchedStore } from "../../shared/kube/watched-store.ts";
import type { Logger } from "../../shared/log.ts";
import type { SharedCopies } from "../built-function.ts";

export function sharedCopies(o: {
  kubeConfig: KubeConfig;
  json: KubeJsonClient;
  log: Logger;
}): SharedCopies & {
  stop(): Promise<void>;
} {
  const persistentVolumeCopy = lazyWatchedStore<PersistentVolume>({
    kubeConfig: o.kubeConfig,
    json: o.json,
    resource: persistentVolumes,
    indexBy: volumeClaimIndexKey,
    log: o.log.child({ cache: "persistentvolumes" }),
  });
  const storageClassCopy = lazyStorageClassCopy(o);
  return {
    persistentVolumes: persistentVolumeCopy,
    storageClasses: storageClassCopy,
    stop: async () => {
      await Promise.all([persistentVolumeCopy.stop(), storageClassCopy.stop()]);
    },
  };
}
