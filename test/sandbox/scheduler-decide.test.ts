// The sandbox scheduler's decisions as a table: the cluster's objects and
// one pending pod in, one action out, the way kube-scheduler's filters and
// VolumeBinding plugin would decide it.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { decidePod, type ScheduleDecision } from "../../sandbox/scheduler/decide.ts";
import type {
  CSINode,
  CSIStorageCapacity,
  Node,
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
  StorageClass,
} from "../../shared/kube/types.ts";
import { annSelectedNode } from "../../shared/kube/well-known.ts";

const driver = "hostpath.csi.k8s.io";
const topologyKey = "topology.hostpath.csi/node";

function node(name: string, zone: string, extra: Partial<Node> = {}): Node {
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name,
      labels: { "kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone, [topologyKey]: name },
    },
    spec: {},
    status: { conditions: [{ type: "Ready", status: "True" }] },
    ...extra,
  };
}

function csiNode(name: string): CSINode {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "CSINode",
    metadata: { name },
    spec: { drivers: [{ name: driver, nodeID: name, topologyKeys: [topologyKey] }] },
  };
}

function pod(claims: string[] = [], spec: Record<string, unknown> = {}): Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "web", namespace: "default", uid: "pod-uid" },
    spec: {
      containers: [{ name: "c", image: "busybox" }],
      volumes: claims.map((c, i) => ({ name: `v${i}`, persistentVolumeClaim: { claimName: c } })),
      ...spec,
    },
  };
}

function claim(
  name: string,
  extra: { volumeName?: string; className?: string; selected?: string; deleting?: boolean } = {},
): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: {
      name,
      namespace: "default",
      uid: `uid-${name}`,
      ...(extra.selected ? { annotations: { [annSelectedNode]: extra.selected } } : {}),
      ...(extra.deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}),
    },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: "1Gi" } },
      ...(extra.volumeName ? { volumeName: extra.volumeName } : {}),
      storageClassName: extra.className ?? "wffc",
    },
  };
}

function pv(name: string, hostnames?: string[]): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name },
    spec: {
      csi: { driver, volumeHandle: name },
      ...(hostnames
        ? {
            nodeAffinity: {
              required: {
                nodeSelectorTerms: [
                  {
                    matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In", values: hostnames }],
                  },
                ],
              },
            },
          }
        : {}),
    },
  };
}

/** A static PV of class "local" on one node, Available unless bound to a claim. */
function localPv(name: string, hostname: string, size: string, claimName?: string): PersistentVolume {
  const base = pv(name, [hostname]);
  return {
    ...base,
    spec: {
      ...base.spec,
      capacity: { storage: size },
      accessModes: ["ReadWriteOnce"],
      storageClassName: "local",
      ...(claimName ? { claimRef: { namespace: "default", name: claimName, uid: `uid-${claimName}` } } : {}),
    },
    status: { phase: claimName ? "Bound" : "Available" },
  };
}

function storageClass(name: string, mode: string, zones?: string[], provisioner = driver): StorageClass {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: { name },
    provisioner,
    volumeBindingMode: mode,
    ...(zones
      ? {
          allowedTopologies: [
            { matchLabelExpressions: [{ key: "topology.kubernetes.io/zone", values: zones }] },
          ],
        }
      : {}),
  };
}

interface Row {
  name: string;
  pod: Pod;
  nodes?: Node[];
  claims?: PersistentVolumeClaim[];
  volumes?: PersistentVolume[];
  classes?: StorageClass[];
  podCounts?: Record<string, number>;
  /** The driver's CSIDriver has storageCapacity: true, and these objects exist. */
  capacities?: CSIStorageCapacity[];
  want: ScheduleDecision;
}

function capacityObject(
  className: string,
  nodeName: string | undefined,
  capacity: string,
  max?: string,
): CSIStorageCapacity {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "CSIStorageCapacity",
    metadata: { name: `csisc-${className}-${nodeName ?? "none"}`, namespace: "kube-system" },
    storageClassName: className,
    ...(nodeName ? { nodeTopology: { matchLabels: { [topologyKey]: nodeName } } } : {}),
    capacity,
    ...(max ? { maximumVolumeSize: max } : {}),
  };
}

const twoNodes = [node("node-a", "zone-a"), node("node-b", "zone-b")];
const classes = [
  storageClass("wffc", "WaitForFirstConsumer"),
  storageClass("wffc-zone-b", "WaitForFirstConsumer", ["zone-b"]),
  storageClass("immediate", "Immediate"),
  storageClass("local", "WaitForFirstConsumer", undefined, "kubernetes.io/no-provisioner"),
  storageClass("elsewhere", "WaitForFirstConsumer", undefined, "other.csi.example.com"),
];

