// The knobs of a CSI function through its real entry (functions/attacher
// main.ts build(env)) over the sandbox API server and CSI driver:
// CSI_TIMEOUT_SECONDS bounds each CSI call (a slower one fails with
// DeadlineExceeded, which is not final: the error is recorded, the attachment
// backs off and the same publish is tried again), RETRY_INTERVAL_START_SECONDS
// sets the retry-after written, WORKERS bounds the publishes in flight.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import request from "supertest";
import { build } from "../../functions/attacher/main.ts";
import type { BuiltFunction } from "../../functions/built-function.ts";
import { annAttachFailures, annAttachRetryAfter } from "../../shared/attacher/constants.ts";
import { CsiClient } from "../../shared/csi/client.ts";
import { connectDriver } from "../../shared/csi/connect-driver.ts";
import { classifyCsiError, GrpcCode, grpcCodeOf, isFinalCsiError } from "../../shared/csi/errors.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { persistentVolumes, volumeAttachments } from "../../shared/kube/resources.ts";
import type { PersistentVolume, VolumeAttachment } from "../../shared/kube/types.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";

const driverName = "hostpath.csi.k8s.io";
const node = "sandbox-node";

let sandbox: TestSandbox;
let kube: KubeJsonClient;
let csi: CsiClient;

before(async () => {
  process.env.LOG_LEVEL = "silent";
  sandbox = await startTestSandbox();
  kube = new KubeJsonClient(sandbox.kubeConfig);
  csi = await CsiClient.connect({ endpoint: sandbox.csiEndpoint, timeoutMs: 5000 });
});
after(async () => {
  csi.close();
  await kube.close();
  await sandbox.close();
});
beforeEach(async () => {
  await sandbox.admin.reset();
  await sandbox.csi.clearFaults();
});

function envWith(extra: Record<string, string>): Record<string, string> {
  return { KUBECONFIG: sandbox.kubeconfigPath, CSI_ENDPOINT: sandbox.csiEndpoint, ...extra };
}

async function withAttacher<T>(
  env: Record<string, string>,
  work: (fn: BuiltFunction) => Promise<T>,
): Promise<T> {
  const fn = await build(envWith(env));
  try {
    return await work(fn);
  } finally {
    await fn.close();
  }
}

/** A backing volume, its PV and a VolumeAttachment for it. */
async function attachmentFor(name: string): Promise<VolumeAttachment> {
  const created = await csi.createVolume({
    name,
    capacityRange: { requiredBytes: 1n << 30n },
    volumeCapabilities: [{ mount: { fsType: "ext4" }, accessMode: { mode: "SINGLE_NODE_WRITER" } }],
  });
  await kube.create<PersistentVolume>(persistentVolumes, {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name },
    spec: {
      capacity: { storage: "1Gi" },
      accessModes: ["ReadWriteOnce"],
      csi: { driver: driverName, volumeHandle: created.volume!.volumeId, fsType: "ext4" },
    },
  });
  return kube.create<VolumeAttachment>(volumeAttachments, {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name: `va-${name}` },
    spec: { attacher: driverName, nodeName: node, source: { persistentVolumeName: name } },
  });
}

function post(fn: BuiltFunction, va: VolumeAttachment) {
  return request(fn.app)
    .post("/")
    .set("content-type", "application/json")
    .send(JSON.stringify({ type: "MODIFIED", object: va }));
}

