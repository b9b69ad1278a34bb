import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, beforeEach, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { CsiClient } from "../../shared/csi/client.ts";
import { CsiError, classifyCsiError, GrpcCode, isFinalCsiError } from "../../shared/csi/errors.ts";
import { CSI_OPERATION_BUCKETS, CSI_OPERATIONS_METRIC } from "../../shared/csi/metrics.ts";
import type { CreateVolumeRequest } from "../../shared/csi/types.ts";
import { classifyError } from "../../shared/http/errors.ts";
import { createMetricsRegistry, type Registry } from "../../shared/metrics.ts";
import { rejection } from "../helpers/rejection.ts";
import { FAKE_DRIVER_NAME, type FakeDriver, StatusError, startFakeDriver } from "./fake-driver.ts";

let driver: FakeDriver;

before(async () => {
  driver = await startFakeDriver();
});

after(async () => {
  await driver.close();
});

beforeEach(() => driver.reset());

function quietRegistry(): Registry {
  return createMetricsRegistry({ defaultMetrics: false });
}

/** A client on the shared fake driver, closed by the test's cleanup. */
function clientFor(
  t: { after(fn: () => void): void },
  target: FakeDriver,
  options: Partial<ConstructorParameters<typeof CsiClient>[0]> = {},
) {
  const client = new CsiClient({ endpoint: target.endpoint, registry: quietRegistry(), ...options });
  t.after(() => client.close());
  return client;
}

const BIG = 2n ** 53n + 1n; // not representable as a JS number

test("CreateVolume with every field survives the wire, int64 above 2^53 included", async (t) => {
  const client = clientFor(t, driver);
  driver.handle("CreateVolume", () => ({
    volume: {
      capacity_bytes: (BIG + 2n).toString(),
      volume_id: "vol-42",
      volume_context: { tier: "gold", "storage.kubernetes.io/csiProvisionerIdentity": "id-1" },
      content_source: { snapshot: { snapshot_id: "snap-7" } },
      accessible_topology: [{ segments: { "topology.example.com/zone": "a" } }],
    },
  }));
  const request: CreateVolumeRequest = {
    name: "pvc-0b5f3c1e",
    capacityRange: { requiredBytes: BIG, limitBytes: 2n ** 62n },
    volumeCapabilities: [
      {
        mount: { fsType: "ext4", mountFlags: ["noatime", "discard"], volumeMountGroup: "1000" },
        accessMode: { mode: "SINGLE_NODE_WRITER" },
      },
      { block: {}, accessMode: { mode: "MULTI_NODE_MULTI_WRITER" } },
    ],
    parameters: { type: "fast", "csi.storage.k8s.io/pvc/name": "data" },
    secrets: { password: "hunter2" },
    volumeContentSource: { snapshot: { snapshotId: "snap-7" } },
    accessibilityRequirements: {
      requisite: [
        { segments: { "topology.example.com/zone": "a" } },
        { segments: { "topology.example.com/zone": "b" } },
      ],
      preferred: [{ segments: { "topology.example.com/zone": "b" } }],
    },
    mutableParameters: { iops: "3000" },
  };

  const response = await client.createVolume(request);

  const seen = driver.requests("CreateVolume").at(-1);
  assert.deepEqual(seen, {
    name: "pvc-0b5f3c1e",
    capacity_range: { required_bytes: "9007199254740993", limit_bytes: "4611686018427387904" },
    volume_capabilities: [
      {
        mount: { fs_type: "ext4", mount_flags: ["noatime", "discard"], volume_mount_group: "1000" },
        access_mode: { mode: "SINGLE_NODE_WRITER" },
        access_type: "mount",
      },
      { block: {}, access_mode: { mode: "MULTI_NODE_MULTI_WRITER" }, access_type: "block" },
    ],
    parameters: { type: "fast", "csi.storage.k8s.io/pvc/name": "data" },
    secrets: { password: "hunter2" },
    volume_content_source: { snapshot: { snapshot_id: "snap-7" }, type: "snapshot" },
    accessibility_requirements: {
      requisite: [
        { segments: { "topology.example.com/zone": "a" } },
        { segments: { "topology.example.com/zone": "b" } },
      ],
      preferred: [{ segments: { "topology.example.com/zone": "b" } }],
    },
    mutable_parameters: { iops: "3000" },
  });
  assert.deepEqual(response, {
    volume: {
      capacityBytes: 9007199254740995n,
      volumeId: "vol-42",
      volumeContext: { tier: "gold", "storage.kubernetes.io/csiProvisionerIdentity": "id-1" },
      contentSource: { snapshot: { snapshotId: "snap-7" }, type: "snapshot" },
      accessibleTopology: [{ segments: { "topology.example.com/zone": "a" } }],
    },
  });
});

