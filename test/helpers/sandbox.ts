// Starts a private sandbox API server for one test file and talks to its
// test hooks over real HTTP, the way an out-of-process test would.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KubeConfig } from "@kubernetes/client-node";
import type { FaultSettings } from "../../sandbox/apiserver/faults.ts";
import { startSandbox } from "../../sandbox/start.ts";

export interface SandboxAdmin {
  seed(objects: object[]): Promise<void>;
  counters(): Promise<Record<string, number>>;
  resetCounters(): Promise<void>;
  setFaults(f: FaultSettings): Promise<void>;
  clearFaults(): Promise<void>;
  reset(): Promise<void>;
  compact(): Promise<void>;
}

export interface TestSandbox {
  url: string;
  kubeconfigPath: string;
  kubeConfig: KubeConfig;
  admin: SandboxAdmin;
  close(): Promise<void>;
}

async function call(url: string, method: string, body?: unknown): Promise<unknown> {
  const res = await fetch(url, {
    method,
    headers: { "Content-Type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`sandbox hook ${method} ${url}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : undefined;
}

export function sandboxAdmin(url: string): SandboxAdmin {
  const hook = (path: string) => `${url}/_sandbox/${path}`;
  return {
    seed: async (objects) => void (await call(hook("seed"), "POST", { objects })),
    counters: async () => (await call(hook("counters"), "GET")) as Record<string, number>,
    resetCounters: async () => void (await call(hook("counters"), "DELETE")),
    setFaults: async (f) => void (await call(hook("faults"), "PUT", f)),
    clearFaults: async () => void (await call(hook("faults"), "DELETE")),
    reset: async () => void (await call(hook("reset"), "POST")),
    compact: async () => void (await call(hook("compact"), "POST")),
  };
}

export async function startTestSandbox(): Promise<TestSandbox> {
  const dir = await mkdtemp(join(tmpdir(), "ksf-sandbox-"));
  const sandbox = await startSandbox({ dir });
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(sandbox.kubeconfigPath);
  return {
    url: sandbox.apiServer.url,
    kubeconfigPath: sandbox.kubeconfigPath,
    kubeConfig,
    admin: sandboxAdmin(sandbox.apiServer.url),
    close: async () => {
      await sandbox.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
