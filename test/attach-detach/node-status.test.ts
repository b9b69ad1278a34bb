// The node status updater and force detach against the real sandbox API
// server: status.volumesAttached follows the VolumeAttachments (other
// writers' entries kept), a volume leaves it before its detach starts, two
// controllers at once end in the same list, resync repairs a missed update,
// and an out-of-service node is detached at once.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { detachPolicyFromEnv } from "../../functions/attach-detach/main.ts";
import { annDetachRequestedAt, detachLog } from "../../shared/attach-detach/constants.ts";
import { type DetachPolicy, defaultDetachPolicy } from "../../shared/attach-detach/detach-policy.ts";
import { AttachDetachController } from "../../shared/attach-detach/runtime/attach-detach-controller.ts";
import {
  type AttachDetachMetrics,
  attachDetachMetrics,
} from "../../shared/attach-detach/runtime/attach-detach-metrics.ts";
import { uniqueVolumeName, volumeAttachmentName } from "../../shared/attach-detach/volume-attachment-name.ts";
import type { ControllerEvent } from "../../shared/http/controller-function.ts";
import { EventRecorder } from "../../shared/kube/event-recorder.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { nodes, pods, volumeAttachments } from "../../shared/kube/resources.ts";
import type { KubeObject, Node, VolumeAttachment } from "../../shared/kube/types.ts";
import { annControllerManagedAttachDetach } from "../../shared/kube/well-known.ts";
import { createMetricsRegistry } from "../../shared/metrics.ts";
import { startFunctionProcess } from "../helpers/function-process.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";

const driver = "hostpath.csi.k8s.io";
const inTree = { name: "kubernetes.io/aws-ebs/vol-0abc", devicePath: "/dev/xvdf" };
const entry = (i: number) => ({ name: uniqueVolumeName(driver, `vol-${i}`), devicePath: "" });

let sandbox: TestSandbox;
let kube: KubeJsonClient;

before(async () => {
  sandbox = await startTestSandbox();
  kube = new KubeJsonClient(sandbox.kubeConfig);
});
after(async () => {
  await kube.close();
  await sandbox.close();
});
beforeEach(async () => {
  await sandbox.admin.reset();
});

interface Made {
  controller: AttachDetachController;
  metrics: AttachDetachMetrics;
  logs: string[];
}

function makeController(policy: DetachPolicy = defaultDetachPolicy): Made {
  const metrics = attachDetachMetrics(createMetricsRegistry({ defaultMetrics: false }));
  const logs: string[] = [];
  const controller = new AttachDetachController({
    kube,
    events: new EventRecorder(kube, {
      component: "attachdetach-controller",
      logger: { warn: () => undefined },
    }),
    policy,
    metrics,
    log: { info: (_details, message) => logs.push(message) },
  });
  return { controller, metrics, logs };
}

function nodeObject(
  name: string,
  opts: { ready?: boolean; inUse?: string[]; attached?: { name: string; devicePath: string }[] } = {},
): Node {
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name, annotations: { [annControllerManagedAttachDetach]: "true" } },
    spec: {},
    status: {
      conditions: [{ type: "Ready", status: opts.ready === false ? "False" : "True" }],
      ...(opts.inUse ? { volumesInUse: opts.inUse } : {}),
      ...(opts.attached ? { volumesAttached: opts.attached } : {}),
    },
  };
}

/** PV pv-i (handle vol-i) bound to claim c-i, and, if a node is given, a pod there using it. */
function volume(i: number, podNode?: string): KubeObject[] {
  const out: KubeObject[] = [
    {
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: { name: `pv-${i}` },
      spec: {
        accessModes: ["ReadWriteOnce"],
        capacity: { storage: "1Gi" },
        claimRef: { namespace: "default", name: `c-${i}`, uid: `uid-c-${i}` },
        csi: { driver, volumeHandle: `vol-${i}` },
      },
      status: { phase: "Bound" },
    } as KubeObject,
    {
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: { name: `c-${i}`, namespace: "default", uid: `uid-c-${i}` },
      spec: {
        accessModes: ["ReadWriteOnce"],
        resources: { requests: { storage: "1Gi" } },
        volumeName: `pv-${i}`,
      },
      status: { phase: "Bound" },
    } as KubeObject,
  ];
  if (podNode)
    out.push({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: `p-${i}`, namespace: "default" },
      spec: {
        nodeName: podNode,
        containers: [{ name: "app", image: "busybox" }],
        volumes: [{ name: "d", persistentVolumeClaim: { claimName: `c-${i}` } }],
      },
      status: { phase: "Running" },
    } as KubeObject);
  return out;
}