describe("CSI_TIMEOUT_SECONDS and RETRY_INTERVAL_START_SECONDS on the attacher", () => {
  test("a publish slower than the timeout fails DeadlineExceeded, backs off by the interval set, then attaches", async () => {
    await withAttacher({ CSI_TIMEOUT_SECONDS: "1", RETRY_INTERVAL_START_SECONDS: "3" }, async (fn) => {
      const va = await attachmentFor("slow");
      // Far slower than the deadline, so the answer's own writes cannot blur which one ended the call.
      await sandbox.csi.setFaults({ latencyMs: 4000, methods: ["ControllerPublishVolume"] });
      const sent = Date.now();
      const first = await post(fn, va);
      const answered = Date.now();
      assert.equal(first.status, 503, JSON.stringify(first.body));
      assert.ok(
        answered - sent < 3000,
        `answered after ${answered - sent} ms: the 1 s deadline cut the call`,
      );

      const failed = await kube.get<VolumeAttachment>(volumeAttachments, "va-slow");
      assert.equal(failed.status?.attached, false);
      assert.match(failed.status?.attachError?.message ?? "", /DeadlineExceeded/);
      assert.equal(failed.metadata.annotations?.[annAttachFailures], "1");
      const retryAfter = Date.parse(failed.metadata.annotations?.[annAttachRetryAfter] ?? "");
      // 3 s after the failure (rounded up to the second); upstream's 1 s would be sooner.
      assert.ok(retryAfter >= sent + 3000, `retry after ${retryAfter - sent} ms`);
      assert.ok(retryAfter <= answered + 4000, `retry after ${retryAfter - sent} ms`);

      // Not final: once the backoff is over the same publish runs again and succeeds.
      await sandbox.csi.clearFaults();
      await sleep(Math.max(0, retryAfter - Date.now()) + 50);
      const again = await post(fn, failed);
      assert.equal(again.status, 200, JSON.stringify(again.body));
      const attached = await kube.get<VolumeAttachment>(volumeAttachments, "va-slow");
      assert.equal(attached.status?.attached, true);
      assert.equal(attached.metadata.annotations?.[annAttachRetryAfter], undefined, "backoff cleared");
    });
  });

  test("the deadline comes from the environment and its error is 'in progress' for the provisioner too", async () => {
    const { csi: client } = await connectDriver({
      env: { CSI_ENDPOINT: sandbox.csiEndpoint, CSI_TIMEOUT_SECONDS: "1" },
      defaultTimeoutSeconds: 10,
    });
    try {
      assert.equal(client.timeoutMs, 1000);
      await sandbox.csi.setFaults({ latencyMs: 1500, methods: ["CreateVolume"] });
      const err = await client
        .createVolume({
          name: "slow-create",
          capacityRange: { requiredBytes: 1n << 20n },
          volumeCapabilities: [{ mount: { fsType: "ext4" }, accessMode: { mode: "SINGLE_NODE_WRITER" } }],
        })
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      assert.equal(grpcCodeOf(err), GrpcCode.DEADLINE_EXCEEDED);
      assert.equal(classifyCsiError(err), "in-progress");
      assert.equal(isFinalCsiError(err), false);
    } finally {
      client.close();
    }
  });

  test("the attacher's default deadline is upstream's 15 s", async () => {
    const { csi: client } = await connectDriver({
      env: { CSI_ENDPOINT: sandbox.csiEndpoint },
      defaultTimeoutSeconds: 15,
    });
    client.close();
    assert.equal(client.timeoutMs, 15_000);
  });
});

describe("WORKERS on the attacher", () => {
  /** Milliseconds until two publishes posted at once have both answered. */
  async function twoAtOnce(workers: string): Promise<number> {
    return withAttacher({ WORKERS: workers }, async (fn) => {
      const a = await attachmentFor(`w${workers}-a`);
      const b = await attachmentFor(`w${workers}-b`);
      await sandbox.csi.setFaults({ latencyMs: 1000, methods: ["ControllerPublishVolume"] });
      const start = Date.now();
      const answers = await Promise.all([post(fn, a), post(fn, b)]);
      const ms = Date.now() - start;
      for (const r of answers) assert.equal(r.status, 200, JSON.stringify(r.body));
      return ms;
    });
  }

  test("1: the second publish waits for the first; 2: they run together", async () => {
    const one = await twoAtOnce("1");
    assert.ok(one >= 2000, `WORKERS=1 took ${one} ms for two 1 s publishes`);
    await sandbox.admin.reset();
    const two = await twoAtOnce("2");
    assert.ok(two < 2000, `WORKERS=2 took ${two} ms for two 1 s publishes`);
  });
});

describe("ATTACHER_PV_CACHE and ATTACHER_CSINODE_CACHE on the attacher", () => {
  test("with a driver that publishes, both copies are listed at start, before any attach", async () => {
    await sandbox.admin.resetCounters();
    await withAttacher({}, async () => {
      const deadline = Date.now() + 5000;
      let counters: Record<string, number> = {};
      while (Date.now() < deadline) {
        counters = await sandbox.admin.counters();
        if (counters["list persistentvolumes"] && counters["list csinodes"]) break;
        await sleep(20);
      }
      assert.ok(counters["list persistentvolumes"], JSON.stringify(counters));
      assert.ok(counters["list csinodes"], JSON.stringify(counters));
    });
  });

  test("turned off, neither is listed", async () => {
    await sandbox.admin.resetCounters();
    await withAttacher({ ATTACHER_PV_CACHE: "false", ATTACHER_CSINODE_CACHE: "false" }, async () => {
      await sleep(300);
      const counters = await sandbox.admin.counters();
      assert.equal(counters["list persistentvolumes"] ?? 0, 0, JSON.stringify(counters));
      assert.equal(counters["list csinodes"] ?? 0, 0, JSON.stringify(counters));
    });
  });
});
