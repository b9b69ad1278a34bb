// A watched copy of every StorageClass, read the way upstream's controllers
// read their class lister, instead of a GET per claim sync (three per
// provisioned claim between the binder and the provisioner).
//
// Why a copy is enough: a class's provisioner, parameters, reclaim policy,
// volume binding mode, mount options and allowed topologies cannot change
// once it exists (kube-apiserver refuses the update). What a copy can have
// wrong for a moment is a class deleted, or deleted and created again, and
// the default-class annotation: the lag an informer has too. A name the copy
// does not have is read from the API, so a class created a moment ago is
// never missed; until the copy's first list is in, every read goes to the API.
import type { KubeConfig } from "@kubernetes/client-node";
import { booleanFromEnv, type Env } from "../config.ts";
import type { Logger } from "../log.ts";
import { getOptional } from "./api-errors.ts";
import type { KubeJsonClient } from "./json-client.ts";
import { storageClasses } from "./resources.ts";
import type { StorageClass } from "./types.ts";
import { type LazyWatchedStore, lazyWatchedStore, type WatchedStore } from "./watched-store.ts";

export type StorageClassCopy = Pick<WatchedStore<StorageClass>, "store" | "synced">;

/** The class named `name`: from the copy when it is synced and has it, else from the API (undefined: none). */
export async function readStorageClass(
  kube: KubeJsonClient,
  name: string,
  copy: StorageClassCopy | undefined,
): Promise<StorageClass | undefined> {
  const copied = copy?.synced ? copy.store.get("", name) : undefined;
  return copied ?? (await getOptional(() => kube.get<StorageClass>(storageClasses, name)));
}

/** Every class: from the copy when it is synced, else listed. */
export async function listStorageClasses(
  kube: KubeJsonClient,
  copy: StorageClassCopy | undefined,
): Promise<StorageClass[]> {
  if (copy?.synced) return [...copy.store.items()];
  return (await kube.list<StorageClass>(storageClasses)).items;
}

export interface StorageClassCopyOptions {
  kubeConfig: KubeConfig;
  json: KubeJsonClient;
  log: Logger;
}

/** A copy of every StorageClass, whole, started by its first get(). */
export function lazyStorageClassCopy(options: StorageClassCopyOptions): LazyWatchedStore<StorageClass> {
  return lazyWatchedStore<StorageClass>({
    kubeConfig: options.kubeConfig,
    json: options.json,
    resource: storageClasses,
    log: options.log.child({ cache: "storageclasses" }),
  });
}

/**
 * The copy as STORAGE_CLASS_CACHE says (default on), started by the first
 * read (which still goes to the API); undefined when turned off. `shared`: a
 * copy the process keeps for several controllers, taken instead of a new one.
 */
export function storageClassCopyFromEnv(
  env: Env,
  options: StorageClassCopyOptions,
  shared?: LazyWatchedStore<StorageClass>,
): LazyWatchedStore<StorageClass> | undefined {
  if (!booleanFromEnv(env, "STORAGE_CLASS_CACHE", true)) return undefined;
  return shared ?? lazyStorageClassCopy(options);
}