function attachment(i: number, nodeName: string, attached: boolean, annotations?: Record<string, string>) {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: {
      name: volumeAttachmentName(`vol-${i}`, driver, nodeName),
      ...(annotations ? { annotations } : {}),
    },
    spec: { attacher: driver, nodeName, source: { persistentVolumeName: `pv-${i}` } },
    status: { attached },
  };
}

/** What the external attacher does: report the attachment's state. */
async function setAttached(i: number, nodeName: string, attached: boolean): Promise<void> {
  const va = await kube.get<VolumeAttachment>(
    volumeAttachments,
    volumeAttachmentName(`vol-${i}`, driver, nodeName),
  );
  await kube.replace(volumeAttachments, { ...va, status: { attached } }, { subresource: "status" });
}

async function listedOn(name: string): Promise<{ name: string; devicePath: string }[] | undefined> {
  return (await kube.get<Node>(nodes, name)).status?.volumesAttached;
}

const nodeEvent = (name: string): ControllerEvent => ({
  action: "update",
  kind: "Node",
  apiVersion: "v1",
  name,
});
const vaEvent = (i: number, nodeName: string): ControllerEvent => ({
  action: "update",
  kind: "VolumeAttachment",
  apiVersion: "storage.k8s.io/v1",
  name: volumeAttachmentName(`vol-${i}`, driver, nodeName),
});

