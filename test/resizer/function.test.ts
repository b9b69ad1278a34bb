// The resizer function over real HTTP against the sandbox API server and a CSI
// driver over real gRPC (test/csi/fake-driver.ts, whose answers each case
// sets): a claim grown 1Gi → 2Gi ends with the PV and the claim at 2Gi; an
// infeasible size recovers once the request is lowered; a transient error
// writes nothing and is retried after its backoff; a sync stopped after its
// first rounds is finished by a fresh controller; a VolumeAttributesClass
// change is applied and an infeasible one rolled back.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import { KubeConfig } from "@kubernetes/client-node";
import request from "supertest";
import { createResizerApp } from "../../functions/resizer/app.ts";
import { type ApiServerHandle, startApiServer } from "../../sandbox/apiserver/server.ts";
import { sandboxKubeconfig } from "../../sandbox/kubeconfig.ts";
import { CsiClient } from "../../shared/csi/client.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import {
  events,
  persistentVolumeClaims,
  persistentVolumes,
  storageClasses,
  volumeAttributesClasses,
} from "../../shared/kube/resources.ts";
import type {
  KubeEvent,
  KubeObject,
  PersistentVolume,
  PersistentVolumeClaim,
  StorageClass,
  VolumeAttributesClass,
} from "../../shared/kube/types.ts";
import { annNodeExpansionNotRequired } from "../../shared/kube/well-known.ts";
import { createLogger } from "../../shared/log.ts";
import { createMetricsRegistry, processMetrics, type Registry } from "../../shared/metrics.ts";
import { annExpandRetryAfter } from "../../shared/resizer/constants.ts";
import {
  ResizerController,
  type ResizerControllerOptions,
  readAbilities,
} from "../../shared/resizer/runtime/resizer-controller.ts";
import type { DriverAbilities } from "../../shared/resizer/steps.ts";
import {
  FAKE_DRIVER_NAME,
  type FakeDriver,
  StatusError,
  startFakeDriver,
  type WireMessage,
} from "../csi/fake-driver.ts";

const GiB = 1n << 30n;

let api: ApiServerHandle;
let kube: KubeJsonClient;
let driver: FakeDriver;
let csi: CsiClient;
let abilities: DriverAbilities;
let registry: Registry;
let clock: Date;

/** Volumes as the fake driver holds them: id → bytes, class parameters. */
let sizes: Map<string, bigint>;
let parameters: Map<string, Record<string, string>>;

function installDriver(options: { nodeExpansionRequired?: boolean; maxBytes?: bigint } = {}): void {
  driver.reset();
  driver.handle("GetPluginCapabilities", () => ({
    capabilities: [{ service: { type: "CONTROLLER_SERVICE" } }, { volume_expansion: { type: "ONLINE" } }],
  }));
  driver.handle("ControllerGetCapabilities", () => ({
    capabilities: ["CREATE_DELETE_VOLUME", "EXPAND_VOLUME", "MODIFY_VOLUME"].map((type) => ({
      rpc: { type },
    })),
  }));
  driver.handle("NodeGetCapabilities", () => ({ capabilities: [{ rpc: { type: "EXPAND_VOLUME" } }] }));
  driver.handle("ControllerExpandVolume", (req: WireMessage) => {
    const id = String(req.volume_id);
    const wanted = BigInt(String((req.capacity_range as WireMessage).required_bytes));
    if (options.maxBytes !== undefined && wanted > options.maxBytes)
      throw new StatusError(11, `${wanted} bytes is more than this driver can give`);
    // Idempotent, never shrinking, as CSI asks.
    const size = (sizes.get(id) ?? GiB) > wanted ? (sizes.get(id) ?? GiB) : wanted;
    sizes.set(id, size);
    return { capacity_bytes: String(size), node_expansion_required: options.nodeExpansionRequired ?? false };
  });
  driver.handle("ControllerModifyVolume", (req: WireMessage) => {
    const params = (req.mutable_parameters ?? {}) as Record<string, string>;
    if (params.iops !== undefined && Number(params.iops) > 5000)
      throw new StatusError(3, `iops ${params.iops} is above 5000`);
    parameters.set(String(req.volume_id), params);
    return {};
  });
}

