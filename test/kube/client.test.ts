import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { test } from "node:test";
import { isNotFound, isTransient, retryAfterSeconds, statusCodeOf } from "../../shared/kube/api-errors.ts";
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

  // Server trouble as client-node reports it, classified by api-errors.
  await sandbox.admin.setFaults({ errorProbability: 1, errorCode: 503, verbs: ["get"] });
  const unavailable = await core
    .readNamespacedPersistentVolumeClaim({ name: "data", namespace: "default" })
    .catch((e: unknown) => e);
  await sandbox.admin.clearFaults();
  assert.equal(statusCodeOf(unavailable), 503);
  assert.equal(isTransient(unavailable), true);
  assert.equal(retryAfterSeconds(unavailable), 1);
  const missing = await core
    .readNamespacedPersistentVolumeClaim({ name: "nope", namespace: "default" })
    .catch((e: unknown) => e);
  assert.equal(isNotFound(missing), true);
});

// The sandbox speaks plain HTTP; a real kube-apiserver speaks HTTPS. This pins
// down that a kubeconfig with a CA, a client certificate and a bearer token
// reaches a TLS server through loadKubeConfig unchanged.
test("HTTPS: cluster CA, client certificate and bearer token from the kubeconfig", async (t) => {
  const { generateKeyPairSync } = await import("node:crypto");
  const { createServer } = await import("node:https");
  const { default: forge } = await import("node-forge");

  const keyPair = () => {
    const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
    return {
      pem: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
      forgePrivate: forge.pki.privateKeyFromPem(
        privateKey.export({ type: "pkcs1", format: "pem" }).toString(),
      ),
      forgePublic: forge.pki.publicKeyFromPem(publicKey.export({ type: "spki", format: "pem" }).toString()),
    };
  };
  const certificate = (
    cn: string,
    subjectKey: ReturnType<typeof keyPair>,
    issuer: { cn: string; key: ReturnType<typeof keyPair> } | undefined,
    extensions: object[],
    serial: string,
  ) => {
    const cert = forge.pki.createCertificate();
    cert.publicKey = subjectKey.forgePublic;
    cert.serialNumber = serial;
    cert.validity.notBefore = new Date(Date.now() - 60_000);
    cert.validity.notAfter = new Date(Date.now() + 3_600_000);
    cert.setSubject([{ name: "commonName", value: cn }]);
    cert.setIssuer([{ name: "commonName", value: issuer?.cn ?? cn }]);
    cert.setExtensions(extensions);
    cert.sign((issuer?.key ?? subjectKey).forgePrivate, forge.md.sha256.create());
    return forge.pki.certificateToPem(cert);
  };
  const caKey = keyPair();
  const caPem = certificate(
    "test-ca",
    caKey,
    undefined,
    [
      { name: "basicConstraints", cA: true },
      { name: "keyUsage", keyCertSign: true },
    ],
    "01",
  );
  const ca = { cn: "test-ca", key: caKey };
  const serverKey = keyPair();
  const serverPem = certificate(
    "apiserver",
    serverKey,
    ca,
    [{ name: "subjectAltName", altNames: [{ type: 7, ip: "127.0.0.1" }] }],
    "02",
  );
  const clientKey = keyPair();
  const clientPem = certificate(
    "storage-functions",
    clientKey,
    ca,
    [{ name: "extKeyUsage", clientAuth: true }],
    "03",
  );

  const seen: { cn?: string; authorization?: string }[] = [];
  const server = createServer(
    { key: serverKey.pem, cert: serverPem, ca: caPem, requestCert: true, rejectUnauthorized: false },
    (req, res) => {
      const peer = (req.socket as import("node:tls").TLSSocket).getPeerCertificate();
      seen.push({ cn: peer?.subject?.CN?.toString(), authorization: req.headers.authorization });
      res.writeHead(200, { "content-type": "application/json" });
      res.end(
        JSON.stringify({
          apiVersion: "v1",
          kind: "PersistentVolumeClaim",
          metadata: { name: "data", namespace: "ns", resourceVersion: "9" },
        }),
      );
    },
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => server.close());
  const port = (server.address() as import("node:net").AddressInfo).port;

  const b64 = (s: string) => Buffer.from(s).toString("base64");
  const dir = mkdtempSync(join(tmpdir(), "kc-tls-"));
  const write = (name: string, user: string[]) => {
    const path = join(dir, name);
    writeFileSync(
      path,
      [
        "apiVersion: v1",
        "kind: Config",
        "clusters:",
        "- name: real",
        "  cluster:",
        `    server: https://127.0.0.1:${port}`,
        `    certificate-authority-data: ${b64(caPem)}`,
        "users:",
        "- name: me",
        "  user:",
        ...user.map((l) => `    ${l}`),
        "contexts:",
        "- name: real",
        "  context: {cluster: real, user: me}",
        "current-context: real",
      ].join("\n"),
    );
    return path;
  };
  const read = (path: string) =>
    createKubeClients(loadKubeConfig({ KUBECONFIG: path })).core.readNamespacedPersistentVolumeClaim({
      name: "data",
      namespace: "ns",
    });

  const viaCert = await read(
    write("cert", [`client-certificate-data: ${b64(clientPem)}`, `client-key-data: ${b64(clientKey.pem)}`]),
  );
  assert.equal(viaCert.metadata?.resourceVersion, "9");
  await read(write("token", ["token: s3cret"]));
  assert.deepEqual(seen, [
    { cn: "storage-functions", authorization: undefined },
    { cn: undefined, authorization: "Bearer s3cret" },
  ]);

  // A server certificate the cluster CA did not sign is refused, not trusted.
  const otherCa = certificate(
    "other-ca",
    keyPair(),
    undefined,
    [{ name: "basicConstraints", cA: true }],
    "04",
  );
  const wrongCa = join(dir, "wrong-ca");
  writeFileSync(
    wrongCa,
    readFileSync(write("token2", ["token: s3cret"]), "utf8").replace(b64(caPem), b64(otherCa)),
  );
  await assert.rejects(read(wrongCa));
  assert.equal(seen.length, 2);
});
