// `npm start`: the whole system on the embedded sandbox. Starts the sandbox
// (API server + CSI driver), every function as its own process the way
// `npm run serve` runs it (admission over HTTPS, registered as webhooks),
// the watch forwarder feeding the controllers, and a resync tick (what
// PingSources do in a cluster). Then a short demo: a StorageClass, a claim
// and a pod go from Pending to provisioned, Bound and attached. Runs until
// Ctrl-C, then stops everything.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdir, rm, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { KubeConfig } from "@kubernetes/client-node";
import { type Forwarder, startForwarder } from "../shared/forwarder/index.ts";
import { KubeJsonClient } from "../shared/kube/json-client.ts";
import { persistentVolumeClaims, pods, storageClasses, volumeAttachments } from "../shared/kube/resources.ts";
import type { PersistentVolumeClaim, VolumeAttachment } from "../shared/kube/types.ts";
import { createLogger } from "../shared/log.ts";
import { generateCertificates } from "../shared/tls/certificates.ts";
import { registerAdmissionWebhooks } from "./admission-webhooks.ts";
import { startSandbox } from "./start.ts";

interface Running {
  name: string;
  url: string;
  child: ChildProcess;
}

/** Each function, in start order, with the kinds the forwarder sends it. */
const functions: { name: string; kinds: string[] }[] = [
  { name: "admission", kinds: [] },
  { name: "binder", kinds: ["PersistentVolumeClaim", "PersistentVolume"] },
  { name: "provisioner", kinds: ["PersistentVolumeClaim", "PersistentVolume"] },
  {
    name: "attach-detach",
    kinds: ["Pod", "Node", "PersistentVolumeClaim", "PersistentVolume", "VolumeAttachment"],
  },
  { name: "attacher", kinds: ["VolumeAttachment", "PersistentVolume"] },
];

const say = (line: string): void => void process.stdout.write(`${line}\n`);

function startFunction(name: string, env: Record<string, string>): Promise<Running> {
  const child = spawn(process.execPath, ["functions/serve.ts"], {
    env: { ...process.env, ...env, FUNCTION: name, PORT: "0", LOG_LEVEL: process.env.LOG_LEVEL ?? "warn" },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const lines = createInterface({ input: child.stdout! });
  return new Promise((resolvePromise, reject) => {
    child.once("exit", (code) =>
      reject(new Error(`function ${name} exited with ${code} before it was ready`)),
    );
    lines.once("line", (line) => {
      const ready = JSON.parse(line) as { url?: string };
      resolvePromise({ name, url: String(ready.url), child });
    });
  });
}

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
  say("kube-storage-functions: starting the sandbox (API server and CSI driver)...");
  const sandbox = await startSandbox({ port, dir });
  const driverName = sandbox.csi.driver.config.name;
  say(`  API server     ${sandbox.apiServer.url}`);
  say(`  kubeconfig     ${sandbox.kubeconfigPath}`);
  say(`  CSI driver     ${sandbox.csi.endpoint} (${driverName})`);

  // The webhook needs HTTPS with a certificate the API server trusts through caBundle.
  const certs = generateCertificates({
    service: "admission",
    namespace: "sandbox",
    extraDnsNames: ["localhost", "127.0.0.1"],
  });
  const certDir = join(dir, "certs");
  await mkdir(certDir, { recursive: true });
  await writeFile(join(certDir, "tls.crt"), certs.cert);
  await writeFile(join(certDir, "tls.key"), certs.key, { mode: 0o600 });

  const env = {
    KUBECONFIG: sandbox.kubeconfigPath,
    CSI_ENDPOINT: sandbox.csi.endpoint,
    DRIVER_NAME: driverName,
    PROVISIONER_DRIVERS: driverName,
  };
  const running: Running[] = [];
  for (const f of functions) {
    say(`kube-storage-functions: starting function ${f.name}...`);
    const extra: Record<string, string> =
      f.name === "admission"
        ? {
            TLS_CERT_FILE: join(certDir, "tls.crt"),
            TLS_KEY_FILE: join(certDir, "tls.key"),
          }
        : {};
    const r = await startFunction(f.name, { ...env, ...extra });
    running.push(r);
    say(`  ${f.name.padEnd(14)} ${r.url}`);
  }

  const admission = running.find((r) => r.name === "admission")!;
  registerAdmissionWebhooks(sandbox.apiServer.registry, admission.url, certs.caCert);
  say("  webhooks       registered with the sandbox API server (HTTPS, caBundle)");

  say("kube-storage-functions: starting the event forwarder...");
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(sandbox.kubeconfigPath);
  const forwarder: Forwarder = startForwarder({
    kubeConfig,
    routes: running
      .filter((r) => functions.find((f) => f.name === r.name)!.kinds.length > 0)
      .map((r) => ({
        url: `${r.url}/`,
        kinds: functions.find((f) => f.name === r.name)!.kinds,
      })),
    logger: createLogger({ name: "forwarder", level: process.env.LOG_LEVEL ?? "warn" }),
  });
  await forwarder.ready;
  say("  forwarder      watching PVCs, PVs, pods, nodes and VolumeAttachments");

  const timer = setInterval(() => {
    for (const r of running) {
      if (r.name === "admission") continue;
      fetch(`${r.url}/resync`, { method: "POST" })
        .then((res) => res.arrayBuffer())
        .catch(() => undefined);
    }
  }, tickSeconds * 1000);

  let stopping = false;
  const kube = new KubeJsonClient(kubeConfig);
  const stop = async (): Promise<void> => {
    if (stopping) return;
    stopping = true;
    clearInterval(timer);
    say("kube-storage-functions: stopping...");
    await forwarder.close();
    await kube.close();
    await Promise.all(
      running.map(
        (r) =>
          new Promise<void>((done) => {
            if (r.child.exitCode !== null || r.child.signalCode !== null) return done();
            r.child.once("exit", () => done());
            r.child.kill("SIGTERM");
          }),
      ),
    );
    await sandbox.close();
    process.exit(0);
  };
  process.on("SIGINT", () => void stop());
  process.on("SIGTERM", () => void stop());
  for (const r of running) {
    r.child.once("exit", (code) => {
      if (!stopping) {
        process.stderr.write(`function ${r.name} exited unexpectedly (${code}); stopping\n`);
        void stop();
      }
    });
  }

  if (process.env.DEMO !== "0") await runDemo(kube, driverName, sandbox.csi.driver.config.nodeId);

  say("");
  say(
    `Ready. Events flow through the forwarder; controllers also resync every ${tickSeconds}s. Look around:`,
  );
  say(`  export KUBECONFIG=${sandbox.kubeconfigPath}`);
  say("  kubectl get sc,pv,pvc,volumeattachments");
  const binder = running.find((r) => r.name === "binder");
  if (binder) say(`  curl ${binder.url}/explain/namespaces/default/persistentvolumeclaims/<claim>`);
  say("Ctrl-C stops everything.");
}

main().catch((err: unknown) => {
  process.stderr.write(`npm start failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
