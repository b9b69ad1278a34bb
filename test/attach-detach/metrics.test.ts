// attachdetach_controller_total_volumes as tables: one node's state in, the
// volumes counted by state and plugin out; then the gauge summing the last
// count of every node, dropping what is gone.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { NodeReconcileInput } from "../../shared/attach-detach/reconcile-node.ts";
import {
  attachDetachMetrics,
  countNodeVolumes,
  NodeVolumeCounts,
} from "../../shared/attach-detach/runtime/attach-detach-metrics.ts";
import type {
  CSIDriver,
  Node,
  PersistentVolume,
  PersistentVolumeClaim,
  Pod,
  VolumeAttachment,
} from "../../shared/kube/types.ts";
import { annControllerManagedAttachDetach } from "../../shared/kube/well-known.ts";
import { createMetricsRegistry, type Registry } from "../../shared/metrics.ts";

const driver = "hostpath.csi.k8s.io";
const plugin = `kubernetes.io/csi:${driver}`;

function node(name: string, managed = true): Node {
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name, ...(managed ? { annotations: { [annControllerManagedAttachDetach]: "true" } } : {}) },
    spec: {},
    status: {},
  };
}

function pod(name: string, claimName: string, nodeName: string, phase = "Running"): Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "ns", uid: `uid-${name}` },
    spec: { nodeName, volumes: [{ name: "data", persistentVolumeClaim: { claimName } }] },
    status: { phase },
  };
}

function claim(name: string, volumeName: string): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace: "ns", uid: `uid-${name}` },
    spec: { volumeName },
  };
}

function pv(name: string, claimName: string, driverName = driver): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name },
    spec: {
      claimRef: { namespace: "ns", name: claimName, uid: `uid-${claimName}` },
      csi: { driver: driverName, volumeHandle: `h-${name}` },
    },
  };
}

function va(pvName: string, nodeName: string, attached: boolean, attacher = driver): VolumeAttachment {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name: `va-${pvName}-${nodeName}` },
    spec: { attacher, nodeName, source: { persistentVolumeName: pvName } },
    status: { attached },
  };
}

function noAttach(name: string): CSIDriver {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "CSIDriver",
    metadata: { name },
    spec: { attachRequired: false },
  };
}

function input(partial: Partial<NodeReconcileInput>): NodeReconcileInput {
  return {
    nodeName: "node-a",
    node: node("node-a"),
    pods: [],
    claims: [],
    volumes: [],
    drivers: [],
    attachments: [],
    now: new Date("2026-01-01T00:00:00Z"),
    ...partial,
  };
}

/** The counts as "state plugin: n", sorted. */
function flat(counts: ReturnType<typeof countNodeVolumes>): string[] {
  return [...counts]
    .flatMap(([state, byPlugin]) => [...byPlugin].map(([p, n]) => `${state} ${p}: ${n}`))
    .sort();
}

describe("one node's volumes by state", () => {
  const cases: { name: string; input: NodeReconcileInput; expected: string[] }[] = [
    { name: "nothing on the node", input: input({}), expected: [] },
    {
      name: "a running pod's bound CSI volume is desired; its attached VolumeAttachment is actual",
      input: input({
        pods: [pod("p1", "c1", "node-a")],
        claims: [claim("c1", "pv1")],
        volumes: [pv("pv1", "c1")],
        attachments: [va("pv1", "node-a", true)],
      }),
      expected: [`actual_state_of_world ${plugin}: 1`, `desired_state_of_world ${plugin}: 1`],
    },
    {
      name: "two pods sharing one volume count it once; an attachment not yet attached is not actual",
      input: input({
        pods: [pod("p1", "c1", "node-a"), pod("p2", "c1", "node-a")],
        claims: [claim("c1", "pv1")],
        volumes: [pv("pv1", "c1")],
        attachments: [va("pv1", "node-a", false)],
      }),
      expected: [`desired_state_of_world ${plugin}: 1`],
    },
    {
      name: "a finished pod wants nothing; what stays attached is still actual",
      input: input({
        pods: [pod("p1", "c1", "node-a", "Succeeded")],
        claims: [claim("c1", "pv1")],
        volumes: [pv("pv1", "c1")],
        attachments: [va("pv1", "node-a", true)],
      }),
      expected: [`actual_state_of_world ${plugin}: 1`],
    },
    {
      name: "a driver without attach is never desired; other nodes' attachments are not this node's",
      input: input({
        pods: [pod("p1", "c1", "node-a")],
        claims: [claim("c1", "pv1")],
        volumes: [pv("pv1", "c1", "noattach.csi")],
        drivers: [noAttach("noattach.csi")],
        attachments: [va("pv2", "node-b", true)],
      }),
      expected: [],
    },
    {
      name: "a node the controller does not manage (or that is gone) has no desired state",
      input: input({
        node: node("node-a", false),
        pods: [pod("p1", "c1", "node-a")],
        claims: [claim("c1", "pv1")],
        volumes: [pv("pv1", "c1")],
        attachments: [va("pv1", "node-a", true, "other.csi")],
      }),
      expected: ["actual_state_of_world kubernetes.io/csi:other.csi: 1"],
    },
  ];
  for (const c of cases) {
    it(c.name, () => assert.deepEqual(flat(countNodeVolumes(c.input)), c.expected));
  }
});

describe("attachdetach_controller_total_volumes", () => {
  async function gaugeSamples(registry: Registry): Promise<string[]> {
    const metric = registry.getSingleMetric("attachdetach_controller_total_volumes");
    assert.ok(metric);
    return (await metric.get()).values
      .map((v) => `${v.labels.state} ${v.labels.plugin_name}: ${v.value}`)
      .sort();
  }

  it("sums the last count of every node; a node with nothing left drops out", async () => {
    const registry = createMetricsRegistry({ defaultMetrics: false });
    const counts = new NodeVolumeCounts(attachDetachMetrics(registry));
    const onNode = (name: string, attached: boolean) =>
      input({
        nodeName: name,
        node: node(name),
        pods: [pod(`p-${name}`, `c-${name}`, name)],
        claims: [claim(`c-${name}`, `pv-${name}`)],
        volumes: [pv(`pv-${name}`, `c-${name}`)],
        attachments: attached ? [va(`pv-${name}`, name, true)] : [],
      });
    counts.record(onNode("node-a", true));
    counts.record(onNode("node-b", false));
    assert.deepEqual(await gaugeSamples(registry), [
      `actual_state_of_world ${plugin}: 1`,
      `desired_state_of_world ${plugin}: 2`,
    ]);
    // node-a's pod and attachment are gone; node-b's volume got attached.
    counts.record(input({ nodeName: "node-a", node: node("node-a") }));
    counts.record(onNode("node-b", true));
    assert.deepEqual(await gaugeSamples(registry), [
      `actual_state_of_world ${plugin}: 1`,
      `desired_state_of_world ${plugin}: 1`,
    ]);
    counts.record(input({ nodeName: "node-b", node: undefined }));
    assert.deepEqual(await gaugeSamples(registry), []);
  });

  it("keeps upstream's forced-detach name and reason label", async () => {
    const registry = createMetricsRegistry({ defaultMetrics: false });
    attachDetachMetrics(registry).forcedDetaches.inc({ reason: "out-of-service" });
    const text = await registry.metrics();
    assert.match(
      text,
      /^attach_detach_controller_attachdetach_controller_forced_detaches\{reason="out-of-service"\} 1$/m,
    );
  });
});
