// Where the functions find their Kubernetes API server and credentials.
// client-node does the real work (TLS with the cluster CA, bearer tokens,
// client certificates, exec/OIDC plugins, token-file refresh); this module only
// picks the source and fails loudly when there is none. Unlike
// KubeConfig.loadFromDefault it never falls back to ~/.kube/config or to
// http://localhost:8080: a function silently talking to the wrong cluster is
// worse than one that refuses to start.

import { existsSync } from "node:fs";
import { isIPv6 } from "node:net";
import { delimiter } from "node:path";
import { CoreV1Api, KubeConfig, StorageV1Api } from "@kubernetes/client-node";
import { KubeJsonClient, type KubeJsonClientOptions } from "./json-client.ts";

export type Env = Record<string, string | undefined>;

export interface LoadKubeConfigOptions {
  /**
   * Prefix for the in-cluster service account paths
   * (/var/run/secrets/kubernetes.io/serviceaccount/...). Tests only.
   */
  inClusterPathPrefix?: string;
}

export class KubeConfigError extends Error {
  override name = "KubeConfigError";
}

const SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount";

/**
 * KUBECONFIG (a path list, merged like kubectl: the first file that names a
 * current-context wins) or else the in-cluster service account when
 * KUBERNETES_SERVICE_HOST is set; otherwise a KubeConfigError.
 */
export function loadKubeConfig(env: Env = process.env, options: LoadKubeConfigOptions = {}): KubeConfig {
  const kubeconfig = env.KUBECONFIG?.trim();
  if (kubeconfig) return loadFromFiles(kubeconfig.split(delimiter).filter((f) => f !== ""));
  if (env.KUBERNETES_SERVICE_HOST) return loadInCluster(env, options.inClusterPathPrefix ?? "");
  throw new KubeConfigError(
    "no Kubernetes API configured: set KUBECONFIG to a kubeconfig file, or run in a pod with a service account (KUBERNETES_SERVICE_HOST)",
  );
}

function loadFromFiles(files: string[]): KubeConfig {
  const kc = new KubeConfig();
  files.forEach((file, index) => {
    if (!existsSync(file)) throw new KubeConfigError(`KUBECONFIG names ${file}, which does not exist`);
    try {
      if (index === 0) {
        kc.loadFromFile(file);
      } else {
        const next = new KubeConfig();
        next.loadFromFile(file);
        kc.mergeConfig(next, Boolean(kc.currentContext));
      }
    } catch (err) {
      throw new KubeConfigError(`cannot load kubeconfig ${file}: ${(err as Error).message}`, { cause: err });
    }
  });
  if (!kc.getCurrentCluster()) {
    throw new KubeConfigError(
      `KUBECONFIG (${files.join(delimiter)}) has no usable current-context with a cluster`,
    );
  }
  return kc;
}

function loadInCluster(env: Env, prefix: string): KubeConfig {
  const host = env.KUBERNETES_SERVICE_HOST ?? "";
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!port) throw new KubeConfigError("KUBERNETES_SERVICE_HOST is set but KUBERNETES_SERVICE_PORT is not");
  for (const file of ["token", "ca.crt"]) {
    const path = `${prefix}${SERVICE_ACCOUNT_DIR}/${file}`;
    if (!existsSync(path))
      throw new KubeConfigError(`in-cluster config: service account file ${path} is missing`);
  }
  const kc = new KubeConfig();
  // loadFromCluster wires the CA file and a token file that is re-read as the
  // kubelet rotates it; it reads host and port from process.env, so the server
  // is set again from the env we were given.
  kc.loadFromCluster(prefix);
  const server = `https://${isIPv6(host) ? `[${host}]` : host}:${port}`;
  kc.clusters = kc.clusters.map((cluster) => ({ ...cluster, server }));
  return kc;
}

/** The API clients the controllers use, all bound to one KubeConfig. */
export interface KubeClients {
  kubeConfig: KubeConfig;
  /**
   * Plain JSON, pooled connections: use this for read-modify-write. The typed
   * APIs below drop fields client-node does not know and open a new
   * connection per request when TLS options are set.
   */
  json: KubeJsonClient;
  core: CoreV1Api;
  storage: StorageV1Api;
}

export function createKubeClients(kc: KubeConfig, jsonOptions?: KubeJsonClientOptions): KubeClients {
  return {
    kubeConfig: kc,
    json: new KubeJsonClient(kc, jsonOptions),
    core: kc.makeApiClient(CoreV1Api),
    storage: kc.makeApiClient(StorageV1Api),
  };
}
