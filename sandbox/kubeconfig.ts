// A kubeconfig pointing at the sandbox API server, for client-node and kubectl.
import { mkdir, writeFile } from "node:fs/promises";
import { dirname } from "node:path";

export function sandboxKubeconfig(server: string): string {
  return [
    "apiVersion: v1",
    "kind: Config",
    "clusters:",
    "- name: sandbox",
    "  cluster:",
    `    server: ${server}`,
    // client-node 2.x refuses plain HTTP unless TLS verification is declared off.
    "    insecure-skip-tls-verify: true",
    "users:",
    "- name: sandbox",
    "  user:",
    "    token: sandbox",
    "contexts:",
    "- name: sandbox",
    "  context:",
    "    cluster: sandbox",
    "    user: sandbox",
    "    namespace: default",
    "current-context: sandbox",
    "",
  ].join("\n");
}

export async function writeSandboxKubeconfig(path: string, server: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, sandboxKubeconfig(server), { mode: 0o600 });
}
