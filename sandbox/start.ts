// Starts the embedded sandbox (today: the API server) and writes its
// kubeconfig. Shared by `npm run sandbox`, `npm start` and the tests.
import { join, resolve } from "node:path";
import { type ApiServerHandle, startApiServer } from "./apiserver/server.ts";
import { writeSandboxKubeconfig } from "./kubeconfig.ts";

export interface SandboxOptions {
  /** API server port; 0 picks a free one. */
  port?: number;
  /** Where the kubeconfig (and later the CSI socket and volumes) go. */
  dir: string;
}

export interface Sandbox {
  apiServer: ApiServerHandle;
  kubeconfigPath: string;
  close(): Promise<void>;
}

export async function startSandbox(options: SandboxOptions): Promise<Sandbox> {
  const dir = resolve(options.dir);
  const apiServer = await startApiServer({ port: options.port ?? 0 });
  const kubeconfigPath = join(dir, "kubeconfig");
  await writeSandboxKubeconfig(kubeconfigPath, apiServer.url);
  return { apiServer, kubeconfigPath, close: () => apiServer.close() };
}
