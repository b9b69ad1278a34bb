import assert from "node:assert/strict";
import { after, before, beforeEach, describe, test } from "node:test";
import { type CoreV1Api, KubeConfig, type KubernetesObject } from "@kubernetes/client-node";
import { isConflict } from "../../shared/kube/api-errors.ts";
import { createKubeClients } from "../../shared/kube/client.ts";
import { EventRecorder, eventName } from "../../shared/kube/event-recorder.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";

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
  const recorder = new EventRecorder(new KubeJsonClient(kc), {
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

// ---------------------------------------------------------------------------
// Over real HTTP against the sandbox API server, with the real client-node.

describe("against the sandbox", () => {
  let sandbox: TestSandbox;
  let core: CoreV1Api;
  let json: KubeJsonClient;
  const clock = { now: new Date("2026-03-01T10:00:00.250Z") };
  const warnings: string[] = [];
  let recorder: EventRecorder;

  before(async () => {
    sandbox = await startTestSandbox();
    ({ core, json } = createKubeClients(sandbox.kubeConfig));
    recorder = new EventRecorder(json, {
      component: "persistentvolume-controller",
      host: "node-a",
      now: () => clock.now,
      logger: { warn: (_d, m) => warnings.push(m) },
    });
  });
  after(() => sandbox.close());
  beforeEach(async () => {
    await sandbox.admin.reset();
    await sandbox.admin.seed([{ apiVersion: "v1", kind: "Namespace", metadata: { name: "ns" } }]);
    await sandbox.admin.resetCounters();
    warnings.length = 0;
    clock.now = new Date("2026-03-01T10:00:00.250Z");
  });

  test("first report creates an upstream-shaped Event", async () => {
    const r = await recorder.event(pvc, "Normal", "FailedBinding", "no persistent volumes available");
    assert.equal(r.outcome, "created");
    assert.equal(r.namespace, "ns");
    const e = await core.readNamespacedEvent({ name: r.name ?? "", namespace: "ns" });
    assert.deepEqual(
      {
        involvedObject: { ...e.involvedObject },
        reason: e.reason,
        message: e.message,
        type: e.type,
        source: { ...e.source },
        reportingComponent: e.reportingComponent,
        reportingInstance: e.reportingInstance,
        firstTimestamp: e.firstTimestamp?.toISOString(),
        lastTimestamp: e.lastTimestamp?.toISOString(),
        count: e.count,
        eventTime: e.eventTime,
      },
      {
        involvedObject: {
          apiVersion: "v1",
          kind: "PersistentVolumeClaim",
          name: "data",
          namespace: "ns",
          uid: "u-1",
          resourceVersion: "7",
        },
        reason: "FailedBinding",
        message: "no persistent volumes available",
        type: "Normal",
        source: { component: "persistentvolume-controller", host: "node-a" },
        reportingComponent: "persistentvolume-controller",
        reportingInstance: "node-a",
        firstTimestamp: "2026-03-01T10:00:00.000Z",
        lastTimestamp: "2026-03-01T10:00:00.000Z",
        count: 1,
        eventTime: null,
      },
    );
  });

  test("a repeat, by any recorder instance, bumps count: exactly one create and one patch", async () => {
    const first = await recorder.event(
      pvc,
      "Warning",
      "ClaimLost",
      "Bound claim has lost its PersistentVolume.",
    );
    await sandbox.admin.resetCounters();
    clock.now = new Date("2026-03-01T10:05:00Z");
    // A different process (new recorder, same component) repeats the same event.
    const other = new EventRecorder(json, {
      component: "persistentvolume-controller",
      host: "node-b",
      now: () => clock.now,
    });
    const second = await other.event(
      pvc,
      "Warning",
      "ClaimLost",
      "Bound claim has lost its PersistentVolume.",
    );
    assert.deepEqual([second.outcome, second.count, second.name], ["bumped", 2, first.name]);
    const counters = await sandbox.admin.counters();
    assert.equal(counters["create events"], 1);
    assert.equal(counters["patch events"], 1);
    const e = await core.readNamespacedEvent({ name: first.name ?? "", namespace: "ns" });
    assert.equal(e.count, 2);
    assert.equal(e.firstTimestamp?.toISOString(), "2026-03-01T10:00:00.000Z");
    assert.equal(e.lastTimestamp?.toISOString(), "2026-03-01T10:05:00.000Z");
    const list = await core.listNamespacedEvent({ namespace: "ns" });
    assert.equal(list.items.length, 1);
  });

  test("a different message is a different Event", async () => {
    const a = await recorder.event(pvc, "Warning", "VolumeMismatch", "requested PV is too small");
    const b = await recorder.event(pvc, "Warning", "VolumeMismatch", "incompatible accessMode");
    assert.notEqual(a.name, b.name);
    assert.equal((await core.listNamespacedEvent({ namespace: "ns" })).items.length, 2);
  });

  test("cluster-scoped objects get their Events in default", async () => {
    const pv = {
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: { name: "pv1", uid: "pv-u", resourceVersion: "3" },
    };
    const r = await recorder.event(pv, "Warning", "VolumeFailedDelete", "boom");
    assert.deepEqual([r.outcome, r.namespace], ["created", "default"]);
    const e = await core.readNamespacedEvent({ name: r.name ?? "", namespace: "default" });
    assert.equal(e.involvedObject.namespace, undefined);
    assert.equal(e.involvedObject.kind, "PersistentVolume");
  });

  test("concurrent repeats are all counted (conditional patches, re-read on conflict)", async () => {
    await recorder.event(pvc, "Normal", "ExternalProvisioning", "waiting");
    const results = await Promise.all(
      [1, 2, 3].map(() => recorder.event(pvc, "Normal", "ExternalProvisioning", "waiting")),
    );
    assert.deepEqual(
      results.map((r) => r.outcome),
      ["bumped", "bumped", "bumped"],
    );
    const e = await core.readNamespacedEvent({ name: results[0]?.name ?? "", namespace: "ns" });
    assert.equal(e.count, 4);
  });

  test("server trouble never reaches the caller: the result says failed and it is logged", async () => {
    await sandbox.admin.setFaults({
      errorProbability: 1,
      errorCode: 500,
      verbs: ["create"],
      resources: ["events"],
    });
    const r = await recorder.event(pvc, "Normal", "ProvisioningSucceeded", "ok");
    assert.equal(r.outcome, "failed");
    assert.equal(warnings.length, 1);

    await sandbox.admin.setFaults({ conflictProbability: 1, verbs: ["patch"], resources: ["events"] });
    await sandbox.admin.resetCounters();
    const stuck = new EventRecorder(json, { component: "c", maxTries: 3, logger: { warn: () => {} } });
    await stuck.event(pvc, "Normal", "R", "m");
    const repeat = await stuck.event(pvc, "Normal", "R", "m");
    await sandbox.admin.clearFaults();
    assert.equal(repeat.outcome, "failed");
    assert.ok(isConflict(repeat.error));
    const counters = await sandbox.admin.counters();
    assert.equal(counters["patch events"], 3);
    assert.equal(counters["create events"], 2);
  });
});
