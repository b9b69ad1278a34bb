// The provisioner's watched copies of every Node and CSINode: what they keep
// of each object, and, over the sandbox, that a CreateVolume request built
// from them is the one built from fresh lists, without listing either kind,
// and that a node joining later reaches the next claim's topology.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { CsiClient } from "../../shared/csi/client.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { ObjectStore } from "../../shared/kube/object-store.ts";
import type {
  CSINode,
  KubeObject,
  Node,
  PersistentVolumeClaim,
  StorageClass,
} from "../../shared/kube/types.ts";
import { createLogger } from "../../shared/log.ts";
import { defaultProvisionerOptions } from "../../shared/provisioner/options.ts";
import {
  loadCreateVolumeRequest,
  type NodeTopologyCopies,
} from "../../shared/provisioner/runtime/load-request.ts";
import {
  csiNodeDriversOnly,
  lazyTopologyCopies,
  nodeLabelsOnly,
} from "../../shared/provisioner/runtime/topology-copies.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";
import { driverName } from "../helpers/storage-system.ts";

describe("what the copies keep", () => {
  it("a Node: identity, revision and labels; not its spec and status", () => {
    const node: Node = {
      apiVersion: "v1",
      kind: "Node",
      metadata: {
        name: "n1",
        uid: "u1",
        resourceVersion: "7",
        labels: { zone: "a" },
        annotations: { x: "y" },
      },
      spec: { taints: [{ key: "k", effect: "NoSchedule" }] },
      status: { conditions: [{ type: "Ready", status: "True" }], images: [{ names: ["busybox"] }] },
    };
    assert.deepEqual(nodeLabelsOnly(node), {
      apiVersion: "v1",
      kind: "Node",
      metadata: { name: "n1", uid: "u1", resourceVersion: "7", labels: { zone: "a" } },
    });
    assert.deepEqual(nodeLabelsOnly({ apiVersion: "v1", kind: "Node", metadata: { name: "bare" } }), {
      apiVersion: "v1",
      kind: "Node",
      metadata: { name: "bare" },
    });
  });

  it("a CSINode: each driver's name, node ID and topology keys", () => {
    const csiNode: CSINode = {
      apiVersion: "storage.k8s.io/v1",
      kind: "CSINode",
      metadata: { name: "n1", resourceVersion: "3", labels: { l: "v" } },
      spec: {
        drivers: [
          { name: "a.csi", nodeID: "id-a", topologyKeys: ["zone"], allocatable: { count: 10 } },
          { name: "b.csi", nodeID: "id-b" },
        ],
      },
    };
    assert.deepEqual(csiNodeDriversOnly(csiNode), {
      apiVersion: "storage.k8s.io/v1",
      kind: "CSINode",
      metadata: { name: "n1", resourceVersion: "3" },
      spec: {
        drivers: [
          { name: "a.csi", nodeID: "id-a", topologyKeys: ["zone"] },
          { name: "b.csi", nodeID: "id-b" },
        ],
      },
    });
  });
});

