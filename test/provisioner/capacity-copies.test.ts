// Capacity tracking inside the provisioner function reads every Node and
// CSINode from the provisioner's watched topology copies: a resync lists
// neither (upstream reads its informers), where it used to list both once
// per tracked class, and a Node label change is read from the copy only once
// the copy holds it.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { CsiClient } from "../../shared/csi/client.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { csiNodes, csiStorageCapacities, nodes } from "../../shared/kube/resources.ts";
import { storageClassCopyFromEnv } from "../../shared/kube/storage-class-copy.ts";
import type { CSINode, CSIStorageCapacity, Node, StorageClass } from "../../shared/kube/types.ts";
import { createLogger } from "../../shared/log.ts";
import { CapacityController } from "../../shared/provisioner/capacity/runtime/capacity-controller.ts";
import { lazyTopologyCopies } from "../../shared/provisioner/runtime/topology-copies.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";

const driverName = "hostpath.csi.k8s.io";
const namespace = "default";
const nodeName = "sandbox-node";

function lateBindingClass(name: string): StorageClass {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: { name },
    provisioner: driverName,
    volumeBindingMode: "WaitForFirstConsumer",
  };
}

/** A Node update event, as the forwarder delivers it. */
function nodeEvent(object: Node) {
  return {
    action: "update" as const,
    kind: "Node",
    apiVersion: "v1",
    name: nodeName,
    object: object as unknown as Record<string, unknown>,
  };
}

describe("capacity tracking on the provisioner's topology copies", () => {
  let sandbox: TestSandbox;
  let kube: KubeJsonClient;
  let csi: CsiClient;
  let copies: ReturnType<typeof lazyTopologyCopies>;

  before(async () => {
    sandbox = await startTestSandbox();
    kube = new KubeJsonClient(sandbox.kubeConfig);
    csi = await CsiClient.connect({ endpoint: sandbox.csiEndpoint, timeoutMs: 2000 });
    copies = lazyTopologyCopies({
      kubeConfig: sandbox.kubeConfig,
      json: kube,
      log: createLogger({ name: "test", level: "silent" }),
    });
  });
  /** Capacity tracking in `namespace` on the topology copies, with what a test adds. */
  const tracking = (extra: Partial<ConstructorParameters<typeof CapacityController>[0]> = {}) =>
    new CapacityController({
      kube,
      csi,
      driverName,
      namespace,
      forImmediateBinding: false,
      topology: copies.get,
      ...extra,
    });

  after(async () => {
    await copies.stop();
    csi.close();
    await kube.close();
    await sandbox.close();
  });

  it("a NAMESPACE that does not exist fails the class sync at once with the API's reason, not after five 'lost races'", async () => {
    await sandbox.admin.seed([lateBindingClass("gold")]);
    const capacity = tracking({ namespace: "nowhere" });
    await sandbox.admin.resetCounters();
    await assert.rejects(capacity.syncClass("gold"), /namespaces "nowhere" not found/);
    const counters = await sandbox.admin.counters();
    assert.equal(counters["create csistoragecapacities"], 1, "one create tried, once");
  });

  it("a resync of three classes lists no Node or CSINode; a new segment label reaches every class's objects", async () => {
    await sandbox.admin.seed(["gold", "silver", "bronze"].map(lateBindingClass));
    const capacity = tracking();
    const topologyKey = (await kube.get<CSINode>(csiNodes, nodeName)).spec?.drivers?.[0]?.topologyKeys?.[0];
    assert.ok(topologyKey, "the sandbox's CSINode names a topology key");
    const segmentsByClass = async () => {
      const list = await kube.list<CSIStorageCapacity>(csiStorageCapacities, { namespace });
      const out: Record<string, string[]> = {};
      for (const c of list.items) {
        const segments = out[c.storageClassName] ?? [];
        segments.push(c.nodeTopology?.matchLabels?.[topologyKey] ?? "?");
        out[c.storageClassName] = segments.sort();
      }
      return out;
    };

    await capacity.resync();
    const nodeNames = (await kube.list<Node>(nodes)).items.map((n) => n.metadata.name).sort();
    assert.ok(nodeNames.includes(nodeName));
    assert.deepEqual(await segmentsByClass(), { bronze: nodeNames, gold: nodeNames, silver: nodeNames });
    await sandbox.admin.resetCounters();
    await capacity.resync();
    const counters = await sandbox.admin.counters();
    assert.equal(counters["list nodes"] ?? 0, 0, "no Node list: the copy answers");
    assert.equal(counters["list csinodes"] ?? 0, 0, "no CSINode list: the copy answers");

    // The controller learns the node's labels, then they change: one event makes every class move.
    const node = await kube.get<Node>(nodes, nodeName);
    await capacity.handleEvent(nodeEvent(node));
    const moved = await kube.patch<Node>(
      nodes,
      nodeName,
      undefined,
      { metadata: { labels: { [topologyKey]: "elsewhere" } } },
      "merge",
    );
    await capacity.handleEvent(nodeEvent(moved));
    const now = nodeNames.map((n) => (n === nodeName ? "elsewhere" : n)).sort();
    assert.deepEqual(await segmentsByClass(), { bronze: now, gold: now, silver: now });

    // An event the copy never reaches (a revision ahead of the store): its syncs list instead.
    await sandbox.admin.resetCounters();
    const ahead = {
      ...moved,
      metadata: {
        ...moved.metadata,
        resourceVersion: "999999999",
        labels: { ...moved.metadata.labels, [topologyKey]: "ahead" },
      },
    };
    await capacity.handleEvent(nodeEvent(ahead));
    assert.equal(
      (await sandbox.admin.counters())["list nodes"],
      3,
      "one list per class, as before the copies",
    );
    assert.deepEqual(
      await segmentsByClass(),
      { bronze: now, gold: now, silver: now },
      "what is stored counts",
    );
  });

  it("a Node label change takes the classes it refreshes from the provisioner's class copy: no list of classes", async () => {
    await sandbox.admin.seed([lateBindingClass("platinum")]);
    const classCopy = storageClassCopyFromEnv(
      {},
      { kubeConfig: sandbox.kubeConfig, json: kube, log: createLogger({ name: "test", level: "silent" }) },
    );
    assert.ok(classCopy, "the class copy is on by default");
    try {
      assert.ok(await classCopy.get().whenSynced(10_000), "the class copy syncs");
      const capacity = tracking({ storageClasses: classCopy.get });
      const topologyKey = (await kube.get<CSINode>(csiNodes, nodeName)).spec?.drivers?.[0]?.topologyKeys?.[0];
      assert.ok(topologyKey);
      await capacity.handleEvent(nodeEvent(await kube.get<Node>(nodes, nodeName)));
      const moved = await kube.patch<Node>(
        nodes,
        nodeName,
        undefined,
        { metadata: { labels: { [topologyKey]: "from-copy" } } },
        "merge",
      );
      await sandbox.admin.resetCounters();
      const reports = await capacity.handleEvent(nodeEvent(moved));
      assert.equal((await sandbox.admin.counters())["list storageclasses"] ?? 0, 0);
      assert.ok(
        reports.some((r) => /platinum/.test(JSON.stringify(r))),
        JSON.stringify(reports),
      );
      const platinum = (
        await kube.list<CSIStorageCapacity>(csiStorageCapacities, { namespace })
      ).items.filter((c) => c.storageClassName === "platinum");
      assert.ok(
        platinum.some((c) => c.nodeTopology?.matchLabels?.[topologyKey] === "from-copy"),
        JSON.stringify(platinum.map((c) => c.nodeTopology)),
      );
    } finally {
      await classCopy.stop();
    }
  });
});
