// `npm start` as a user runs it: the whole system comes up, a claim applied
// with kubectl gets bound without anyone posting events, Ctrl-C stops it all.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { it } from "node:test";
import { kubectl } from "../helpers/kubectl.ts";

it("npm start brings up the whole system, runs the demo there and back, binds static and provisioned claims, and SIGTERM stops every process it started", async () => {
  const dir = await mkdtemp(join(tmpdir(), "ksf-start-"));
  const child = spawn(process.execPath, ["sandbox/run-system.ts"], {
    env: { ...process.env, SANDBOX_DIR: dir, RESYNC_INTERVAL_SECONDS: "1" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const output: string[] = [];
  const ready = new Promise<void>((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`npm start exited with ${code}: ${output.join("\n")}`)));
    createInterface({ input: child.stdout! }).on("line", (line) => {
      output.push(line);
      if (line.startsWith("Ready.")) resolve();
      if (line.includes("did not finish within a minute")) reject(new Error(output.join("\n")));
    });
  });
  await ready;
  assert.ok(
    output.some((l) => /^\s+binder\s+http:\/\/127\.0\.0\.1:\d+$/.test(l)),
    output.join("\n"),
  );
  // The demo's timeline: the pod ran after its node listed the volume, and everything went again.
  const at = (text: string): number => output.findIndex((l) => l.includes(text));
  for (const step of [
    "lists the volume in status.volumesAttached",
    "NodePublishVolume",
    "pod demo-app Running",
  ])
    assert.ok(at(step) >= 0, `${step}: ${output.join("\n")}`);
  assert.ok(at("lists the volume in status.volumesAttached") < at("pod demo-app Running"));
  // The claim grew while the pod ran: controller side, then the node's filesystem, then the claim.
  for (const step of [
    "ControllerExpandVolume done",
    "NodeExpandVolume → 2Gi (online)",
    "status.capacity 2Gi",
  ])
    assert.ok(at(step) > at("pod demo-app Running"), `${step}: ${output.join("\n")}`);
  assert.ok(at("ControllerExpandVolume done") < at("NodeExpandVolume → 2Gi"));
  assert.ok(at("NodeExpandVolume → 2Gi") < at("status.capacity 2Gi"));
  for (const step of ["NodeUnpublishVolume", "VolumeAttachment deleted", "DeleteVolume done"])
    assert.ok(at(step) >= 0, `${step}: ${output.join("\n")}`);
  const urls = output.flatMap(
    (l) => /^\s+[A-Za-z -]+?\s+(https?:\/\/127\.0\.0\.1:\d+)$/.exec(l)?.slice(1) ?? [],
  );
  assert.ok(urls.length >= 7, urls.join(" "));
  const kubeconfig = join(dir, "kubeconfig");
  const manifests = `
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-start}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  csi: {driver: hostpath.csi.k8s.io, volumeHandle: start}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: claim-start, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: ""
  resources: {requests: {storage: 1Gi}}
`;
  const apply = await kubectl(kubeconfig, ["apply", "-f", "-"], manifests);
  assert.equal(apply.code, 0, apply.stderr);
  let phase = "";
  for (let i = 0; i < 40 && phase !== "Bound"; i++) {
    await new Promise((r) => setTimeout(r, 250));
    phase = (await kubectl(kubeconfig, ["get", "pvc", "claim-start", "-o", "jsonpath={.status.phase}"]))
      .stdout;
  }
  assert.equal(phase, "Bound");

  const dynamic = `
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: fast}
provisioner: hostpath.csi.k8s.io
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: claim-dynamic, namespace: default}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: fast
  resources: {requests: {storage: 1Gi}}
`;
  const applied = await kubectl(kubeconfig, ["apply", "-f", "-"], dynamic);
  assert.equal(applied.code, 0, applied.stderr);
  phase = "";
  for (let i = 0; i < 60 && phase !== "Bound"; i++) {
    await new Promise((r) => setTimeout(r, 250));
    phase = (await kubectl(kubeconfig, ["get", "pvc", "claim-dynamic", "-o", "jsonpath={.status.phase}"]))
      .stdout;
  }
  assert.equal(phase, "Bound", "a dynamically provisioned claim binds too");
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGTERM");
  assert.equal(await exited, 0);
  // Nothing it started still answers: the API server, the CSI admin endpoint's peers, every function.
  for (const url of urls) {
    const answered = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(2000) }).then(
      () => true,
      () => false,
    );
    assert.equal(answered, false, `${url} still answers after SIGTERM`);
  }
  await rm(dir, { recursive: true, force: true });
});
