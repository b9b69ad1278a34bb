// `npm start`: the whole system on the embedded sandbox. Starts the sandbox
// API server, then every function that is built, each as its own process the
// way `npm run serve` runs it, and keeps them fed: until the watch forwarder
// exists, a resync tick (what a Knative PingSource does in a cluster) drives
// the controllers. Stops everything on Ctrl-C.
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { rm } from "node:fs/promises";
import { resolve } from "node:path";
import { createInterface } from "node:readline";
import { startSandbox } from "./start.ts";

interface Running {
  name: string;
  url: string;
  child: ChildProcess;
}

/** Functions `npm start` runs, in start order, and whether they take /resync ticks. */
const functions: { name: string; resync: boolean }[] = [
  { name: "binder", resync: true },
  { name: "provisioner", resync: true },
  { name: "attach-detach", resync: true },
  { name: "attacher", resync: true },
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

async function main(): Promise<void> {
  const dir = resolve(process.env.SANDBOX_DIR ?? ".sandbox");
  // A fresh API server knows no PVs, so a fresh driver must hold no volumes.
  if (process.env.SANDBOX_KEEP_STATE !== "1") await rm(dir, { recursive: true, force: true });
  const port = Number(process.env.SANDBOX_PORT ?? "0");
  const tickSeconds = Number(process.env.RESYNC_INTERVAL_SECONDS ?? "5");
  say("kube-storage-functions: starting the sandbox API server...");
  const sandbox = await startSandbox({ port, dir });
  say(`  API server   ${sandbox.apiServer.url}`);
  say(`  kubeconfig   ${sandbox.kubeconfigPath}`);
  say(`  CSI driver   ${sandbox.csi.endpoint} (${sandbox.csi.driver.config.name})`);
  const env = {
    KUBECONFIG: sandbox.kubeconfigPath,
    CSI_ENDPOINT: sandbox.csi.endpoint,
    DRIVER_NAME: sandbox.csi.driver.config.name,
  };

  const running: Running[] = [];
  for (const f of functions) {
    if (!existsSync(`functions/${f.name}/main.ts`)) continue;
    say(`kube-storage-functions: starting function ${f.name}...`);
    const r = await startFunction(f.name, env);
    running.push(r);
    say(`  ${f.name.padEnd(12)} ${r.url}`);
  }

  const resyncTargets = running.filter((r) => functions.find((f) => f.name === r.name)?.resync);
  const timer = setInterval(() => {
    for (const r of resyncTargets) {
      fetch(`${r.url}/resync`, { method: "POST" })
        .then((res) => res.arrayBuffer())
        .catch(() => undefined);
    }
  }, tickSeconds * 1000);

  say("");
  say(`Ready. Controllers resync every ${tickSeconds}s. Try:`);
  say(`  export KUBECONFIG=${sandbox.kubeconfigPath}`);
  say(`  kubectl apply -f - <<EOF
  apiVersion: storage.k8s.io/v1
  kind: StorageClass
  metadata: {name: fast}
  provisioner: ${sandbox.csi.driver.config.name}
  ---
  apiVersion: v1
  kind: PersistentVolumeClaim
  metadata: {name: data}
  spec: {storageClassName: fast, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
  EOF`);
  say("  kubectl get pv,pvc");
  const binder = running.find((r) => r.name === "binder");
  if (binder) say(`  curl ${binder.url}/explain/namespaces/default/persistentvolumeclaims/<claim>`);
  say("Ctrl-C stops everything.");

  let stopping = false;
  const stop = async (): Promise<void> => {
    if (stopping) return;
    stopping = true;
    clearInterval(timer);
    say("kube-storage-functions: stopping...");
    await Promise.all(
      running.map(
        (r) =>
          new Promise<void>((done) => {
            if (r.child.exitCode !== null) return done();
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
}

main().catch((err: unknown) => {
  process.stderr.write(`npm start failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
