// `npm start`: the whole system on the embedded sandbox (./system.ts). Then a short demo: a StorageClass, a claim
// and a pod go from Pending to provisioned, Bound and attached. Runs until
// Ctrl-C, then stops everything.
import { rm } from "node:fs/promises";
import { resolve } from "node:path";
import type { KubeJsonClient } from "../shared/kube/json-client.ts";
import { persistentVolumeClaims, pods, storageClasses, volumeAttachments } from "../shared/kube/resources.ts";
import type { PersistentVolumeClaim, VolumeAttachment } from "../shared/kube/types.ts";
import { type RunningSystem, startSystem } from "./system.ts";

const say = (line: string): void => void process.stdout.write(`${line}\n`);

/** Prints the demo claim's way from Pending to attached, as it happens. */
async function runDemo(kube: KubeJsonClient, driverName: string, nodeName: string): Promise<boolean> {
  say("");
  say("Demo: a StorageClass, a claim and a pod (kubectl would do the same):");
  await kube.create(storageClasses, {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: { name: "demo", annotations: { "storageclass.kubernetes.io/is-default-class": "true" } },
    provisioner: driverName,
    reclaimPolicy: "Delete",
    volumeBindingMode: "Immediate",
  });
  await kube.create(persistentVolumeClaims, {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name: "demo-data", namespace: "default" },
    spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
  });
  await kube.create(pods, {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "demo-app", namespace: "default" },
    spec: {
      nodeName,
      containers: [{ name: "app", image: "busybox" }],
      volumes: [{ name: "data", persistentVolumeClaim: { claimName: "demo-data" } }],
    },
  });
  const seen = new Set<string>();
  const report = (key: string, line: string): void => {
    if (seen.has(key)) return;
    seen.add(key);
    say(`  ${line}`);
  };
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    const claim = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "demo-data", "default");
    report(
      `class`,
      `claim default/demo-data: ${claim.status?.phase ?? "Pending"}, class ${claim.spec.storageClassName} (set by the admission webhook)`,
    );
    const provisioner = claim.metadata.annotations?.["volume.kubernetes.io/storage-provisioner"];
    if (provisioner) report("handed", `handed to provisioner ${provisioner}`);
    if (claim.spec.volumeName)
      report("provisioned", `provisioned: PersistentVolume ${claim.spec.volumeName}`);
    if (claim.status?.phase === "Bound") report("bound", `Bound to ${claim.spec.volumeName}`);
    const attachments = (await kube.list<VolumeAttachment>(volumeAttachments)).items.filter(
      (va) => va.spec.source.persistentVolumeName === claim.spec.volumeName,
    );
    for (const va of attachments)
      report(
        `va-${va.metadata.name}`,
        `VolumeAttachment ${va.metadata.name} created for node ${va.spec.nodeName}`,
      );
    if (attachments.some((va) => va.status?.attached)) {
      report("attached", `attached: ${claim.spec.volumeName} is published to node ${nodeName}`);
      return true;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  say("  the demo did not finish within a minute; see the functions' logs (LOG_LEVEL=info npm start)");
  return false;
}

async function main(): Promise<void> {
  const dir = resolve(process.env.SANDBOX_DIR ?? ".sandbox");
  const port = Number(process.env.SANDBOX_PORT ?? "0");
  const tickSeconds = Number(process.env.RESYNC_INTERVAL_SECONDS ?? "30");
  // A fresh API server knows no PVs, so a fresh driver must hold no volumes.
  if (process.env.SANDBOX_KEEP_STATE !== "1") await rm(dir, { recursive: true, force: true });
  say("kube-storage-functions: starting the sandbox and every function...");
  let system: RunningSystem | undefined;
  let stopping = false;
  const stop = async (code: number): Promise<void> => {
    if (stopping) return;
    stopping = true;
    say("kube-storage-functions: stopping...");
    await system?.stop();
    process.exit(code);
  };
  process.on("SIGINT", () => void stop(0));
  process.on("SIGTERM", () => void stop(0));
  system = await startSystem({
    dir,
    port,
    resyncSeconds: tickSeconds,
    logLevel: process.env.LOG_LEVEL ?? "warn",
    progress: (what, detail) => say(`  ${what.padEnd(14)} ${detail}`),
    onFunctionExit: (name, code) => {
      process.stderr.write(`function ${name} exited unexpectedly (${code}); stopping\n`);
      void stop(1);
    },
  });
  const { sandbox } = system;

  if (process.env.DEMO !== "0")
    await runDemo(system.kube, system.driverName, sandbox.csi.driver.config.nodeId);

  say("");
  say(
    `Ready. Events flow through the forwarder; controllers also resync every ${tickSeconds}s. Look around:`,
  );
  say(`  export KUBECONFIG=${sandbox.kubeconfigPath}`);
  say("  kubectl get sc,pv,pvc,volumeattachments");
  say(`  curl ${system.url("binder")}/explain/namespaces/default/persistentvolumeclaims/<claim>`);
  say("Ctrl-C stops everything.");
}

main().catch((err: unknown) => {
  process.stderr.write(`npm start failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
