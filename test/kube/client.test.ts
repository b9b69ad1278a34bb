import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { test } from "node:test";
import { createKubeClients, KubeConfigError, loadKubeConfig } from "../../shared/kube/client.ts";

function kubeconfigFile(
  dir: string,
  file: string,
  cluster: string,
  server: string,
  current?: string,
): string {
  const path = join(dir, file);
  writeFileSync(
    path,
    [
      "apiVersion: v1",
      "kind: Config",
      `clusters: [{name: ${cluster}, cluster: {server: "${server}", insecure-skip-tls-verify: true}}]`,
      `users: [{name: ${cluster}-user, user: {token: t-${cluster}}}]`,
      `contexts: [{name: ${cluster}-ctx, context: {cluster: ${cluster}, user: ${cluster}-user}}]`,
      current ? `current-context: ${current}` : "",
    ].join("\n"),
  );
  return path;
}

test("without KUBECONFIG or a service account there is a clear error, no silent default", () => {
  assert.throws(
    () => loadKubeConfig({ HOME: "/root" }),
    (e) => e instanceof KubeConfigError && /KUBECONFIG/.test(e.message),
  );
});

test("KUBECONFIG: one file", () => {
  const dir = mkdtempSync(join(tmpdir(), "kc-"));
  const kc = loadKubeConfig({ KUBECONFIG: kubeconfigFile(dir, "a", "a", "https://a.example:6443", "a-ctx") });
  assert.equal(kc.getCurrentCluster()?.server, "https://a.example:6443");
  assert.equal(kc.getCurrentUser()?.token, "t-a");
});

test("KUBECONFIG: a path list merges, the first current-context wins (kubectl rules)", () => {
  const dir = mkdtempSync(join(tmpdir(), "kc-"));
  const a = kubeconfigFile(dir, "a", "a", "https://a.example:6443", "a-ctx");
  const b = kubeconfigFile(dir, "b", "b", "https://b.example:6443", "b-ctx");
  const kc = loadKubeConfig({ KUBECONFIG: [a, "", b].join(delimiter) });
  assert.equal(kc.getCurrentCluster()?.server, "https://a.example:6443");
  assert.deepEqual(
    kc.getContexts().map((c) => c.name),
    ["a-ctx", "b-ctx"],
  );
  const c = kubeconfigFile(dir, "c", "c", "https://c.example:6443");
  assert.equal(
    loadKubeConfig({ KUBECONFIG: [c, b].join(delimiter) }).getCurrentCluster()?.server,
    "https://b.example:6443",
  );
});

test("KUBECONFIG naming a missing file, or one without a current cluster, fails clearly", () => {
  const dir = mkdtempSync(join(tmpdir(), "kc-"));
  assert.throws(() => loadKubeConfig({ KUBECONFIG: join(dir, "nope") }), /does not exist/);
  const c = kubeconfigFile(dir, "c", "c", "https://c.example:6443");
  assert.throws(() => loadKubeConfig({ KUBECONFIG: c }), /current-context/);
});

test("in-cluster: service account token and CA, server from the env given", () => {
  const prefix = mkdtempSync(join(tmpdir(), "sa-"));
  const sa = join(prefix, "var/run/secrets/kubernetes.io/serviceaccount");
  const env = { KUBERNETES_SERVICE_HOST: "fd00::1", KUBERNETES_SERVICE_PORT: "443" };
  assert.throws(() => loadKubeConfig(env, { inClusterPathPrefix: prefix }), /token is missing/);
  mkdirSync(sa, { recursive: true });
  writeFileSync(join(sa, "token"), "sa-token");
  writeFileSync(join(sa, "ca.crt"), "not really a cert");
  writeFileSync(join(sa, "namespace"), "storage");
  const kc = loadKubeConfig(env, { inClusterPathPrefix: prefix });
  const cluster = kc.getCurrentCluster();
  assert.equal(cluster?.server, "https://[fd00::1]:443");
  assert.equal(cluster?.caFile, join(sa, "ca.crt"));
  assert.equal(cluster?.skipTLSVerify, false);
  assert.equal(kc.getCurrentUser()?.authProvider?.config?.tokenFile, join(sa, "token"));
  assert.throws(() => loadKubeConfig({ KUBERNETES_SERVICE_HOST: "10.0.0.1" }), /KUBERNETES_SERVICE_PORT/);
});

test("createKubeClients binds core and storage clients to the config", () => {
  const dir = mkdtempSync(join(tmpdir(), "kc-"));
  const kc = loadKubeConfig({ KUBECONFIG: kubeconfigFile(dir, "a", "a", "https://a.example:6443", "a-ctx") });
  const clients = createKubeClients(kc);
  assert.equal(clients.kubeConfig, kc);
  assert.equal(typeof clients.core.readNamespacedPersistentVolumeClaim, "function");
  assert.equal(typeof clients.storage.readVolumeAttachment, "function");
});

test("against the sandbox: KUBECONFIG → typed clients over real HTTP", async (t) => {
  const { startTestSandbox } = await import("../helpers/sandbox.ts");
  const sandbox = await startTestSandbox();
  t.after(() => sandbox.close());
  const { core, storage } = createKubeClients(loadKubeConfig({ KUBECONFIG: sandbox.kubeconfigPath }));

  const created = await core.createNamespacedPersistentVolumeClaim({
    namespace: "default",
    body: {
      metadata: { name: "data" },
      spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
    },
  });
  assert.ok(created.metadata?.uid);
  const read = await core.readNamespacedPersistentVolumeClaim({ name: "data", namespace: "default" });
  assert.equal(read.metadata?.resourceVersion, created.metadata?.resourceVersion);
  assert.deepEqual((await storage.listVolumeAttachment()).items, []);
  const counters = await sandbox.admin.counters();
  assert.equal(counters["create persistentvolumeclaims"], 1);
  assert.equal(counters["get persistentvolumeclaims"], 1);
});