test("a minimal CreateVolume: absent fields stay absent, decoded defaults are filled", async (t) => {
  const client = clientFor(t, driver);
  driver.handle("CreateVolume", () => ({ volume: { volume_id: "vol-min" } }));
  const response = await client.createVolume({
    name: "pvc-min",
    volumeCapabilities: [{ mount: {}, accessMode: { mode: "SINGLE_NODE_WRITER" } }],
    volumeContentSource: { volume: { volumeId: "vol-src" } },
  });
  const seen = driver.requests("CreateVolume").at(-1);
  assert.equal(seen?.capacity_range, undefined);
  assert.equal(seen?.secrets, undefined);
  assert.deepEqual(seen?.volume_content_source, { volume: { volume_id: "vol-src" }, type: "volume" });
  assert.deepEqual(response, {
    volume: { capacityBytes: 0n, volumeId: "vol-min", volumeContext: {}, accessibleTopology: [] },
  });
  assert.equal("contentSource" in (response.volume ?? {}), false);
});

test("other calls round trip: publish, unpublish, delete, list, capacity, snapshot, expand, node info", async (t) => {
  const client = clientFor(t, driver);
  driver.handle("ListVolumes", (request) => ({
    entries: [
      {
        volume: { volume_id: "vol-1", capacity_bytes: "5" },
        status: { published_node_ids: ["node-a", "node-b"] },
      },
    ],
    next_token: request.starting_token === "p2" ? "" : "p2",
  }));
  driver.handle("GetCapacity", () => ({
    available_capacity: (2n ** 60n).toString(),
    maximum_volume_size: { value: "1099511627776" },
  }));
  driver.handle("CreateSnapshot", (request) => ({
    snapshot: {
      size_bytes: "1024",
      snapshot_id: `snap-${String(request.name)}`,
      source_volume_id: String(request.source_volume_id),
      creation_time: { seconds: "1700000000", nanos: 5 },
      ready_to_use: true,
    },
  }));
  driver.handle("ControllerExpandVolume", (request) => ({
    capacity_bytes: (request.capacity_range as { required_bytes: string }).required_bytes,
    node_expansion_required: true,
  }));

  const published = await client.controllerPublishVolume({
    volumeId: "vol-1",
    nodeId: "node-a",
    volumeCapability: { mount: { fsType: "xfs" }, accessMode: { mode: "SINGLE_NODE_WRITER" } },
    readonly: true,
    secrets: { token: "s3cr3t" },
    volumeContext: { tier: "gold" },
  });
  assert.deepEqual(published, { publishContext: { devicePath: "/dev/fake0" } });
  assert.deepEqual(driver.requests("ControllerPublishVolume").at(-1), {
    volume_id: "vol-1",
    node_id: "node-a",
    volume_capability: {
      mount: { fs_type: "xfs" },
      access_mode: { mode: "SINGLE_NODE_WRITER" },
      access_type: "mount",
    },
    readonly: true,
    secrets: { token: "s3cr3t" },
    volume_context: { tier: "gold" },
  });

  assert.deepEqual(await client.controllerUnpublishVolume({ volumeId: "vol-1", nodeId: "node-a" }), {});
  assert.deepEqual(await client.deleteVolume({ volumeId: "vol-1", secrets: { a: "b" } }), {});
  assert.deepEqual(driver.requests("DeleteVolume").at(-1), { volume_id: "vol-1", secrets: { a: "b" } });

  const page1 = await client.listVolumes({ maxEntries: 1 });
  assert.deepEqual(page1, {
    entries: [
      {
        volume: { volumeId: "vol-1", capacityBytes: 5n, volumeContext: {}, accessibleTopology: [] },
        status: { publishedNodeIds: ["node-a", "node-b"] },
      },
    ],
    nextToken: "p2",
  });
  assert.equal((await client.listVolumes({ startingToken: page1.nextToken })).nextToken, "");
  assert.deepEqual(driver.requests("ListVolumes")[0], { max_entries: 1 });

  assert.deepEqual(await client.getCapacity({ parameters: { type: "fast" } }), {
    availableCapacity: 2n ** 60n,
    maximumVolumeSize: { value: 1099511627776n },
  });

  assert.deepEqual(await client.createSnapshot({ sourceVolumeId: "vol-1", name: "s1" }), {
    snapshot: {
      sizeBytes: 1024n,
      snapshotId: "snap-s1",
      sourceVolumeId: "vol-1",
      creationTime: { seconds: 1700000000n, nanos: 5 },
      readyToUse: true,
      groupSnapshotId: "",
    },
  });

  assert.deepEqual(
    await client.controllerExpandVolume({ volumeId: "vol-1", capacityRange: { requiredBytes: BIG } }),
    { capacityBytes: BIG, nodeExpansionRequired: true },
  );

  assert.deepEqual(await client.nodeGetInfo(), { nodeId: "node-1", maxVolumesPerNode: 0n });
});

