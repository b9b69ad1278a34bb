import assert from "node:assert/strict";
import { test } from "node:test";
import { CoreV1Api, KubeConfig, type KubernetesObject } from "@kubernetes/client-node";
import { EventRecorder, eventName } from "../../shared/kube/event-recorder.ts";

const pvc: KubernetesObject = {
  apiVersion: "v1",
  kind: "PersistentVolumeClaim",
  metadata: { name: "data", namespace: "ns", uid: "u-1", resourceVersion: "7" },
};

test("event names are deterministic per object, type, reason, message and component", () => {
  const name = eventName(pvc, "persistentvolume-controller", "Normal", "FailedBinding", "no volumes");
  assert.match(name, /^data\.[0-9a-f]{16}$/);
  assert.equal(eventName(pvc, "persistentvolume-controller", "Normal", "FailedBinding", "no volumes"), name);
  const variants = [
    eventName(pvc, "persistentvolume-controller", "Warning", "FailedBinding", "no volumes"),
    eventName(pvc, "persistentvolume-controller", "Normal", "Other", "no volumes"),
    eventName(pvc, "persistentvolume-controller", "Normal", "FailedBinding", "other"),
    eventName(pvc, "csi-provisioner", "Normal", "FailedBinding", "no volumes"),
    eventName(
      { ...pvc, metadata: { ...pvc.metadata, uid: "u-2" } },
      "persistentvolume-controller",
      "Normal",
      "FailedBinding",
      "no volumes",
    ),
  ];
  assert.equal(new Set([name, ...variants]).size, 6);
});

test("long involved names are cut to keep the Event name a valid DNS subdomain", () => {
  const long = `${"a".repeat(235)}-${"c".repeat(17)}`; // cut lands right after the "-"
  const name = eventName(
    { kind: "PersistentVolume", metadata: { name: long, uid: "u" } },
    "c",
    "Normal",
    "R",
    "m",
  );
  assert.ok(name.length <= 253, String(name.length));
  assert.match(name, /^[a-z0-9]([-a-z0-9]*[a-z0-9])?\.[0-9a-f]{16}$/);
});

test("never throws: an unreachable server and a malformed object are reported, not raised", async () => {
  const kc = new KubeConfig();
  kc.loadFromClusterAndUser({ name: "c", server: "http://127.0.0.1:1", skipTLSVerify: true }, { name: "u" });
  const warnings: string[] = [];
  const recorder = new EventRecorder(kc.makeApiClient(CoreV1Api), {
    component: "persistentvolume-controller",
    logger: { warn: (_d, m) => warnings.push(m) },
  });
  const r1 = await recorder.event(pvc, "Warning", "ClaimLost", "gone");
  assert.equal(r1.outcome, "failed");
  assert.match(r1.name ?? "", /^data\./);
  const r2 = await recorder.event({ metadata: { name: "x" } }, "Normal", "R", "m");
  assert.equal(r2.outcome, "failed");
  assert.equal(warnings.length, 2);
});
