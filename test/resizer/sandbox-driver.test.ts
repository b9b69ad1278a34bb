// The resizer against the sandbox's own CSI driver (sandbox/csi, hostpath's
// behaviour): its default capabilities (controller and node EXPAND_VOLUME,
// MODIFY_VOLUME), node_expansion_required for mount volumes only, and its
// checks of mutable parameters (an unknown tier is InvalidArgument).
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import request from "supertest";
import { createResizerApp } from "../../functions/resizer/app.ts";
import { CsiClient } from "../../shared/csi/client.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import {
  persistentVolumeClaims,
  persistentVolumes,
  storageClasses,
  volumeAttributesClasses,
} from "../../shared/kube/resources.ts";
import type {
  KubeObject,
  PersistentVolume,
  PersistentVolumeClaim,
  StorageClass,
  VolumeAttributesClass,
} from "../../shared/kube/types.ts";
import { createLogger } from "../../shared/log.ts";
import { createMetricsRegistry } from "../../shared/metrics.ts";
import { ResizerController, readAbilities } from "../../shared/resizer/runtime/resizer-controller.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";

const driverName = "hostpath.csi.k8s.io";
const GiB = 1 << 30;

let sandbox: TestSandbox;
let kube: KubeJsonClient;
let csi: CsiClient;
let app: ReturnType<typeof createResizerApp>;

before(async () => {
  sandbox = await startTestSandbox();
  kube = new KubeJsonClient(sandbox.kubeConfig);
  csi = await CsiClient.connect({ endpoint: sandbox.csiEndpoint, timeoutMs: 2000 });
  const abilities = await readAbilities(csi);
  app = createResizerApp({
    controller: new ResizerController({ kube, csi, driverName, abilities }),
    csi,
    logger: createLogger({ name: "resizer", level: "silent" }),
    metrics: createMetricsRegistry({ defaultMetrics: false }),
  });
});
after(async () => {
  csi.close();
  await kube.close();
  await sandbox.close();
});
beforeEach(async () => {
  await sandbox.admin.reset();
  await sandbox.csi.clearFaults();
  for (const v of await sandbox.csi.volumes())
    await csi.deleteVolume({ volumeId: v.volumeId }).catch(() => undefined);
  await kube.create<StorageClass>(storageClasses, {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: { name: "fast" },
    provisioner: driverName,
    allowVolumeExpansion: true,
  });
});

/** A backing volume of 1 GiB, its PV and a Bound claim. */
async function boundClaim(name: string, o: { block?: boolean; vac?: string; tier?: string } = {}) {
  const created = await csi.createVolume({
    name,
    capacityRange: { requiredBytes: BigInt(GiB) },
    volumeCapabilities: [
      o.block
        ? { block: {}, accessMode: { mode: "SINGLE_NODE_WRITER" } }
        : { mount: { fsType: "ext4" }, accessMode: { mode: "SINGLE_NODE_WRITER" } },
    ],
    ...(o.tier ? { mutableParameters: { tier: o.tier } } : {}),
  });
  const volumeId = created.volume?.volumeId ?? "";
  const claim = await kube.create<PersistentVolumeClaim>(persistentVolumeClaims, {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace: "default" },
    spec: {
      accessModes: ["ReadWriteOnce"],
      storageClassName: "fast",
      resources: { requests: { storage: "1Gi" } },
      volumeName: `pv-${name}`,
      ...(o.block ? { volumeMode: "Block" } : {}),
      ...(o.vac ? { volumeAttributesClassName: o.vac } : {}),
    },
  });
  await kube.create<PersistentVolume>(persistentVolumes, {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name: `pv-${name}` },
    spec: {
      capacity: { storage: "1Gi" },
      accessModes: ["ReadWriteOnce"],
      storageClassName: "fast",
      claimRef: { namespace: "default", name, uid: claim.metadata.uid },
      csi: { driver: driverName, volumeHandle: volumeId, ...(o.block ? {} : { fsType: "ext4" }) },
      ...(o.block ? { volumeMode: "Block" } : {}),
      ...(o.vac ? { volumeAttributesClassName: o.vac } : {}),
    },
  });
  await kube.patch(
    persistentVolumeClaims,
    name,
    "default",
    {
      status: {
        phase: "Bound",
        capacity: { storage: "1Gi" },
        ...(o.vac ? { currentVolumeAttributesClassName: o.vac } : {}),
      },
    },
    "merge",
    { subresource: "status" },
  );
  return volumeId;
}