test("a slow driver hits the deadline: DeadlineExceeded, in progress, answered 503", async (t) => {
  const client = clientFor(t, driver, { timeoutMs: 150 });
  driver.delay("DeleteVolume", 1_500);
  const started = Date.now();
  const err = await rejection(client.deleteVolume({ volumeId: "vol-slow" }));
  assert.ok(Date.now() - started < 1_200, "the client did not wait for the driver");
  assert.ok(err instanceof CsiError);
  assert.equal(err.code, GrpcCode.DEADLINE_EXCEEDED);
  assert.equal(err.codeName, "DeadlineExceeded");
  assert.equal(err.method, "/csi.v1.Controller/DeleteVolume");
  assert.match(err.message, /^rpc error: code = DeadlineExceeded desc = /);
  assert.equal(classifyCsiError(err), "in-progress");
  assert.equal(isFinalCsiError(err), false);
  assert.equal(classifyError(err).status, 503);

  // The per-call deadline overrides the client's.
  const patient = clientFor(t, driver, { timeoutMs: 60_000 });
  const err2 = await rejection(patient.deleteVolume({ volumeId: "vol-slow" }, { timeoutMs: 100 }));
  assert.ok(err2 instanceof CsiError);
  assert.equal(err2.code, GrpcCode.DEADLINE_EXCEEDED);
});

test("an AbortSignal cancels the call: Canceled, in progress", async (t) => {
  const client = clientFor(t, driver);
  driver.delay("ControllerUnpublishVolume", 1_000);
  const controller = new AbortController();
  const pending = client.controllerUnpublishVolume(
    { volumeId: "v", nodeId: "n" },
    { signal: controller.signal },
  );
  await sleep(50);
  controller.abort();
  const err = await rejection(pending);
  assert.ok(err instanceof CsiError);
  assert.equal(err.code, GrpcCode.CANCELLED);
  assert.equal(classifyCsiError(err), "in-progress");

  const already = await rejection(client.deleteVolume({ volumeId: "v" }, { signal: AbortSignal.abort() }));
  assert.ok(already instanceof CsiError);
  assert.equal(already.code, GrpcCode.CANCELLED);
});

