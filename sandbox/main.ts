// `npm run sandbox`: the embedded cluster (API server, CSI driver with a node
// plugin per node, scheduler, a kubelet per node), until Ctrl-C. Prints one
// JSON line on stdout when ready; logs and the kubelets' steps go to stderr.
// SANDBOX_SCHEDULER=0 / SANDBOX_KUBELETS=0 leave those parts out.
// It runs no kube-controller-manager: with kube-apiserver's default
// StorageObjectInUseProtection, a deleted claim or PV waits for a protection
// controller (ours: `npm start`) unless that plugin is disabled.
import { resolve } from "node:path";
import { STORAGE_ADMISSION_PLUGINS, type StorageAdmissionPlugin } from "./apiserver/storage-admission.ts";
import type { KubeletStep } from "./kubelet/kubelet.ts";
import { startSandbox } from "./start.ts";

const port = Number(process.env.SANDBOX_PORT ?? "0");
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  process.stderr.write(`SANDBOX_PORT must be a port number, got ${process.env.SANDBOX_PORT}\n`);
  process.exit(2);
}
const nodeCount = Number(process.env.SANDBOX_NODES ?? "2");
if (!Number.isInteger(nodeCount) || nodeCount < 1 || nodeCount > 26) {
  process.stderr.write(
    `SANDBOX_NODES must be a number of nodes from 1 to 26, got ${process.env.SANDBOX_NODES}\n`,
  );
  process.exit(2);
}
const dir = resolve(process.env.SANDBOX_DIR ?? ".sandbox");

function describeStep(s: KubeletStep): string {
  switch (s.step) {
    case "volumes-in-use":
      return `volumesInUse = [${s.volumes.join(", ")}]`;
    case "waiting-for-attach":
      return `pod ${s.pod}: waiting for ${s.volume} in volumesAttached`;
    case "staged":
    case "unstaged":
      return `${s.step} ${s.volume} at ${s.path}`;
    case "published":
    case "unpublished":
      return `pod ${s.pod}: ${s.step} ${s.volume} at ${s.path}`;
    case "pod-running":
      return `pod ${s.pod}: Running`;
    case "pod-deleted":
      return `pod ${s.pod}: deleted`;
    case "expanded":
      return `pod ${s.pod}: expanded ${s.volume} to ${s.size}${s.online ? " (online)" : ""}`;
  }
}

// kube-apiserver's --disable-admission-plugins, for its default storage plugins (none disabled by default).
const disabledPlugins = (process.env.SANDBOX_DISABLE_ADMISSION_PLUGINS ?? "")
  .split(",")
  .map((p) => p.trim())
  .filter((p) => p !== "");
const unknownPlugin = disabledPlugins.find(
  (p) => !(STORAGE_ADMISSION_PLUGINS as readonly string[]).includes(p),
);
if (unknownPlugin !== undefined) {
  process.stderr.write(
    `SANDBOX_DISABLE_ADMISSION_PLUGINS names ${JSON.stringify(unknownPlugin)}; known: ${STORAGE_ADMISSION_PLUGINS.join(", ")}\n`,
  );
  process.exit(2);
}
const sandbox = await startSandbox({
  disableAdmissionPlugins: disabledPlugins as StorageAdmissionPlugin[],
  port,
  dir,
  nodes: nodeCount,
  scheduler: process.env.SANDBOX_SCHEDULER !== "0",
  kubelets: process.env.SANDBOX_KUBELETS !== "0",
  onKubeletStep: (s) => {
    process.stderr.write(`kubelet ${s.node}: ${describeStep(s)}\n`);
  },
});

process.stdout.write(
  `${JSON.stringify({
    ready: true,
    apiServer: sandbox.apiServer.url,
    kubeconfig: sandbox.kubeconfigPath,
    csiEndpoint: sandbox.csi.endpoint,
    csiAdmin: sandbox.csi.adminUrl,
    nodes: sandbox.nodeNames,
    csiNodeEndpoints: sandbox.csi.nodeEndpoints,
    scheduler: sandbox.scheduler !== undefined,
    kubelets: sandbox.kubelets.map((k) => k.nodeName),
  })}\n`,
);
process.stderr.write(
  `sandbox API server at ${sandbox.apiServer.url}; CSI driver ${sandbox.csi.driver.config.name} at ${sandbox.csi.endpoint} (admin ${sandbox.csi.adminUrl}); nodes ${sandbox.nodeNames.join(", ")}; scheduler ${sandbox.scheduler ? "on" : "off"}; kubelets ${sandbox.kubelets.length > 0 ? "on" : "off"}; try: kubectl --kubeconfig ${sandbox.kubeconfigPath} get nodes,pv,pvc,pods\n`,
);

let stopping = false;
function stop(signal: string): void {
  if (stopping) return;
  stopping = true;
  process.stderr.write(`sandbox: ${signal}, stopping\n`);
  sandbox.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
}
process.on("SIGINT", () => stop("SIGINT"));
process.on("SIGTERM", () => stop("SIGTERM"));