async function send(object: KubeObject) {
  return request(app)
    .post("/")
    .set("content-type", "application/json")
    .send(JSON.stringify({ type: "MODIFIED", object }));
}

const getClaim = (name: string) => kube.get<PersistentVolumeClaim>(persistentVolumeClaims, name, "default");
const patchClaim = (name: string, spec: object) =>
  kube.patch<PersistentVolumeClaim>(persistentVolumeClaims, name, "default", { spec }, "merge");

async function backing(volumeId: string) {
  const v = (await sandbox.csi.volumes()).find((x) => x.volumeId === volumeId);
  assert.ok(v, `backing volume ${volumeId}`);
  return v;
}

describe("resizer with the sandbox CSI driver", () => {
  it("a mount volume grows on the controller and waits for the node (NodeResizePending)", async () => {
    const id = await boundClaim("mount");
    const r = await send(await patchClaim("mount", { resources: { requests: { storage: "2Gi" } } }));
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const v = await backing(id);
    assert.equal(v.capacityBytes, 2 * GiB);
    assert.equal(v.nodeCapacityBytes, GiB);
    const claim = await getClaim("mount");
    assert.equal(claim.status?.allocatedResourceStatuses?.storage, "NodeResizePending");
    assert.equal(claim.status?.capacity?.storage, "1Gi");
    assert.equal(
      (await kube.get<PersistentVolume>(persistentVolumes, "pv-mount")).spec.capacity?.storage,
      "2Gi",
    );
  });

  it("a block volume needs nothing on the node: the claim is at 2Gi at once", async () => {
    const id = await boundClaim("raw", { block: true });
    const r = await send(await patchClaim("raw", { resources: { requests: { storage: "2Gi" } } }));
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal((await backing(id)).capacityBytes, 2 * GiB);
    const claim = await getClaim("raw");
    assert.equal(claim.status?.capacity?.storage, "2Gi");
    assert.equal(claim.status?.allocatedResourceStatuses?.storage, undefined);
  });

  it("a tier change is applied; an unknown tier is Infeasible and rolled back", async () => {
    for (const [name, tier] of [
      ["standard", "standard"],
      ["premium", "premium"],
      ["gold", "gold"],
    ] as const) {
      await kube.create<VolumeAttributesClass>(volumeAttributesClasses, {
        apiVersion: "storage.k8s.io/v1",
        kind: "VolumeAttributesClass",
        metadata: { name },
        driverName,
        parameters: { tier },
      });
    }
    const id = await boundClaim("tiered", { vac: "standard", tier: "standard" });
    const up = await send(await patchClaim("tiered", { volumeAttributesClassName: "premium" }));
    assert.equal(up.status, 200, JSON.stringify(up.body));
    assert.deepEqual((await backing(id)).mutableParameters, { tier: "premium" });
    assert.equal((await getClaim("tiered")).status?.currentVolumeAttributesClassName, "premium");

    const bad = await send(await patchClaim("tiered", { volumeAttributesClassName: "gold" }));
    assert.equal(bad.status, 503, JSON.stringify(bad.body));
    assert.equal((await getClaim("tiered")).status?.modifyVolumeStatus?.status, "Infeasible");
    assert.deepEqual((await backing(id)).mutableParameters, { tier: "premium" });

    const back = await send(await patchClaim("tiered", { volumeAttributesClassName: "premium" }));
    assert.equal(back.status, 200, JSON.stringify(back.body));
    const claim = await getClaim("tiered");
    assert.equal(claim.status?.currentVolumeAttributesClassName, "premium");
    assert.equal(claim.status?.modifyVolumeStatus ?? undefined, undefined);
  });
});
