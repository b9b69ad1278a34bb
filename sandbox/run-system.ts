// `npm start`: the whole system on the embedded sandbox (./system.ts), then
// the demo (./demo.ts): a claim and a pod through every function and back.
// Runs until Ctrl-C or SIGTERM, then stops everything it started.
import { rm } from "node:fs/promises";
import { resolve } from "node:path";
import { integerFromEnv } from "../shared/config.ts";
import { runDemo } from "./demo.ts";
import type { KubeletStep } from "./kubelet/kubelet.ts";
import { type RunningSystem, startSystem } from "./system.ts";

const say = (line: string): void => void process.stdout.write(`${line}\n`);

async function main(): Promise<void> {
  const dir = resolve(process.env.SANDBOX_DIR ?? ".sandbox");
  const port = integerFromEnv(process.env, "SANDBOX_PORT", 0, { min: 0, max: 65535 });
  const tickSeconds = integerFromEnv(process.env, "RESYNC_INTERVAL_SECONDS", 30, { min: 1, max: 3600 });
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
  const stepListeners: ((s: KubeletStep) => void)[] = [];
  system = await startSystem({
    dir,
    port,
    sandbox: {
      onKubeletStep: (step) => {
        for (const l of stepListeners) l(step);
      },
    },
    resyncSeconds: tickSeconds,
    logLevel: process.env.LOG_LEVEL ?? "warn",
    progress: (what, detail) => say(`  ${what.padEnd(14)} ${detail}`),
    onFunctionExit: (name, code) => {
      // Ctrl-C reaches the whole process group: functions exit on it while we stop them.
      if (stopping) return;
      process.stderr.write(`function ${name} exited unexpectedly (${code}); stopping\n`);
      void stop(1);
    },
  });
  const { sandbox } = system;

  if (process.env.DEMO !== "0") {
    const done = await runDemo(system, (l) => stepListeners.push(l), say);
    if (!done)
      say("  the demo did not finish within a minute; see the functions' logs (LOG_LEVEL=info npm start)");
  }

  say("");
  say(
    `Ready. Events flow through the forwarder; controllers also resync every ${tickSeconds}s. Look around:`,
  );
  say(`  export KUBECONFIG=${sandbox.kubeconfigPath}`);
  say("  kubectl get nodes,sc,pv,pvc,pods,volumeattachments");
  say(`  curl ${system.url("binder")}/explain/namespaces/default/persistentvolumeclaims/<claim>`);
  say("Ctrl-C stops everything.");
}

main().catch((err: unknown) => {
  process.stderr.write(`npm start failed: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