describe("CreateVolume topology from the copies, over the sandbox", () => {
  let sandbox: TestSandbox;
  let kube: KubeJsonClient;
  let csi: CsiClient;
  const copies = { current: undefined as ReturnType<typeof lazyTopologyCopies> | undefined };

  before(async () => {
    sandbox = await startTestSandbox();
    kube = new KubeJsonClient(sandbox.kubeConfig);
    csi = await CsiClient.connect({ endpoint: sandbox.csiEndpoint, timeoutMs: 2000 });
  });
  after(async () => {
    await copies.current?.stop();
    csi.close();
    await kube.close();
    await sandbox.close();
  });

  const storageClass: StorageClass = {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: { name: "fast" },
    provisioner: driverName,
    volumeBindingMode: "Immediate",
  };
  const claim = (name: string): PersistentVolumeClaim => ({
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace: "default", uid: `uid-${name}` },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: "1Gi" } },
      storageClassName: "fast",
    },
  });
  const listsOfNodes = async (): Promise<number> => {
    const counters = await sandbox.admin.counters();
    return (counters["list nodes"] ?? 0) + (counters["list csinodes"] ?? 0);
  };
  const requisiteOf = async (
    name: string,
    topology?: () => ReturnType<ReturnType<typeof lazyTopologyCopies>["get"]>,
  ) => {
    const built = await loadCreateVolumeRequest(kube, {
      claim: claim(name),
      storageClass,
      pvName: `pv-${name}`,
      driverName,
      options: defaultProvisionerOptions(driverName),
      capabilities: await csi.capabilities(),
      ...(topology ? { topology } : {}),
    });
    assert.equal(built.kind, "ready", "error" in built ? built.error : built.kind);
    return built.kind === "ready" ? built.request.accessibilityRequirements : undefined;
  };

  it("the same request as from fresh lists, and neither kind listed", async () => {
    assert.ok((await csi.capabilities()).accessibilityConstraints, "the sandbox driver reports topology");
    const listed = await requisiteOf("a");
    assert.ok(listed?.requisite?.length, "a requisite topology from the lists");

    copies.current = lazyTopologyCopies({
      kubeConfig: sandbox.kubeConfig,
      json: kube,
      log: createLogger({ name: "test", level: "silent" }),
    });
    const current = copies.current;
    const first = await requisiteOf("a", current.get); // starts the copies, waits for their first lists
    assert.deepEqual(first, listed);
    const before = await listsOfNodes();
    assert.deepEqual(await requisiteOf("a", current.get), listed);
    assert.equal(await listsOfNodes(), before, "no list of nodes or CSINodes once the copies are in");
    assert.equal(current.get(), current.get(), "started once");
  });

  it("copies that are not synced (first list failing, or dropped) are not read: both kinds are listed", async () => {
    // Empty stores: read, they would say "no nodes at all".
    const unsynced = <T extends KubeObject>() => ({
      synced: false,
      whenSynced: async () => false,
      store: new ObjectStore<T>(),
    });
    const copies: NodeTopologyCopies = { nodes: unsynced<Node>(), csiNodes: unsynced<CSINode>() };
    const before = await listsOfNodes();
    const fromLists = await requisiteOf("a");
    const withCopies = await requisiteOf("a", () => copies);
    assert.deepEqual(withCopies, fromLists);
    assert.ok(withCopies?.requisite?.length);
    assert.equal(await listsOfNodes(), before + 4, "each request listed both kinds");
  });

  it("a node that joins reaches the next claim's topology", async () => {
    const current = copies.current;
    assert.ok(current, "copies from the test before");
    const [node] = current.get().nodes.store.items();
    const topologyKey = Object.keys(node?.metadata.labels ?? {}).find((k) => k !== "kubernetes.io/hostname");
    assert.ok(topologyKey, "the sandbox node's topology label");
    await sandbox.admin.seed([
      {
        apiVersion: "v1",
        kind: "Node",
        metadata: { name: "joined", labels: { "kubernetes.io/hostname": "joined", [topologyKey]: "joined" } },
        spec: {},
      },
      {
        apiVersion: "storage.k8s.io/v1",
        kind: "CSINode",
        metadata: { name: "joined" },
        spec: { drivers: [{ name: driverName, nodeID: "joined", topologyKeys: [topologyKey] }] },
      },
    ]);
    const deadline = Date.now() + 5000;
    while (!current.get().nodes.store.get("", "joined") && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 20));
    const requisite = (await requisiteOf("d", current.get))?.requisite ?? [];
    assert.ok(
      requisite.some((t) => t.segments[topologyKey] === "joined"),
      `the joined node in ${JSON.stringify(requisite)}`,
    );
    assert.deepEqual(await requisiteOf("e", current.get), await requisiteOf("e"), "still what the lists say");
  });
});