describe("node status volumesAttached", () => {
  it("attach reported → listed (foreign entries kept, one write); detach → unlisted first, and a failed node write holds the detach back", async () => {
    await sandbox.admin.seed([nodeObject("node-x", { attached: [inTree] }), ...volume(1, "node-x")]);
    const { controller } = makeController();
    const podEvent: ControllerEvent = {
      action: "update",
      kind: "Pod",
      apiVersion: "v1",
      name: "p-1",
      namespace: "default",
    };
    await controller.handleEvent(podEvent);
    // Created, not attached yet: the node lists nothing new.
    assert.deepEqual(await listedOn("node-x"), [inTree]);

    await setAttached(1, "node-x", true);
    await sandbox.admin.resetCounters();
    await controller.handleEvent(vaEvent(1, "node-x"));
    assert.deepEqual(await listedOn("node-x"), [inTree, entry(1)]);
    assert.equal((await sandbox.admin.counters())["patch nodes/status"], 1);
    // Duplicates of the event change nothing and write nothing.
    const again = (await controller.handleEvent(vaEvent(1, "node-x"))) as { writes: number }[];
    assert.deepEqual(
      again.map((r) => r.writes),
      [0],
    );
    assert.equal((await sandbox.admin.counters())["patch nodes/status"], 1);

    // The pod goes; the node status write fails: the VolumeAttachment must stay (no detach this pass).
    await kube.delete(pods, "p-1", "default");
    await sandbox.admin.setFaults({
      errorProbability: 1,
      errorCode: 500,
      verbs: ["patch"],
      resources: ["nodes/status"],
    });
    await assert.rejects(controller.handleEvent(nodeEvent("node-x")));
    await kube.get(volumeAttachments, volumeAttachmentName("vol-1", driver, "node-x"));
    assert.deepEqual(await listedOn("node-x"), [inTree, entry(1)]);

    await sandbox.admin.clearFaults();
    await controller.handleEvent(nodeEvent("node-x"));
    assert.deepEqual(await listedOn("node-x"), [inTree]);
    await assert.rejects(kube.get(volumeAttachments, volumeAttachmentName("vol-1", driver, "node-x")), {
      code: 404,
    });
  });

  it("two controllers at once on one node, shuffled and duplicated events, conflicts injected: exactly the attached volumes are listed", async () => {
    const count = 6;
    const objects: KubeObject[] = [nodeObject("node-m", { attached: [entry(99), inTree] })];
    for (let i = 0; i < count; i++) {
      objects.push(...volume(i, "node-m"));
      objects.push(attachment(i, "node-m", i % 2 === 0) as KubeObject);
    }
    await sandbox.admin.seed(objects);
    const a = makeController().controller;
    const b = makeController().controller;
    await sandbox.admin.setFaults({
      conflictProbability: 0.3,
      verbs: ["patch"],
      resources: ["nodes/status"],
      seed: 7,
    });
    let state = Array.from({ length: count }, (_, i) => i % 2 === 0);
    let seed = 12345;
    const random = () => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    const deliverAll = async () => {
      const events = [nodeEvent("node-m"), ...state.map((_, i) => vaEvent(i, "node-m"))];
      const doubled = [...events, ...events].sort(() => random() - 0.5);
      const half = Math.floor(doubled.length / 2);
      // Errors (conflicts retried to exhaustion) are what a forwarder retries; the next round is that retry.
      await Promise.all([
        (async () => {
          for (const e of doubled.slice(0, half)) await a.handleEvent(e).catch(() => undefined);
        })(),
        (async () => {
          for (const e of doubled.slice(half)) await b.handleEvent(e).catch(() => undefined);
        })(),
      ]);
    };
    for (let round = 0; round < 4; round++) {
      state = state.map((v) => (random() < 0.4 ? !v : v));
      await Promise.all(state.map((v, i) => setAttached(i, "node-m", v)));
      await deliverAll();
    }
    await sandbox.admin.clearFaults();
    await deliverAll();

    const want = [inTree, ...state.flatMap((v, i) => (v ? [entry(i)] : []))].sort((x, y) =>
      x.name < y.name ? -1 : 1,
    );
    assert.deepEqual(await listedOn("node-m"), want);
    // Steady: a pass of either writes nothing.
    assert.deepEqual(
      ((await a.handleEvent(nodeEvent("node-m"))) as { writes: number }[]).map((r) => r.writes),
      [0],
    );
  });

  it("a write decided on a node that changed meanwhile is refused (409) and decided again on fresh state", async () => {
    await sandbox.admin.seed([
      nodeObject("node-r"),
      ...volume(7, "node-r"),
      attachment(7, "node-r", true, {
        "attachdetach.kube-storage-functions.io/attach-reported": "true",
      }) as KubeObject,
    ]);
    const { controller } = makeController();
    // The status write waits in the server while the world moves on: detached, and the node written by someone else.
    await sandbox.admin.setFaults({ latencyMs: 400, verbs: ["patch"], resources: ["nodes/status"] });
    const pass = controller.handleEvent(vaEvent(7, "node-r"));
    await new Promise((resolve) => setTimeout(resolve, 200));
    await setAttached(7, "node-r", false);
    const n = await kube.get<Node>(nodes, "node-r");
    await kube.replace(nodes, { ...n, metadata: { ...n.metadata, labels: { moved: "yes" } } });
    await pass;
    await sandbox.admin.clearFaults();
    assert.equal(await listedOn("node-r"), undefined);
  });

  it("resync repairs a stale entry on a node without VolumeAttachments and lists a missed attach; a missing Node is skipped", async () => {
    await sandbox.admin.seed([
      nodeObject("node-s", { attached: [entry(5), inTree] }),
      nodeObject("node-t"),
      ...volume(2, "node-t"),
      attachment(2, "node-t", true) as KubeObject,
      ...volume(3, "ghost"),
      attachment(3, "ghost", true) as KubeObject,
    ]);
    const { controller } = makeController();
    const result = await controller.resync();
    assert.deepEqual(result.errors, []);
    assert.deepEqual(await listedOn("node-s"), [inTree]);
    assert.deepEqual(await listedOn("node-t"), [entry(2)]);
  });
});