function controller(extra: Partial<ResizerControllerOptions> = {}): ResizerController {
  return new ResizerController({
    kube,
    csi,
    driverName: FAKE_DRIVER_NAME,
    abilities,
    now: () => clock,
    ...extra,
  });
}

function appOf(c: ResizerController) {
  return createResizerApp({
    controller: c,
    csi,
    logger: createLogger({ name: "resizer", level: "silent" }),
    metrics: registry,
  });
}

before(async () => {
  api = await startApiServer();
  const kc = new KubeConfig();
  kc.loadFromString(sandboxKubeconfig(api.url));
  kube = new KubeJsonClient(kc);
  driver = await startFakeDriver();
  installDriver();
  csi = await CsiClient.connect({ endpoint: driver.endpoint, timeoutMs: 2000 });
  abilities = await readAbilities(csi);
});
after(async () => {
  csi.close();
  await driver.close();
  await kube.close();
  await api.close();
});
beforeEach(async () => {
  await fetch(`${api.url}/_sandbox/reset`, { method: "POST" });
  installDriver();
  sizes = new Map();
  parameters = new Map();
  registry = createMetricsRegistry({ defaultMetrics: false });
  clock = new Date();
  await kube.create<StorageClass>(storageClasses, {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: { name: "fast" },
    provisioner: FAKE_DRIVER_NAME,
    allowVolumeExpansion: true,
  });
});

/** A Bound claim of `size` and its PV of our driver. */
async function boundClaim(name: string, size = "1Gi", vac?: string): Promise<PersistentVolumeClaim> {
  const created = await kube.create<PersistentVolumeClaim>(persistentVolumeClaims, {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace: "default" },
    spec: {
      accessModes: ["ReadWriteOnce"],
      storageClassName: "fast",
      resources: { requests: { storage: size } },
      volumeName: `pv-${name}`,
      ...(vac ? { volumeAttributesClassName: vac } : {}),
    },
  });
  await kube.create<PersistentVolume>(persistentVolumes, {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name: `pv-${name}` },
    spec: {
      capacity: { storage: size },
      accessModes: ["ReadWriteOnce"],
      storageClassName: "fast",
      claimRef: { namespace: "default", name, uid: created.metadata.uid },
      csi: { driver: FAKE_DRIVER_NAME, volumeHandle: `vol-${name}`, fsType: "ext4" },
      ...(vac ? { volumeAttributesClassName: vac } : {}),
    },
  });
  return kube.patch<PersistentVolumeClaim>(
    persistentVolumeClaims,
    name,
    "default",
    {
      status: {
        phase: "Bound",
        capacity: { storage: size },
        ...(vac ? { currentVolumeAttributesClassName: vac } : {}),
      },
    },
    "merge",
    { subresource: "status" },
  );
}

async function setRequest(name: string, size: string): Promise<PersistentVolumeClaim> {
  return kube.patch<PersistentVolumeClaim>(
    persistentVolumeClaims,
    name,
    "default",
    { spec: { resources: { requests: { storage: size } } } },
    "merge",
  );
}

async function setClass(name: string, vac: string): Promise<PersistentVolumeClaim> {
  return kube.patch<PersistentVolumeClaim>(
    persistentVolumeClaims,
    name,
    "default",
    { spec: { volumeAttributesClassName: vac } },
    "merge",
  );
}

const getClaim = (name: string) => kube.get<PersistentVolumeClaim>(persistentVolumeClaims, name, "default");
const getVolume = (name: string) => kube.get<PersistentVolume>(persistentVolumes, `pv-${name}`);

async function send(app: ReturnType<typeof appOf>, object: KubeObject) {
  const r = await request(app)
    .post("/")
    .set("content-type", "application/json")
    .send(JSON.stringify({ type: "MODIFIED", object }));
  const results = (r.body.results ?? []) as { synced?: { object: string; outcome: string }[] }[];
  return {
    status: r.status,
    retryAfter: r.headers["retry-after"] as string | undefined,
    body: r.body as Record<string, unknown>,
    outcomes: results.flatMap((x) => (x.synced ?? []).map((s) => `${s.object}: ${s.outcome}`)),
  };
}