const rows: Row[] = [
  {
    name: "a pod without volumes goes to the emptiest node",
    pod: pod(),
    podCounts: { "node-a": 3 },
    want: { action: "bind", node: "node-b" },
  },
  { name: "equal nodes: by name", pod: pod(), want: { action: "bind", node: "node-a" } },
  {
    name: "node selector",
    pod: pod([], { nodeSelector: { "topology.kubernetes.io/zone": "zone-b" } }),
    want: { action: "bind", node: "node-b" },
  },
  {
    name: "required node affinity nobody matches",
    pod: pod([], {
      affinity: {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [
              {
                matchExpressions: [
                  { key: "topology.kubernetes.io/zone", operator: "In", values: ["zone-z"] },
                ],
              },
            ],
          },
        },
      },
    }),
    want: {
      action: "unschedulable",
      message: "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.",
    },
  },
  {
    name: "a node that is not Ready and a tainted node",
    pod: pod(),
    nodes: [
      node("node-a", "zone-a", { status: { conditions: [{ type: "Ready", status: "False" }] } }),
      node("node-b", "zone-b", {
        spec: { taints: [{ key: "dedicated", value: "db", effect: "NoSchedule" }] },
      }),
    ],
    want: {
      action: "unschedulable",
      message:
        "0/2 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }, 1 node(s) had untolerated taint(s).",
    },
  },
  {
    name: "a tolerated taint",
    pod: pod([], {
      tolerations: [{ key: "dedicated", operator: "Equal", value: "db", effect: "NoSchedule" }],
    }),
    nodes: [
      node("node-b", "zone-b", {
        spec: { taints: [{ key: "dedicated", value: "db", effect: "NoSchedule" }] },
      }),
    ],
    want: { action: "bind", node: "node-b" },
  },
  {
    name: "a bound claim's PV node affinity decides",
    pod: pod(["data"]),
    claims: [claim("data", { volumeName: "pv-1", className: "immediate" })],
    volumes: [pv("pv-1", ["node-b"])],
    want: { action: "bind", node: "node-b" },
  },
  {
    name: "a bound claim's PV fits no node",
    pod: pod(["data"]),
    claims: [claim("data", { volumeName: "pv-1" })],
    volumes: [pv("pv-1", ["node-z"])],
    want: {
      action: "unschedulable",
      message: "0/2 nodes are available: 2 node(s) had volume node affinity conflict.",
    },
  },
  {
    name: "a missing claim",
    pod: pod(["nope"]),
    want: {
      action: "unschedulable",
      message: '0/2 nodes are available: persistentvolumeclaim "nope" not found.',
    },
  },
  {
    name: "a claim being deleted",
    pod: pod(["data"]),
    claims: [claim("data", { deleting: true })],
    want: {
      action: "unschedulable",
      message: '0/2 nodes are available: persistentvolumeclaim "data" is being deleted.',
    },
  },
  {
    name: "an unbound Immediate claim waits for the binder",
    pod: pod(["data"]),
    claims: [claim("data", { className: "immediate" })],
    want: {
      action: "unschedulable",
      message: "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims.",
    },
  },
  {
    name: "an unbound WaitForFirstConsumer claim gets a node",
    pod: pod(["data"]),
    claims: [claim("data")],
    want: { action: "prebind", node: "node-a", bindVolumes: [], selectNode: ["data"] },
  },
  {
    name: "allowedTopologies narrow the choice",
    pod: pod(["data"]),
    claims: [claim("data", { className: "wffc-zone-b" })],
    want: { action: "prebind", node: "node-b", bindVolumes: [], selectNode: ["data"] },
  },
  {
    name: "the driver's topology keys must be node labels",
    pod: pod(["data"]),
    nodes: [
      node("node-a", "zone-a", {
        metadata: { name: "node-a", labels: { "kubernetes.io/hostname": "node-a" } },
      }),
      node("node-b", "zone-b"),
    ],
    claims: [claim("data")],
    want: { action: "prebind", node: "node-b", bindVolumes: [], selectNode: ["data"] },
  },
  {
    name: "a claim with the annotation waits for binding on that node",
    pod: pod(["data"]),
    claims: [claim("data", { selected: "node-b" })],
    want: { action: "wait-for-binding", node: "node-b", claims: ["data"] },
  },
  {
    name: "an Available PV matching a WaitForFirstConsumer claim decides the node and is pre-bound",
    pod: pod(["data"]),
    claims: [claim("data", { className: "local" })],
    volumes: [localPv("local-b", "node-b", "5Gi")],
    want: {
      action: "prebind",
      node: "node-b",
      bindVolumes: [{ claim: "data", volume: "local-b" }],
      selectNode: [],
    },
  },
  {
    name: "the smallest matching PV on the chosen node",
    pod: pod(["data"]),
    claims: [claim("data", { className: "local" })],
    volumes: [
      localPv("big", "node-a", "10Gi"),
      localPv("small", "node-a", "2Gi"),
      localPv("tiny", "node-a", "512Mi"),
    ],
    want: {
      action: "prebind",
      node: "node-a",
      bindVolumes: [{ claim: "data", volume: "small" }],
      selectNode: [],
    },
  },
  {
    name: "two claims cannot share one PV: the second is provisioned",
    pod: pod(["one", "two"]),
    claims: [claim("one", { className: "local" }), claim("two")],
    volumes: [localPv("only", "node-b", "5Gi")],
    want: {
      action: "prebind",
      node: "node-b",
      bindVolumes: [{ claim: "one", volume: "only" }],
      selectNode: ["two"],
    },
  },
  {
    name: "a PV pre-bound to the claim: wait on its node for the binder",
    pod: pod(["data"]),
    claims: [claim("data", { className: "local" })],
    volumes: [localPv("mine", "node-b", "5Gi", "data")],
    want: { action: "wait-for-binding", node: "node-b", claims: ["data"] },
  },
  {
    name: "no provisioner: nothing to provision",
    pod: pod(["data"]),
    claims: [claim("data", { className: "local" })],
    want: {
      action: "unschedulable",
      message: "0/2 nodes are available: 2 node(s) didn't find available persistent volumes to bind.",
    },
  },
  {
    name: "a driver no node runs is not checked against CSINodes",
    pod: pod(["data"]),
    claims: [claim("data", { className: "elsewhere" })],
    want: { action: "prebind", node: "node-a", bindVolumes: [], selectNode: ["data"] },
  },
  {
    name: "capacity tracking: a node whose segment lacks room is skipped",
    pod: pod(["data"]),
    claims: [claim("data", { className: "wffc" })],
    capacities: [capacityObject("wffc", "node-a", "512Mi"), capacityObject("wffc", "node-b", "10Gi")],
    want: { action: "prebind", node: "node-b", bindVolumes: [], selectNode: ["data"] },
  },
  {
    name: "capacity tracking: maximumVolumeSize wins over capacity",
    pod: pod(["data"]),
    claims: [claim("data", { className: "wffc" })],
    capacities: [capacityObject("wffc", "node-a", "10Gi", "512Mi"), capacityObject("wffc", "node-b", "1Gi")],
    want: { action: "prebind", node: "node-b", bindVolumes: [], selectNode: ["data"] },
  },
  {
    name: "capacity tracking: no object of the class covers any node",
    pod: pod(["data"]),
    claims: [claim("data", { className: "wffc" })],
    capacities: [capacityObject("wffc-zone-b", "node-a", "10Gi"), capacityObject("wffc", undefined, "10Gi")],
    want: {
      action: "unschedulable",
      message: "0/2 nodes are available: 2 node(s) did not have enough free storage.",
    },
  },
  {
    name: "capacity is not checked when the CSIDriver does not ask for it",
    pod: pod(["data"]),
    claims: [claim("data", { className: "wffc" })],
    want: { action: "prebind", node: "node-a", bindVolumes: [], selectNode: ["data"] },
  },
];

describe("decidePod", () => {
  for (const row of rows) {
    it(row.name, () => {
      const nodes = row.nodes ?? twoNodes;
      const got = decidePod(row.pod, {
        nodes,
        csiNodes: nodes.map((n) => csiNode(n.metadata.name)),
        claim: (ns, name) => row.claims?.find((c) => c.metadata.namespace === ns && c.metadata.name === name),
        volume: (name) => row.volumes?.find((v) => v.metadata.name === name),
        volumes: row.volumes ?? [],
        storageClass: (name) => classes.find((c) => c.metadata.name === name),
        csiDriver: (name) =>
          row.capacities && name === driver
            ? {
                apiVersion: "storage.k8s.io/v1",
                kind: "CSIDriver",
                metadata: { name },
                spec: { storageCapacity: true },
              }
            : undefined,
        capacities: row.capacities ?? [],
        podCount: (n) => row.podCounts?.[n] ?? 0,
      });
      assert.deepEqual(got, row.want);
    });
  }
});