describe("non-graceful shutdown and force detach", () => {
  it("an out-of-service taint detaches a volume still in use at once; counted and logged as upstream", async () => {
    const inUse = [entry(4).name];
    await sandbox.admin.seed([
      nodeObject("node-o", { inUse, attached: [entry(4)] }),
      ...volume(4),
      attachment(4, "node-o", true) as KubeObject,
    ]);
    const { controller, metrics, logs } = makeController();
    await controller.handleEvent(nodeEvent("node-o"));
    // Healthy and in use: it waits (and notes since when).
    const waiting = await kube.get<VolumeAttachment>(
      volumeAttachments,
      volumeAttachmentName("vol-4", driver, "node-o"),
    );
    assert.ok(waiting.metadata.annotations?.[annDetachRequestedAt]);
    assert.deepEqual(await listedOn("node-o"), [entry(4)]);

    const n = await kube.get<Node>(nodes, "node-o");
    await kube.replace(nodes, {
      ...n,
      spec: {
        ...n.spec,
        taints: [{ key: "node.kubernetes.io/out-of-service", value: "nodeshutdown", effect: "NoExecute" }],
      },
    });
    await controller.handleEvent(nodeEvent("node-o"));
    await assert.rejects(kube.get(volumeAttachments, volumeAttachmentName("vol-4", driver, "node-o")), {
      code: 404,
    });
    assert.equal(await listedOn("node-o"), undefined);
    assert.deepEqual(
      (await metrics.forcedDetaches.get()).values.map((v) => [v.labels.reason, v.value]),
      [["out-of-service", 1]],
    );
    assert.deepEqual(logs, [detachLog.forcedOutOfService]);
  });

  it("a NotReady node in use: force detached after the configured wait, unless force detach on timeout is disabled", async () => {
    const inUse = [entry(6).name];
    const since = new Date(Date.now() - 120_000).toISOString();
    await sandbox.admin.seed([
      nodeObject("node-n", { ready: false, inUse, attached: [entry(6)] }),
      ...volume(6),
      attachment(6, "node-n", true, { [annDetachRequestedAt]: since }) as KubeObject,
    ]);
    const disabled = makeController({ maxWaitForUnmountMs: 60_000, disableForceDetachOnTimeout: true });
    await disabled.controller.handleEvent(nodeEvent("node-n"));
    await kube.get(volumeAttachments, volumeAttachmentName("vol-6", driver, "node-n"));
    assert.deepEqual(await listedOn("node-n"), [entry(6)]);

    const longWait = makeController(); // 6 minutes: not yet
    await longWait.controller.handleEvent(nodeEvent("node-n"));
    await kube.get(volumeAttachments, volumeAttachmentName("vol-6", driver, "node-n"));

    const short = makeController({ ...defaultDetachPolicy, maxWaitForUnmountMs: 60_000 });
    await short.controller.handleEvent(nodeEvent("node-n"));
    await assert.rejects(kube.get(volumeAttachments, volumeAttachmentName("vol-6", driver, "node-n")), {
      code: 404,
    });
    assert.equal(await listedOn("node-n"), undefined);
    assert.deepEqual(
      (await short.metrics.forcedDetaches.get()).values.map((v) => [v.labels.reason, v.value]),
      [["timeout", 1]],
    );
    assert.deepEqual(short.logs, [detachLog.forcedTimeout]);
  });
});

describe("attach-detach configuration", () => {
  const cases: { env: Record<string, string>; want: DetachPolicy | RegExp }[] = [
    { env: {}, want: { maxWaitForUnmountMs: 360_000, disableForceDetachOnTimeout: false } },
    {
      env: { ATTACH_DETACH_MAX_WAIT_FOR_UNMOUNT_SECONDS: "30", DISABLE_FORCE_DETACH_ON_TIMEOUT: "true" },
      want: { maxWaitForUnmountMs: 30_000, disableForceDetachOnTimeout: true },
    },
    {
      env: { ATTACH_DETACH_MAX_WAIT_FOR_UNMOUNT_SECONDS: "6m" },
      want: /ATTACH_DETACH_MAX_WAIT_FOR_UNMOUNT_SECONDS must be an integer/,
    },
    { env: { ATTACH_DETACH_MAX_WAIT_FOR_UNMOUNT_SECONDS: "-1" }, want: /from 0 to/ },
    {
      env: { DISABLE_FORCE_DETACH_ON_TIMEOUT: "yes" },
      want: /DISABLE_FORCE_DETACH_ON_TIMEOUT must be true or false/,
    },
  ];
  for (const c of cases) {
    it(`${JSON.stringify(c.env)}`, () => {
      if (c.want instanceof RegExp) assert.throws(() => detachPolicyFromEnv(c.env), c.want);
      else assert.deepEqual(detachPolicyFromEnv(c.env), c.want);
    });
  }

  it("a bad value stops the process at start with the variable named", async () => {
    await assert.rejects(
      startFunctionProcess("attach-detach", {
        KUBECONFIG: sandbox.kubeconfigPath,
        DISABLE_FORCE_DETACH_ON_TIMEOUT: "maybe",
      }),
      /DISABLE_FORCE_DETACH_ON_TIMEOUT must be true or false, got "maybe"/,
    );
  });
});
