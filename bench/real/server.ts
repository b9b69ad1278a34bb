// The API server under test: a JSON client from the kubeconfig, its request
// counters (/metrics), and removal of what the bench created.

import { request as httpsRequest, type RequestOptions } from "node:https";
import type { KubeConfig } from "@kubernetes/client-node";
import { isNotFound } from "../../shared/kube/api-errors.ts";
import { loadKubeConfig } from "../../shared/kube/client.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import type { ResourceDescriptor } from "../../shared/kube/resources.ts";
import type { KubeObject } from "../../shared/kube/types.ts";
import { requestTotals, type Tally } from "./figures.ts";

export interface ApiServer {
  kubeconfig: string;
  kubeConfig: KubeConfig;
  kube: KubeJsonClient;
  /** `apiserver_request_total` by verb and resource; undefined when /metrics is not readable. */
  requestCounts(): Promise<Tally | undefined>;
  /** `gitVersion` of /version, undefined when it cannot be read. */
  version(): Promise<string | undefined>;
  close(): Promise<void>;
}

export function connect(kubeconfig: string): ApiServer {
  const kubeConfig = loadKubeConfig({ KUBECONFIG: kubeconfig });
  const kube = new KubeJsonClient(kubeConfig, { userAgent: "kube-storage-functions-bench" });
  return {
    kubeconfig,
    kubeConfig,
    kube,
    requestCounts: async () => {
      try {
        return requestTotals(await getText(kubeConfig, "/metrics"));
      } catch {
        return undefined;
      }
    },
    version: async () => {
      try {
        const v = JSON.parse(await getText(kubeConfig, "/version")) as { gitVersion?: unknown };
        return typeof v.gitVersion === "string" ? v.gitVersion : undefined;
      } catch {
        return undefined;
      }
    },
    close: () => kube.close(),
  };
}

async function getText(kc: KubeConfig, path: string): Promise<string> {
  const server = kc.getCurrentCluster()?.server;
  if (!server) throw new Error("the kubeconfig names no server");
  const url = new URL(path, server);
  const options: RequestOptions = { method: "GET", headers: {} };
  await kc.applyToHTTPSOptions(options);
  return new Promise<string>((resolve, reject) => {
    const req = httpsRequest(url, options, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        text += chunk;
      });
      res.on("end", () =>
        res.statusCode === 200 ? resolve(text) : reject(new Error(`${path} answered ${res.statusCode}`)),
      );
    });
    req.on("error", reject);
    req.setTimeout(30_000, () => req.destroy(new Error(`${path} timed out`)));
    req.end();
  });
}

/** Runs `work` on every item with at most `limit` in flight; settles all, throws the first failure. */
export async function inParallel<T>(
  items: readonly T[],
  limit: number,
  work: (item: T) => Promise<unknown>,
): Promise<void> {
  let next = 0;
  let failure: unknown;
  const lane = async (): Promise<void> => {
    while (next < items.length) {
      const item = items[next++]!;
      try {
        await work(item);
      } catch (err) {
        failure ??= err;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  if (failure !== undefined) throw failure;
}

/** Deletes each object after dropping its finalizers (nothing may be left for the next workload). */
export async function forceDelete(
  kube: KubeJsonClient,
  r: ResourceDescriptor,
  objects: readonly KubeObject[],
): Promise<void> {
  await inParallel(objects, 32, async (o) => {
    const name = o.metadata.name!;
    const ns = o.metadata.namespace;
    try {
      if ((o.metadata.finalizers ?? []).length > 0)
        await kube.patch(r, name, ns, { metadata: { finalizers: null } }, "merge");
      await kube.delete(r, name, ns);
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  });
}