test("driver status codes arrive as CsiError with code, details and metadata", async (t) => {
  const client = clientFor(t, driver);
  const trailers = new (await import("@grpc/grpc-js")).Metadata();
  trailers.set("x-fake-reason", "no-space");
  driver.handle("CreateVolume", (request) => {
    if (request.name === "exhausted")
      throw new StatusError(GrpcCode.RESOURCE_EXHAUSTED, "zone a is full", trailers);
    if (request.name === "bad") throw new StatusError(GrpcCode.INVALID_ARGUMENT, "unknown parameter foo");
    throw new StatusError(GrpcCode.ALREADY_EXISTS, "volume exists with another size");
  });
  const caps = [{ mount: {}, accessMode: { mode: "SINGLE_NODE_WRITER" as const } }];

  const exhausted = await rejection(client.createVolume({ name: "exhausted", volumeCapabilities: caps }));
  assert.ok(exhausted instanceof CsiError);
  assert.equal(exhausted.code, GrpcCode.RESOURCE_EXHAUSTED);
  assert.equal(exhausted.details, "zone a is full");
  assert.deepEqual(exhausted.metadata.get("x-fake-reason"), ["no-space"]);
  assert.equal(classifyCsiError(exhausted, { nodeSelected: true }), "reschedule");
  assert.equal(classifyCsiError(exhausted, { nodeSelected: false }), "final");

  const bad = await rejection(client.createVolume({ name: "bad", volumeCapabilities: caps }));
  assert.equal(classifyCsiError(bad), "infeasible");
  assert.equal(classifyError(bad).status, 500);

  const exists = await rejection(client.createVolume({ name: "other", volumeCapabilities: caps }));
  assert.ok(exists instanceof CsiError);
  assert.equal(exists.message, "rpc error: code = AlreadyExists desc = volume exists with another size");
  assert.equal(isFinalCsiError(exists), true);
});

test("capabilities are fetched once per client, concurrent callers share the fetch", async (t) => {
  const target = await startFakeDriver();
  t.after(() => target.close());
  const client = clientFor(t, target);
  const [a, b, c] = await Promise.all([client.capabilities(), client.capabilities(), client.capabilities()]);
  assert.equal(a, b);
  assert.equal(b, c);
  await client.capabilities();
  assert.equal(target.calls("GetPluginCapabilities"), 1);
  assert.equal(target.calls("ControllerGetCapabilities"), 1);
  assert.equal(a.controllerService, true);
  assert.equal(a.accessibilityConstraints, true);
  assert.equal(a.onlineExpansion, true);
  assert.equal(a.createDeleteVolume, true);
  assert.equal(a.publishUnpublishVolume, true);
  assert.equal(a.listVolumes, true);
  assert.equal(a.expandVolume, true);
  assert.equal(a.publishReadonly, false);
  assert.equal(a.listVolumesPublishedNodes, false);
  assert.equal(a.singleNodeMultiWriter, false);
  assert.equal(a.cloneVolume, false);

  // A second client asks again: the cache is per client.
  await clientFor(t, target).capabilities();
  assert.equal(target.calls("GetPluginCapabilities"), 2);
});

test("a failed capability fetch is not cached", async (t) => {
  const target = await startFakeDriver();
  t.after(() => target.close());
  let failures = 1;
  target.handle("GetPluginCapabilities", () => {
    if (failures-- > 0) throw new StatusError(GrpcCode.UNAVAILABLE, "starting");
    return { capabilities: [{ service: { type: "CONTROLLER_SERVICE" } }] };
  });
  const client = clientFor(t, target);
  const err = await rejection(client.capabilities());
  assert.ok(err instanceof CsiError);
  assert.equal(err.code, GrpcCode.UNAVAILABLE);
  const caps = await client.capabilities();
  assert.equal(caps.controllerService, true);
  assert.equal(caps.createDeleteVolume, true);
  assert.equal(target.calls("GetPluginCapabilities"), 2);
});

test("a node-only driver is not asked for controller capabilities", async (t) => {
  const target = await startFakeDriver();
  t.after(() => target.close());
  target.handle("GetPluginCapabilities", () => ({ capabilities: [] }));
  const caps = await clientFor(t, target).capabilities();
  assert.equal(caps.controllerService, false);
  assert.equal(caps.createDeleteVolume, false);
  assert.equal(target.calls("ControllerGetCapabilities"), 0);
});

test("probe retries while the driver answers not ready, then returns", async (t) => {
  const target = await startFakeDriver();
  t.after(() => target.close());
  let notReady = 3;
  target.handle("Probe", () => (notReady-- > 0 ? { ready: { value: false } } : {}));
  const client = clientFor(t, target);
  await client.probe({ intervalMs: 20, readyTimeoutMs: 5_000 });
  assert.equal(target.calls("Probe"), 4, "three not-ready answers, then an absent `ready` (= ready)");
});

