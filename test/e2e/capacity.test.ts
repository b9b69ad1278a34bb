// Storage capacity tracking end to end (issue 19): every function as its own
// process on the sandbox cluster (sandbox/system.ts). The provisioner publishes
// one CSIStorageCapacity per WaitForFirstConsumer class and node segment from
// the sandbox driver's GetCapacity; the objects shrink as volumes are
// provisioned and go away with their class; the sandbox scheduler (VolumeBinding)
// sends a claim only to a node whose segment has room for it.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { capacityNamespace, type RunningSystem, startSystem } from "../../sandbox/system.ts";
import {
  csiStorageCapacities,
  persistentVolumeClaims,
  pods,
  storageClasses,
} from "../../shared/kube/resources.ts";
import type { CSIStorageCapacity, PersistentVolumeClaim, Pod } from "../../shared/kube/types.ts";
import { annSelectedNode } from "../../shared/kube/well-known.ts";
import { waitFor } from "../helpers/wait-for.ts";

const ns = "default";
const GiB = 1024 ** 3;

function claim(name: string, size: string): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace: ns },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: size } },
      storageClassName: "tracked",
    },
  };
}

function pod(name: string, claimName: string): Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: ns },
    spec: {
      containers: [{ name: "app", image: "busybox" }],
      volumes: [{ name: "data", persistentVolumeClaim: { claimName } }],
    },
  };
}

describe("capacity tracking, end to end over the sandbox", () => {
  let dir: string;
  let system: RunningSystem;
  let small: string;
  let large: string;
  let topologyKey: string;

  /** The managed objects of class "tracked", by node segment: capacity. */
  async function capacities(): Promise<Record<string, string>> {
    const list = await system.kube.list<CSIStorageCapacity>(csiStorageCapacities, {
      namespace: capacityNamespace,
    });
    return Object.fromEntries(
      list.items
        .filter((c) => c.storageClassName === "tracked")
        .map((c) => [c.nodeTopology?.matchLabels?.[topologyKey] ?? "?", c.capacity ?? "?"]),
    );
  }

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "ksf-capacity-"));
    // The first node's segment holds 3 GiB, the second's 20 GiB.
    const first = "cap-node";
    small = first;
    large = `${first}-2`;
    system = await startSystem({
      dir,
      resyncSeconds: 0,
      logLevel: "error",
      sandbox: { csi: { nodeId: first, segmentCapacityOverrides: { [small]: 3 * GiB, [large]: 20 * GiB } } },
    });
    topologyKey = system.sandbox.csi.driver.config.topologyKey;
  });

  after(async () => {
    await system?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it("objects appear per segment when a WaitForFirstConsumer class of the driver is created", async () => {
    await system.kube.create(storageClasses, {
      apiVersion: "storage.k8s.io/v1",
      kind: "StorageClass",
      metadata: { name: "tracked" },
      provisioner: system.driverName,
      reclaimPolicy: "Delete",
      volumeBindingMode: "WaitForFirstConsumer",
    });
    const seen = await waitFor("two CSIStorageCapacity objects", async () => {
      const c = await capacities();
      return Object.keys(c).length === 2 ? c : undefined;
    });
    assert.deepEqual(seen, { [small]: "3Gi", [large]: "20Gi" });
    const list = await system.kube.list<CSIStorageCapacity>(csiStorageCapacities, {
      namespace: capacityNamespace,
    });
    for (const c of list.items) {
      assert.match(c.metadata.name, /^csisc-/);
      assert.equal(c.metadata.labels?.["csi.storage.k8s.io/drivername"], system.driverName);
      assert.equal(c.metadata.labels?.["csi.storage.k8s.io/managed-by"], "external-provisioner");
    }
  });

  it("a claim too big for the first node's segment is scheduled to the second, and its segment shrinks", async () => {
    await system.kube.create(persistentVolumeClaims, claim("big", "5Gi"));
    await system.kube.create(pods, pod("big-user", "big"));
    const selected = await waitFor("selected-node on the claim", async () => {
      const c = await system.kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "big", ns);
      return c.metadata.annotations?.[annSelectedNode];
    });
    assert.equal(selected, large);
    await waitFor("pod Running", async () => {
      const p = await system.kube.get<Pod>(pods, "big-user", ns);
      return p.status?.phase === "Running" ? true : undefined;
    });
    const after = await waitFor("the second segment shrinks by 5Gi", async () => {
      const c = await capacities();
      return c[large] === "15Gi" ? c : undefined;
    });
    assert.equal(after[small], "3Gi");
  });

  it("a claim no segment has room for leaves its pod unschedulable, as kube-scheduler says it", async () => {
    await system.kube.create(persistentVolumeClaims, claim("huge", "50Gi"));
    await system.kube.create(pods, pod("huge-user", "huge"));
    const message = await waitFor("PodScheduled=False", async () => {
      const p = await system.kube.get<Pod>(pods, "huge-user", ns);
      const conditions = (p.status?.conditions ?? []) as { type: string; status: string; message?: string }[];
      return conditions.find((c) => c.type === "PodScheduled" && c.status === "False")?.message;
    });
    assert.match(message, /2 node\(s\) did not have enough free storage/);
    const c = await system.kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "huge", ns);
    assert.equal(c.metadata.annotations?.[annSelectedNode], undefined);
  });

  it("the objects go away with their class", async () => {
    await system.kube.delete(storageClasses, "tracked");
    await waitFor("no CSIStorageCapacity of the class", async () =>
      Object.keys(await capacities()).length === 0 ? true : undefined,
    );
  });
});
