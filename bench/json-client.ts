// Micro-benchmark: sequential GETs of one PersistentVolume against the sandbox
// API server, through KubeJsonClient and through client-node's CoreV1Api.
// Prints one JSON line. Not part of `npm test`; run with `node bench/json-client.ts`.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { startSandbox } from "../sandbox/start.ts";
import { KubeJsonClient } from "../shared/kube/json-client.ts";
import { persistentVolumes } from "../shared/kube/resources.ts";
import type { PersistentVolume } from "../shared/kube/types.ts";

const N = Number(process.env.BENCH_GETS ?? 2000);
const WARMUP = 200;

const dir = await mkdtemp(join(tmpdir(), "ksf-bench-"));
const sandbox = await startSandbox({ dir, scheduler: false, kubelets: false, podGc: false, expander: false });
try {
  const kc = new KubeConfig();
  kc.loadFromFile(sandbox.kubeconfigPath);
  const json = new KubeJsonClient(kc);
  const core = kc.makeApiClient(CoreV1Api);

  const pv: PersistentVolume = {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name: "bench-pv", labels: { bench: "yes" } },
    spec: {
      capacity: { storage: "10Gi" },
      accessModes: ["ReadWriteOnce"],
      persistentVolumeReclaimPolicy: "Delete",
      storageClassName: "standard",
      csi: { driver: "hostpath.csi.k8s.io", volumeHandle: "vol-bench", volumeAttributes: { a: "b" } },
      claimRef: { kind: "PersistentVolumeClaim", namespace: "default", name: "data", uid: "u-1" },
    },
  };
  await json.create(persistentVolumes, pv);

  let connections = 0;
  sandbox.apiServer.server.on("connection", () => connections++);

  const run = async (get: () => Promise<unknown>): Promise<{ perSecond: number; connections: number }> => {
    for (let i = 0; i < WARMUP; i++) await get();
    connections = 0;
    const started = performance.now();
    for (let i = 0; i < N; i++) await get();
    const seconds = (performance.now() - started) / 1000;
    return { perSecond: Math.round(N / seconds), connections };
  };

  const viaJson = await run(() => json.get(persistentVolumes, "bench-pv"));
  const viaTyped = await run(() => core.readPersistentVolume({ name: "bench-pv" }));
  await json.close();

  console.log(
    JSON.stringify({
      gets: N,
      getsPerSecond: viaJson.perSecond,
      typedGetsPerSecond: viaTyped.perSecond,
      connectionsOpened: viaJson.connections,
      typedConnectionsOpened: viaTyped.connections,
    }),
  );
} finally {
  await sandbox.close();
  await rm(dir, { recursive: true, force: true });
}