test("probe is bounded: a driver that never gets ready fails with UNAVAILABLE (503)", async (t) => {
  const target = await startFakeDriver();
  t.after(() => target.close());
  target.handle("Probe", () => ({ ready: { value: false } }));
  const client = clientFor(t, target);
  const started = Date.now();
  const err = await rejection(client.probe({ intervalMs: 30, readyTimeoutMs: 250 }));
  assert.ok(Date.now() - started < 2_000);
  assert.ok(err instanceof CsiError);
  assert.equal(err.code, GrpcCode.UNAVAILABLE);
  assert.match(err.details, /not ready after \d+ probes in 250 ms: the driver answered not ready/);
  assert.ok(target.calls("Probe") >= 3);
  assert.equal(classifyError(err).status, 503);
});

test("probe stops at once on an error that waiting will not fix", async (t) => {
  const target = await startFakeDriver();
  t.after(() => target.close());
  target.handle("Probe", () => {
    throw new StatusError(GrpcCode.FAILED_PRECONDITION, "misconfigured");
  });
  const err = await rejection(clientFor(t, target).probe({ intervalMs: 10, readyTimeoutMs: 5_000 }));
  assert.ok(err instanceof CsiError);
  assert.equal(err.code, GrpcCode.FAILED_PRECONDITION);
  assert.equal(target.calls("Probe"), 1);
});

test("probe waits for a driver whose socket appears later; connect() learns the driver name", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "csi-late-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const socketPath = join(dir, "csi.sock");
  let late: FakeDriver | undefined;
  t.after(() => late?.close());
  const starting = sleep(300).then(async () => {
    late = await startFakeDriver({ socketPath });
  });
  const registry = quietRegistry();
  const client = await CsiClient.connect({
    endpoint: `unix:${socketPath}`,
    registry,
    probe: { intervalMs: 50, readyTimeoutMs: 10_000 },
  });
  t.after(() => client.close());
  await starting;
  assert.equal(client.driverName, FAKE_DRIVER_NAME);
  assert.deepEqual(client.pluginInfo, {
    name: FAKE_DRIVER_NAME,
    vendorVersion: "0.0.1",
    manifest: { build: "test" },
  });
  assert.equal(late?.calls("Probe"), 1);
});