/** The claim's Events as "type reason: message", with their source component checked. */
async function claimEvents(name: string): Promise<string[]> {
  const list = await kube.list<KubeEvent>(events, { namespace: "default" });
  const mine = list.items.filter((e) => e.involvedObject?.name === name);
  for (const e of mine)
    assert.equal(
      (e.source as { component?: string } | undefined)?.component,
      `external-resizer ${FAKE_DRIVER_NAME}`,
    );
  return mine.map((e) => `${e.type} ${e.reason}: ${e.message}`).sort();
}

function conditionTypes(c: PersistentVolumeClaim): string[] {
  return (c.status?.conditions ?? []).map((x) => String(x.type)).sort();
}

describe("resizer function: expansion", () => {
  it("reads the driver's abilities once: controller and node expansion, MODIFY_VOLUME", () => {
    assert.deepEqual(abilities, {
      controllerExpand: true,
      nodeExpand: true,
      modify: true,
      singleNodeMultiWriter: false,
    });
  });

  it("1Gi → 2Gi without node expansion: PV and claim at 2Gi, conditions cleared, annotation, Events", async () => {
    const app = appOf(controller());
    await boundClaim("grow");
    const grown = await setRequest("grow", "2Gi");
    const r = await send(app, grown);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.ok(r.outcomes.includes("claim default/grow: expanded to 2Gi"), r.outcomes.join("\n"));
    assert.equal((await getVolume("grow")).spec.capacity?.storage, "2Gi");
    const claim = await getClaim("grow");
    assert.equal(claim.status?.capacity?.storage, "2Gi");
    assert.equal(claim.status?.allocatedResources?.storage, "2Gi");
    assert.equal(claim.status?.allocatedResourceStatuses?.storage, undefined);
    assert.deepEqual(conditionTypes(claim), []);
    assert.equal(claim.metadata.annotations?.[annNodeExpansionNotRequired], "true");
    const req = driver.requests("ControllerExpandVolume").at(-1) as WireMessage;
    assert.equal(String((req.capacity_range as WireMessage).required_bytes), String(2n * GiB));
    assert.deepEqual(await claimEvents("grow"), [
      "Normal Resizing: External resizer is resizing volume pv-grow",
      "Normal VolumeResizeSuccessful: Resize volume succeeded",
    ]);
    // The call is timed in the sidecars' histogram, by full method and code.
    const histogram = await processMetrics().getSingleMetric("csi_sidecar_operations_seconds")?.get();
    assert.ok(
      histogram?.values.some(
        (v) =>
          v.labels.method_name === "/csi.v1.Controller/ControllerExpandVolume" &&
          v.labels.grpc_status_code === "OK" &&
          v.labels.driver_name === FAKE_DRIVER_NAME,
      ),
    );
    // A second event finds nothing to do, and calls nothing.
    const calls = driver.calls("ControllerExpandVolume");
    const again = await send(app, claim);
    assert.ok(
      again.outcomes.includes("claim default/grow: no expansion requested"),
      again.outcomes.join("\n"),
    );
    assert.equal(driver.calls("ControllerExpandVolume"), calls);
  });

  it("node expansion required: PV at 2Gi, claim NodeResizePending with FileSystemResizePending, capacity untouched", async () => {
    installDriver({ nodeExpansionRequired: true });
    const app = appOf(controller());
    await boundClaim("node");
    const r = await send(app, await setRequest("node", "2Gi"));
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal((await getVolume("node")).spec.capacity?.storage, "2Gi");
    const claim = await getClaim("node");
    assert.equal(claim.status?.capacity?.storage, "1Gi");
    assert.equal(claim.status?.allocatedResourceStatuses?.storage, "NodeResizePending");
    assert.deepEqual(conditionTypes(claim), ["FileSystemResizePending", "Resizing"]);
    assert.deepEqual(await claimEvents("node"), [
      "Normal FileSystemResizeRequired: Require file system resize of volume on node",
      "Normal Resizing: External resizer is resizing volume pv-node",
    ]);
    // The kubelet's turn: the resizer leaves it alone.
    const calls = driver.calls("ControllerExpandVolume");
    const again = await send(app, claim);
    assert.ok(
      again.outcomes.some((o) => o.includes("waiting for the node")),
      again.outcomes.join("\n"),
    );
    assert.equal(driver.calls("ControllerExpandVolume"), calls);
  });

  it("infeasible size: Infeasible + ControllerResizeError, no retry while backing off; lowered back, it recovers", async () => {
    installDriver({ maxBytes: 3n * GiB });
    const app = appOf(controller());
    await boundClaim("huge");
    const r = await send(app, await setRequest("huge", "10Gi"));
    assert.equal(r.status, 503, JSON.stringify(r.body));
    let claim = await getClaim("huge");
    assert.equal(claim.status?.allocatedResourceStatuses?.storage, "ControllerResizeInfeasible");
    assert.equal(claim.status?.allocatedResources?.storage, "10Gi");
    assert.ok(conditionTypes(claim).includes("ControllerResizeError"));
    assert.equal((await getVolume("huge")).spec.capacity?.storage, "1Gi");
    const events1 = await claimEvents("huge");
    assert.ok(
      events1.some((e) =>
        e.startsWith(
          `Warning VolumeResizeFailed: resize volume "pv-huge" by resizer "${FAKE_DRIVER_NAME}" failed: rpc error: code = OutOfRange desc =`,
        ),
      ),
      events1.join("\n"),
    );
    // A resync before the backoff ends calls nothing.
    const calls = driver.calls("ControllerExpandVolume");
    const resync = await request(app).post("/resync").expect(200);
    assert.deepEqual(resync.body.errors ?? [], []);
    assert.equal(driver.calls("ControllerExpandVolume"), calls);
    // Lowered to what the driver can do: the new request is the target at once.
    const lowered = await setRequest("huge", "2Gi");
    const ok = await send(app, lowered);
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    claim = await getClaim("huge");
    assert.equal(claim.status?.capacity?.storage, "2Gi");
    assert.equal(claim.status?.allocatedResources?.storage, "2Gi");
    assert.equal(claim.status?.allocatedResourceStatuses?.storage, undefined);
    assert.deepEqual(conditionTypes(claim), []);
    assert.equal(claim.metadata.annotations?.[annExpandRetryAfter], undefined);
    assert.equal((await getVolume("huge")).spec.capacity?.storage, "2Gi");
  });

  it("transient error: nothing written to status, backoff kept on the claim, retried once it is over", async () => {
    const app = appOf(controller());
    await boundClaim("flaky");
    driver.handle("ControllerExpandVolume", () => {
      throw new StatusError(14, "driver restarting");
    });
    const r = await send(app, await setRequest("flaky", "2Gi"));
    assert.equal(r.status, 503, JSON.stringify(r.body));
    assert.ok(r.retryAfter !== undefined);
    let claim = await getClaim("flaky");
    assert.equal(claim.status?.allocatedResourceStatuses?.storage, "ControllerResizeInProgress");
    assert.ok(!conditionTypes(claim).includes("ControllerResizeError"));
    assert.ok(claim.metadata.annotations?.[annExpandRetryAfter]);
    const calls = driver.calls("ControllerExpandVolume");
    const early = await send(app, claim);
    assert.equal(early.status, 200);
    assert.ok(
      early.outcomes.some((o) => o.includes("backing off until")),
      early.outcomes.join("\n"),
    );
    assert.equal(driver.calls("ControllerExpandVolume"), calls);
    // The driver is back and the backoff over.
    installDriver();
    clock = new Date(clock.getTime() + 5000);
    const later = await send(app, claim);
    assert.equal(later.status, 200, JSON.stringify(later.body));
    claim = await getClaim("flaky");
    assert.equal(claim.status?.capacity?.storage, "2Gi");
    assert.equal(claim.metadata.annotations?.[annExpandRetryAfter], undefined);
  });

  it("a sync stopped after the intent, or after the driver's answer, is finished by a fresh controller", async () => {
    for (const rounds of [1, 2]) {
      const name = `killed-${rounds}`;
      await boundClaim(name);
      const grown = await setRequest(name, "2Gi");
      await send(appOf(controller({ maxRounds: rounds })), grown);
      const halfway = await getClaim(name);
      assert.equal(halfway.status?.allocatedResourceStatuses?.storage, "ControllerResizeInProgress", name);
      assert.equal(halfway.status?.capacity?.storage, "1Gi", name);
      assert.equal((await getVolume(name)).spec.capacity?.storage, "1Gi", name);
      const r = await send(appOf(controller()), halfway);
      assert.equal(r.status, 200, JSON.stringify(r.body));
      const done = await getClaim(name);
      assert.equal(done.status?.capacity?.storage, "2Gi", name);
      assert.deepEqual(conditionTypes(done), [], name);
      assert.equal((await getVolume(name)).spec.capacity?.storage, "2Gi", name);
    }
  });

  it("a PV event names its claim; PVs of other drivers are not looked at", async () => {
    const app = appOf(controller());
    await boundClaim("via-pv");
    await setRequest("via-pv", "2Gi");
    const r = await send(app, await getVolume("via-pv"));
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal((await getClaim("via-pv")).status?.capacity?.storage, "2Gi");
    const other = await send(app, {
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: { name: "x" },
      spec: { csi: { driver: "other.csi", volumeHandle: "x" } },
    });
    assert.equal(other.status, 200);
    assert.ok(
      other.outcomes.some((o) => o.includes("not a volume of")),
      other.outcomes.join("\n"),
    );
  });
});

