// The resizer's claim status writes when someone else writes the claim at the
// same time (the kubelet finishing a node expansion, the other half of the
// resizer). A JSON merge patch replaces the whole conditions list, so a status
// patch carrying conditions must be conditional on the resourceVersion it was
// decided on: else conditions the other writer removed come back, stale, for
// good (upstream's strategic merge patch touches only the types it changes).
// The window is widened on purpose: the sandbox API server answers GETs of
// VolumeAttributesClasses 1.5 s late, and the loader reads them after the claim.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { CsiClient } from "../../shared/csi/client.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import {
  persistentVolumeClaims,
  persistentVolumes,
  volumeAttributesClasses,
} from "../../shared/kube/resources.ts";
import type {
  PersistentVolume,
  PersistentVolumeClaim,
  VolumeAttributesClass,
} from "../../shared/kube/types.ts";
import { ResizerController, readAbilities } from "../../shared/resizer/runtime/resizer-controller.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";

const driverName = "hostpath.csi.k8s.io";
const GiB = 1 << 30;
const ns = "default";

let sandbox: TestSandbox;
let kube: KubeJsonClient;
let csi: CsiClient;
let controller: ResizerController;

before(async () => {
  sandbox = await startTestSandbox();
  kube = new KubeJsonClient(sandbox.kubeConfig);
  csi = await CsiClient.connect({ endpoint: sandbox.csiEndpoint, timeoutMs: 5000 });
  controller = new ResizerController({ kube, csi, driverName, abilities: await readAbilities(csi) });
  for (const [name, tier] of [
    ["tier-a", "standard"],
    ["tier-b", "premium"],
  ] as const) {
    await kube.create<VolumeAttributesClass>(volumeAttributesClasses, {
      apiVersion: "storage.k8s.io/v1",
      kind: "VolumeAttributesClass",
      metadata: { name },
      driverName,
      parameters: { tier },
    });
  }
});
after(async () => {
  await sandbox.admin.clearFaults();
  csi.close();
  await kube.close();
  await sandbox.close();
});

/** A claim grown to 2Gi on the controller side, waiting for the node, and pointed at tier-b. */
async function waitingForNode(name: string): Promise<void> {
  const created = await csi.createVolume({
    name,
    capacityRange: { requiredBytes: BigInt(2 * GiB) },
    volumeCapabilities: [{ mount: { fsType: "ext4" }, accessMode: { mode: "SINGLE_NODE_WRITER" } }],
    mutableParameters: { tier: "standard" },
  });
  const claim = await kube.create<PersistentVolumeClaim>(persistentVolumeClaims, {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace: ns },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: "2Gi" } },
      volumeName: `pv-${name}`,
      volumeAttributesClassName: "tier-b",
    },
  });
  await kube.create<PersistentVolume>(persistentVolumes, {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name: `pv-${name}` },
    spec: {
      capacity: { storage: "2Gi" },
      accessModes: ["ReadWriteOnce"],
      claimRef: { namespace: ns, name, uid: claim.metadata.uid },
      csi: { driver: driverName, volumeHandle: created.volume?.volumeId ?? "", fsType: "ext4" },
      volumeAttributesClassName: "tier-a",
    },
  });
  const t = "2026-01-01T00:00:00Z";
  await kube.patch(
    persistentVolumeClaims,
    name,
    ns,
    {
      status: {
        phase: "Bound",
        capacity: { storage: "1Gi" },
        allocatedResources: { storage: "2Gi" },
        allocatedResourceStatuses: { storage: "NodeResizePending" },
        currentVolumeAttributesClassName: "tier-a",
        conditions: [
          { type: "Resizing", status: "True", lastTransitionTime: t },
          { type: "FileSystemResizePending", status: "True", lastTransitionTime: t },
        ],
      },
    },
    "merge",
    { subresource: "status" },
  );
}

describe("resizer status writes racing another writer of the claim", () => {
  it("a modification finishing while the kubelet finishes the expansion does not bring back its conditions", async () => {
    await waitingForNode("raced");
    await sandbox.admin.setFaults({
      latencyMs: 1500,
      verbs: ["get"],
      resources: ["volumeattributesclasses"],
    });
    const sync = controller.syncModification(ns, "raced");
    // The PV's class is written just before the last round reads the claim (then the classes, slowly).
    const deadline = Date.now() + 20_000;
    while (
      (await kube.get<PersistentVolume>(persistentVolumes, "pv-raced")).spec.volumeAttributesClassName !==
      "tier-b"
    ) {
      assert.ok(Date.now() < deadline, "the PV never got tier-b");
      await new Promise((r) => setTimeout(r, 10));
    }
    // The kubelet's NodeExpandVolume succeeded: capacity recorded, resize conditions and status gone.
    await kube.patch(
      persistentVolumeClaims,
      "raced",
      ns,
      {
        status: {
          capacity: { storage: "2Gi" },
          conditions: [],
          allocatedResourceStatuses: { storage: null },
        },
      },
      "merge",
      { subresource: "status" },
    );
    const report = await sync;
    await sandbox.admin.clearFaults();
    assert.match(report.outcome, /modified to tier-b/);
    const claim = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "raced", ns);
    assert.equal(claim.status?.capacity?.storage, "2Gi");
    assert.equal(claim.status?.currentVolumeAttributesClassName, "tier-b");
    assert.equal(claim.status?.modifyVolumeStatus ?? undefined, undefined);
    assert.deepEqual(
      (claim.status?.conditions ?? []).map((c) => c.type),
      [],
      "no resize condition comes back after the kubelet removed them",
    );
  });
});
