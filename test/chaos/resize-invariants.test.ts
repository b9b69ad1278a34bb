// The chaos run's resize invariants (issue 18) as a table: an end state (a
// claim, its PV, the driver's volume, the classes) and what the watchdog saw
// on the sandbox store's change feed, then the counts checkInvariants gives.
// The chaos test only shows they stay 0; these rows show each can fail.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { checkInvariants, type EndState, type InvariantName } from "../../bench/chaos/invariants.ts";
import { Trace } from "../../bench/chaos/trace.ts";
import { Watchdog } from "../../bench/chaos/watchdog.ts";
import { resourceTypes } from "../../sandbox/apiserver/resources.ts";
import { ObjectStore } from "../../sandbox/apiserver/store.ts";
import type { BackingVolume } from "../../sandbox/csi/driver.ts";
import type {
  PersistentVolume,
  PersistentVolumeClaim,
  VolumeAttributesClass,
} from "../../shared/kube/types.ts";

const GiB = 1024 ** 3;
const vacB: VolumeAttributesClass = {
  apiVersion: "storage.k8s.io/v1",
  kind: "VolumeAttributesClass",
  metadata: { name: "b" },
  driverName: "d",
  parameters: { tier: "premium" },
};

/** A claim at 2Gi with class b, done: everything as a finished expansion and modification leave it. */
function claim(
  status: Partial<NonNullable<PersistentVolumeClaim["status"]>> = {},
  request = "2Gi",
): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name: "c", namespace: "default", uid: "u1", resourceVersion: "1" },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: request } },
      volumeName: "pv",
      storageClassName: "x",
      volumeAttributesClassName: "b",
    },
    status: {
      phase: "Bound",
      capacity: { storage: "2Gi" },
      currentVolumeAttributesClassName: "b",
      ...status,
    },
  };
}

function volume(capacity = "2Gi", vac = "b"): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name: "pv", resourceVersion: "1" },
    spec: {
      capacity: { storage: capacity },
      accessModes: ["ReadWriteOnce"],
      persistentVolumeReclaimPolicy: "Delete",
      claimRef: { name: "c", namespace: "default", uid: "u1" },
      csi: { driver: "d", volumeHandle: "h" },
      volumeAttributesClassName: vac,
    },
    status: { phase: "Bound" },
  };
}

function backing(over: Partial<BackingVolume> = {}): BackingVolume {
  return {
    volumeId: "h",
    name: "pvc-u1",
    kind: "mount",
    path: "/x",
    createdAt: "",
    capacityBytes: 2 * GiB,
    nodeCapacityBytes: 2 * GiB,
    mutableParameters: { tier: "premium" },
    publishedNodes: [],
    staged: [],
    nodePublished: [],
    accessibleTopology: [],
    parameters: {},
    ...over,
  };
}

interface Row {
  name: string;
  claim?: PersistentVolumeClaim;
  volume?: PersistentVolume;
  backing?: BackingVolume;
  /** Successive PV capacities written to the store, and driver sizes reported, while the run went on. */
  pvHistory?: string[];
  driverHistory?: number[];
  expect: Partial<Record<InvariantName, number>>;
}

const rows: Row[] = [
  { name: "a finished expansion and modification", expect: {} },
  {
    name: "PV still at the old size",
    volume: volume("1Gi"),
    backing: backing({ capacityBytes: GiB, nodeCapacityBytes: GiB }),
    expect: { resizesLost: 1 },
  },
  {
    name: "file system not grown (node expansion pending)",
    claim: claim({
      capacity: { storage: "1Gi" },
      allocatedResourceStatuses: { storage: "NodeResizePending" },
      conditions: [{ type: "FileSystemResizePending", status: "True" }],
    }),
    backing: backing({ nodeCapacityBytes: GiB }),
    expect: { resizesLost: 1 },
  },
  {
    name: "an error condition left after success",
    claim: claim({ conditions: [{ type: "ControllerResizeError", status: "True" }] }),
    expect: { resizesLost: 1 },
  },
  {
    name: "the class not applied on the PV",
    volume: volume("2Gi", "a"),
    expect: { modificationsLost: 1 },
  },
  {
    name: "an Infeasible modifyVolumeStatus left",
    claim: claim({ modifyVolumeStatus: { status: "Infeasible", targetVolumeAttributesClassName: "c" } }),
    expect: { modificationsLost: 1 },
  },
  {
    name: "the driver kept the old parameters",
    backing: backing({ mutableParameters: { tier: "standard" } }),
    expect: { modificationsLost: 1 },
  },
  {
    name: "the driver's volume smaller than the PV",
    backing: backing({ capacityBytes: GiB }),
    expect: { volumesShrunk: 1 },
  },
  {
    // The claim's data is gone: the volume is lost, and so are its size and its class.
    name: "the driver has no volume for the claim's PV",
    backing: backing({ volumeId: "other", name: "other" }),
    expect: { backingVolumesLost: 1, leakedBackingVolumes: 1, modificationsLost: 1 },
  },
  { name: "a PV that went down and back up", pvHistory: ["2Gi", "1Gi", "2Gi"], expect: { volumesShrunk: 1 } },
  { name: "a PV growing", pvHistory: ["1Gi", "2Gi"], expect: {} },
  {
    // Its size and its file system's size both went down: two objects.
    name: "a driver volume that went down",
    driverHistory: [2 * GiB, GiB, 2 * GiB],
    expect: { volumesShrunk: 2 },
  },
  {
    name: "a PV growing past the driver's volume",
    driverHistory: [GiB],
    pvHistory: ["1Gi", "2Gi"],
    expect: { volumesShrunk: 1 },
  },
];

describe("chaos resize invariants", () => {
  for (const row of rows) {
    it(row.name, () => {
      const trace = new Trace();
      const watchdog = new Watchdog({ staticPvNames: [], trackedClaims: ["default/c"], trace });
      const store = new ObjectStore();
      watchdog.watch(store);
      const pvType = resourceTypes.find((t) => t.group === "" && t.plural === "persistentvolumes")!;
      for (const size of row.driverHistory ?? []) watchdog.noteDriverVolume("h", size, size);
      for (const [i, size] of (row.pvHistory ?? []).entries()) {
        const pv = volume(size);
        pv.metadata.resourceVersion = String(i + 1);
        store.put(pvType, i === 0 ? "ADDED" : "MODIFIED", pv);
      }
      watchdog.stop();
      const end: EndState = {
        claims: [row.claim ?? claim()],
        volumes: [row.volume ?? volume()],
        attachments: [],
        nodes: [],
        drivers: [],
        pods: [],
        backingVolumes: [row.backing ?? backing()],
        attributeClasses: [vacB],
      };
      const result = checkInvariants(
        end,
        { mainClaims: ["default/c"], churnClaims: [], staticVolumes: new Map(), volumeNamePrefix: "pvc" },
        watchdog.report(),
        trace,
      );
      const nonZero = Object.fromEntries(Object.entries(result.counts).filter(([, n]) => n > 0));
      assert.deepEqual(nonZero, row.expect, JSON.stringify(result.examples));
    });
  }
});