interface MetricValue {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

async function metricValues(registry: Registry): Promise<MetricValue[]> {
  const metric = registry.getSingleMetric(CSI_OPERATIONS_METRIC);
  assert.ok(metric, "metric registered");
  return (await metric.get()).values as MetricValue[];
}

test("every call is recorded in csi_sidecar_operations_seconds with upstream's labels and buckets", async (t) => {
  const registry = quietRegistry();
  const client = await CsiClient.connect({ endpoint: driver.endpoint, registry });
  t.after(() => client.close());
  driver.handle("DeleteVolume", () => {
    throw new StatusError(GrpcCode.NOT_FOUND, "no such volume");
  });
  await client.createVolume({ name: "m1", volumeCapabilities: [] });
  await client.createVolume({ name: "m2", volumeCapabilities: [] });
  await rejection(client.deleteVolume({ volumeId: "gone" }));

  const values = await metricValues(registry);
  const count = (method: string, code: string, driverName: string = FAKE_DRIVER_NAME) =>
    values.find(
      (v) =>
        v.metricName === `${CSI_OPERATIONS_METRIC}_count` &&
        v.labels.method_name === method &&
        v.labels.grpc_status_code === code &&
        v.labels.driver_name === driverName,
    )?.value;
  assert.equal(count("/csi.v1.Controller/CreateVolume", "OK"), 2);
  assert.equal(count("/csi.v1.Controller/DeleteVolume", "NotFound"), 1);
  // Before GetPluginInfo answered, the driver name is not known yet (upstream: "").
  assert.equal(count("/csi.v1.Identity/Probe", "OK", ""), 1);
  assert.equal(count("/csi.v1.Identity/GetPluginInfo", "OK", ""), 1);

  const buckets = values
    .filter(
      (v) =>
        v.metricName === `${CSI_OPERATIONS_METRIC}_bucket` &&
        v.labels.method_name === "/csi.v1.Controller/CreateVolume",
    )
    .map((v) => v.labels.le);
  assert.deepEqual(buckets, [...CSI_OPERATION_BUCKETS, "+Inf"]);

  const text = await registry.metrics();
  assert.match(
    text,
    /csi_sidecar_operations_seconds_count\{driver_name="fake\.csi\.example\.com",method_name="\/csi\.v1\.Controller\/CreateVolume",grpc_status_code="OK"\} 2/,
  );
});

test("a configured driver name labels calls from the start", async (t) => {
  const registry = quietRegistry();
  const client = clientFor(t, driver, { registry, driverName: "configured.example.com" });
  await client.probeOnce();
  const probe = (await metricValues(registry)).find(
    (v) =>
      v.metricName === `${CSI_OPERATIONS_METRIC}_count` && v.labels.method_name === "/csi.v1.Identity/Probe",
  );
  assert.equal(probe?.labels.driver_name, "configured.example.com");
});

test("debug logs carry requests and errors, never secret values", async (t) => {
  const lines: object[] = [];
  const logger = { debug: (fields: object, message: string) => lines.push({ ...fields, message }) };
  const client = clientFor(t, driver, { logger });
  driver.handle("ControllerPublishVolume", (request) => {
    throw new StatusError(GrpcCode.INTERNAL, `could not attach ${String(request.volume_id)}`);
  });
  await client.createVolume({
    name: "with-secret",
    capacityRange: { requiredBytes: 1n },
    volumeCapabilities: [],
    secrets: { password: "hunter2", token: "tok-123" },
  });
  await rejection(
    client.controllerPublishVolume({ volumeId: "v1", nodeId: "n1", secrets: { password: "hunter2" } }),
  );
  const logged = JSON.stringify(lines, (_key, value) =>
    typeof value === "bigint" ? value.toString() : value,
  );
  assert.ok(lines.length >= 4);
  assert.doesNotMatch(logged, /hunter2|tok-123/);
  assert.match(logged, /"password":"\*\*\*stripped\*\*\*"/);
  assert.match(logged, /could not attach v1/);
  // The driver still received the secrets.
  assert.deepEqual(driver.requests("CreateVolume").at(-1)?.secrets, {
    password: "hunter2",
    token: "tok-123",
  });
});

test("TCP endpoints work too (host:port)", async (t) => {
  const { Server, ServerCredentials } = await import("@grpc/grpc-js");
  const { csiServiceDefinition } = await import("../../shared/csi/proto.ts");
  const server = new Server();
  server.addService(csiServiceDefinition("Identity"), {
    GetPluginInfo: (_call: unknown, callback: (err: null, value: object) => void) =>
      callback(null, { name: "tcp.example.com", vendorVersion: "1" }),
    GetPluginCapabilities: (_call: unknown, callback: (err: null, value: object) => void) =>
      callback(null, {}),
    Probe: (_call: unknown, callback: (err: null, value: object) => void) => callback(null, {}),
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", ServerCredentials.createInsecure(), (err, bound) =>
      err ? reject(err) : resolve(bound),
    ),
  );
  t.after(() => server.forceShutdown());
  const client = clientFor(t, driver, { endpoint: `127.0.0.1:${port}` });
  assert.equal((await client.getPluginInfo()).name, "tcp.example.com");
  assert.equal(await client.probeOnce(), true);
});

test("a closed client rejects calls instead of hanging", async (t) => {
  const client = clientFor(t, driver);
  client.close();
  const err = await rejection(client.probeOnce());
  assert.ok(err instanceof Error);
  assert.equal(classifyCsiError(err), "in-progress");
});

test("bad deadlines are refused: at construction by throwing, per call by rejecting", async (t) => {
  assert.throws(() => new CsiClient({ endpoint: driver.endpoint, timeoutMs: 0 }), RangeError);
  const client = clientFor(t, driver);
  const err = await rejection(client.probeOnce({ timeoutMs: Number.NaN }));
  assert.ok(err instanceof RangeError);
});
