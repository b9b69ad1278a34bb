// The real kubectl 1.24 against `npm run sandbox`, as a user would drive it:
// the sandbox runs as its own process and kubectl uses the printed kubeconfig.
import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, before, describe, it } from "node:test";
import { kubectl } from "../helpers/kubectl.ts";

let child: ChildProcess;
let dir: string;
let kubeconfig: string;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "ksf-kubectl-"));
  child = spawn(process.execPath, ["sandbox/main.ts"], {
    // No protection controller runs here, so nothing would lift kube-apiserver's protection finalizers.
    env: {
      ...process.env,
      SANDBOX_PORT: "0",
      SANDBOX_DIR: dir,
      SANDBOX_DISABLE_ADMISSION_PLUGINS: "StorageObjectInUseProtection",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines = createInterface({ input: child.stdout! });
  const ready = await new Promise<Record<string, unknown>>((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`sandbox exited early with ${code}`)));
    lines.once("line", (line) => resolve(JSON.parse(line) as Record<string, unknown>));
  });
  assert.equal(ready.ready, true);
  assert.match(String(ready.apiServer), /^http:\/\/127\.0\.0\.1:\d+$/);
  kubeconfig = String(ready.kubeconfig);
});

after(async () => {
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGTERM");
  assert.equal(await exited, 0);
  await rm(dir, { recursive: true, force: true });
});

const manifests = `
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: fast
provisioner: hostpath.csi.k8s.io
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: pv-kubectl
spec:
  capacity:
    storage: 2Gi
  accessModes: [ReadWriteOnce]
  storageClassName: fast
  csi:
    driver: hostpath.csi.k8s.io
    volumeHandle: vol-1
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data
  namespace: default
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: fast
  resources:
    requests:
      storage: 1Gi
`;

describe("kubectl 1.24 against the sandbox", () => {
  it("applies a StorageClass, PV and PVC, then gets, patches, re-applies and deletes them", async () => {
    const apply = await kubectl(kubeconfig, ["apply", "-f", "-"], manifests);
    assert.equal(apply.code, 0, apply.stderr);
    assert.match(apply.stdout, /storageclass.storage.k8s.io\/fast created/);
    assert.match(apply.stdout, /persistentvolume\/pv-kubectl created/);
    assert.match(apply.stdout, /persistentvolumeclaim\/data created/);

    const get = await kubectl(kubeconfig, ["get", "pv,pvc"]);
    assert.equal(get.code, 0, get.stderr);
    assert.match(get.stdout, /NAME\s+CAPACITY\s+ACCESS MODES\s+RECLAIM POLICY\s+STATUS/);
    assert.match(get.stdout, /persistentvolume\/pv-kubectl\s+2Gi\s+RWO\s+Retain\s+Pending/);
    assert.match(get.stdout, /persistentvolumeclaim\/data\s+Pending/);

    const sc = await kubectl(kubeconfig, ["get", "storageclass", "fast", "-o", "jsonpath={.reclaimPolicy}"]);
    assert.equal(sc.stdout, "Delete");

    const patch = await kubectl(kubeconfig, [
      "patch",
      "pv",
      "pv-kubectl",
      "-p",
      '{"metadata":{"labels":{"tier":"gold"}}}',
    ]);
    assert.equal(patch.code, 0, patch.stderr);
    assert.match(patch.stdout, /persistentvolume\/pv-kubectl patched/);
    const label = await kubectl(kubeconfig, ["get", "pv", "-l", "tier=gold", "-o", "name"]);
    assert.equal(label.stdout.trim(), "persistentvolume/pv-kubectl");

    const jsonPatch = await kubectl(kubeconfig, [
      "patch",
      "pv",
      "pv-kubectl",
      "--type=json",
      "-p",
      '[{"op":"replace","path":"/spec/persistentVolumeReclaimPolicy","value":"Delete"}]',
    ]);
    assert.equal(jsonPatch.code, 0, jsonPatch.stderr);

    const reapply = await kubectl(
      kubeconfig,
      ["apply", "-f", "-"],
      manifests.replace("storage: 2Gi", "storage: 3Gi"),
    );
    assert.equal(reapply.code, 0, reapply.stderr);
    assert.match(reapply.stdout, /persistentvolume\/pv-kubectl configured/);
    assert.match(reapply.stdout, /persistentvolumeclaim\/data unchanged/);
    const yaml = await kubectl(kubeconfig, [
      "get",
      "pv",
      "pv-kubectl",
      "-o",
      "jsonpath={.spec.capacity.storage} {.metadata.labels.tier}",
    ]);
    assert.equal(yaml.stdout, "3Gi gold");

    const del = await kubectl(kubeconfig, ["delete", "pvc", "data", "--timeout=10s"]);
    assert.equal(del.code, 0, del.stderr);
    assert.match(del.stdout, /persistentvolumeclaim "data" deleted/);
    const gone = await kubectl(kubeconfig, ["get", "pvc", "data"]);
    assert.notEqual(gone.code, 0);
    assert.match(gone.stderr, /persistentvolumeclaims "data" not found/);
  });
});
