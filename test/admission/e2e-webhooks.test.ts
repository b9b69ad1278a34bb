// The admission webhooks as kube-apiserver uses them: the sandbox API server
// calls the real admission function over HTTPS (certificate from
// shared/tls, caBundle in the stored webhook configurations); a PVC created
// with client-node is stored with the default class, the finalizers and the
// provisioner annotations; a shrinking update is refused with the webhook's
// message; with the opt-in VolumeAttachment hook, an attacher naming no
// CSIDriver is refused.
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, it } from "node:test";
import { ApiException, CoreV1Api, StorageV1Api } from "@kubernetes/client-node";
import { admissionWebhookConfigurations } from "../../sandbox/admission-webhooks.ts";
import { generateCertificates } from "../../shared/tls/certificates.ts";
import { type FunctionProcess, startFunctionProcess } from "../helpers/function-process.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";
import { driverName, type StorageSystem, startStorageSystem } from "../helpers/storage-system.ts";

let sandbox: TestSandbox;
let admission: FunctionProcess;
let system: StorageSystem;
let dir: string;

before(async () => {
  sandbox = await startTestSandbox();
  system = await startStorageSystem(sandbox);
  dir = await mkdtemp(join(tmpdir(), "ksf-admission-"));
  const certs = generateCertificates({
    service: "admission",
    namespace: "ksf",
    extraDnsNames: ["localhost", "127.0.0.1"],
  });
  await writeFile(join(dir, "tls.crt"), certs.cert);
  await writeFile(join(dir, "tls.key"), certs.key, { mode: 0o600 });
  admission = await startFunctionProcess("admission", {
    KUBECONFIG: sandbox.kubeconfigPath,
    TLS_CERT_FILE: join(dir, "tls.crt"),
    TLS_KEY_FILE: join(dir, "tls.key"),
    PROVISIONER_DRIVERS: driverName,
  });
  assert.match(admission.url, /^https:\/\//);
  // failurePolicy Fail: a webhook that cannot be reached must fail the request here.
  await sandbox.admin.seed([
    // Every hook, the opt-in components' included: each is exercised over HTTPS here.
    ...admissionWebhookConfigurations(admission.url, certs.caCert, "Fail", {
      storagePluginsOff: true,
      attachmentDriverCheck: true,
    }),
    {
      apiVersion: "storage.k8s.io/v1",
      kind: "StorageClass",
      metadata: { name: "standard", annotations: { "storageclass.kubernetes.io/is-default-class": "true" } },
      provisioner: driverName,
      reclaimPolicy: "Delete",
      volumeBindingMode: "Immediate",
    },
  ]);
});

after(async () => {
  await admission.stop();
  await system.close();
  await sandbox.close();
  await rm(dir, { recursive: true, force: true });
});

it("a PVC created with client-node is stored mutated by the webhook; shrink and disallowed expansion are refused", async () => {
  const core = sandbox.kubeConfig.makeApiClient(CoreV1Api);
  const created = await core.createNamespacedPersistentVolumeClaim({
    namespace: "default",
    body: {
      metadata: { name: "data" },
      spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "2Gi" } } },
    },
  });
  assert.equal(created.spec?.storageClassName, "standard");
  assert.deepEqual(created.metadata?.finalizers, [
    "kubernetes.io/pvc-protection",
    "storage.kube-storage-functions.io/provisioning",
  ]);
  assert.equal(created.metadata?.annotations?.["volume.kubernetes.io/storage-provisioner"], driverName);
  assert.equal(created.metadata?.annotations?.["volume.beta.kubernetes.io/storage-provisioner"], driverName);

  // Provisioned and bound with the webhook in the write path (the PV gets pv-protection).
  await system.settle();
  const bound = await core.readNamespacedPersistentVolumeClaim({ name: "data", namespace: "default" });
  assert.equal(bound.status?.phase, "Bound");
  const pv = await core.readPersistentVolume({ name: bound.spec!.volumeName! });
  assert.ok(pv.metadata?.finalizers?.includes("kubernetes.io/pv-protection"));

  const update = (storage: string) =>
    core.replaceNamespacedPersistentVolumeClaim({
      name: "data",
      namespace: "default",
      body: { ...bound, spec: { ...bound.spec, resources: { requests: { storage } } } },
    });
  const messageOf = (err: unknown): string => {
    assert.ok(err instanceof ApiException);
    return ((typeof err.body === "string" ? JSON.parse(err.body) : err.body) as { message: string }).message;
  };
  // kube-apiserver's own validation refuses a shrink to status.capacity before any validating webhook runs; so does the sandbox.
  await assert.rejects(update("1Gi"), (err: unknown) => {
    assert.match(messageOf(err), /field can not be less than status\.capacity/);
    return true;
  });
  // Growing a claim whose class does not allow expansion: kube-apiserver's PersistentVolumeClaimResize plugin
  // refuses it after validation and before the webhooks (the webhook holds the same rule for servers without it).
  await assert.rejects(update("3Gi"), (err: unknown) => {
    assert.ok(err instanceof ApiException);
    assert.equal(err.code, 403);
    assert.equal(
      messageOf(err),
      'persistentvolumeclaims "data" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize',
    );
    return true;
  });
});

it("with components/attachment-driver-check, a VolumeAttachment naming no CSIDriver is refused over HTTPS", async () => {
  const storage = sandbox.kubeConfig.makeApiClient(StorageV1Api);
  const attachment = (name: string, attacher: string) => ({
    metadata: { name },
    spec: { attacher, nodeName: "node-1", source: { persistentVolumeName: `pv-${name}` } },
  });
  const created = await storage.createVolumeAttachment({ body: attachment("va-known", driverName) });
  assert.equal(created.spec.attacher, driverName);
  await assert.rejects(
    storage.createVolumeAttachment({ body: attachment("va-typo", "typo.csi.example.com") }),
    (err: unknown) => {
      assert.ok(err instanceof ApiException);
      assert.match(String(err.body), /no CSIDriver named \\?"typo\.csi\.example\.com\\?" exists/);
      return true;
    },
  );
  await storage.deleteVolumeAttachment({ name: "va-known" });
});
