// `npm run sandbox`: the embedded Kubernetes API server and CSI driver, until Ctrl-C.
// Prints one JSON line on stdout when ready; logs go to stderr.
import { resolve } from "node:path";
import { startSandbox } from "./start.ts";

const port = Number(process.env.SANDBOX_PORT ?? "0");
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  process.stderr.write(`SANDBOX_PORT must be a port number, got ${process.env.SANDBOX_PORT}\n`);
  process.exit(2);
}
const dir = resolve(process.env.SANDBOX_DIR ?? ".sandbox");
const sandbox = await startSandbox({ port, dir });

process.stdout.write(
  `${JSON.stringify({
    ready: true,
    apiServer: sandbox.apiServer.url,
    kubeconfig: sandbox.kubeconfigPath,
    csiEndpoint: sandbox.csi.endpoint,
    csiAdmin: sandbox.csi.adminUrl,
  })}\n`,
);
process.stderr.write(
  `sandbox API server at ${sandbox.apiServer.url}; CSI driver ${sandbox.csi.driver.config.name} at ${sandbox.csi.endpoint} (admin ${sandbox.csi.adminUrl}); try: kubectl --kubeconfig ${sandbox.kubeconfigPath} get pv,pvc\n`,
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