describe("resizer function: VolumeAttributesClass", () => {
  async function vac(name: string, iops: string) {
    await kube.create<VolumeAttributesClass>(volumeAttributesClasses, {
      apiVersion: "storage.k8s.io/v1",
      kind: "VolumeAttributesClass",
      metadata: { name },
      driverName: FAKE_DRIVER_NAME,
      parameters: { iops },
    });
  }

  it("a claim pointed at another class: ControllerModifyVolume with its parameters, PV and claim updated, Events", async () => {
    await vac("silver", "1000");
    await vac("gold", "3000");
    const app = appOf(controller());
    await boundClaim("tier", "1Gi", "silver");
    const r = await send(app, await setClass("tier", "gold"));
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(parameters.get("vol-tier"), { iops: "3000" });
    assert.equal((await getVolume("tier")).spec.volumeAttributesClassName, "gold");
    const claim = await getClaim("tier");
    assert.equal(claim.status?.currentVolumeAttributesClassName, "gold");
    assert.equal(claim.status?.modifyVolumeStatus ?? undefined, undefined);
    assert.deepEqual(conditionTypes(claim), []);
    assert.deepEqual(await claimEvents("tier"), [
      "Normal VolumeModify: external resizer is modifying volume tier with vac gold",
      "Normal VolumeModifySuccessful: external resizer modified volume tier with vac gold successfully",
    ]);
  });

  it("an infeasible class: Infeasible with ModifyVolumeError; pointed back at the old class, it is rolled back", async () => {
    await vac("silver", "1000");
    await vac("extreme", "9000");
    const app = appOf(controller());
    await boundClaim("roll", "1Gi", "silver");
    const r = await send(app, await setClass("roll", "extreme"));
    assert.equal(r.status, 503, JSON.stringify(r.body));
    let claim = await getClaim("roll");
    assert.deepEqual(claim.status?.modifyVolumeStatus, {
      targetVolumeAttributesClassName: "extreme",
      status: "Infeasible",
    });
    const error = (claim.status?.conditions ?? []).find((c) => c.type === "ModifyVolumeError");
    assert.equal(error?.reason, "InvalidArgument");
    assert.equal((await getVolume("roll")).spec.volumeAttributesClassName, "silver");
    // Retried only after the slow backoff.
    const calls = driver.calls("ControllerModifyVolume");
    await send(app, claim);
    assert.equal(driver.calls("ControllerModifyVolume"), calls);
    const back = await send(app, await setClass("roll", "silver"));
    assert.equal(back.status, 200, JSON.stringify(back.body));
    claim = await getClaim("roll");
    assert.equal(claim.status?.currentVolumeAttributesClassName, "silver");
    assert.equal(claim.status?.modifyVolumeStatus ?? undefined, undefined);
    assert.deepEqual(conditionTypes(claim), []);
    assert.deepEqual(parameters.get("vol-roll"), { iops: "1000" });
    const warnings = (await claimEvents("roll")).filter((e) => e.startsWith("Warning"));
    assert.deepEqual(warnings, [
      "Warning VolumeModifyFailed: rpc error: code = InvalidArgument desc = iops 9000 is above 5000",
    ]);
  });
});
