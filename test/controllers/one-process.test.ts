// Several controller functions in one process (FUNCTION=controllers): the
// host hands each event to every controller and answers once all are done,
// CONTROLLERS picks them, and the process, fed one event per change, does the
// work of the separate functions on the sandbox: a claim provisioned, bound
// and, once deleted, its volume gone.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { controllersFromEnv, HOSTABLE } from "../../functions/controllers/main.ts";
import { FUNCTION_NAMES } from "../../functions/serve.ts";
import { combineControllers, hostControllers } from "../../shared/http/combined-controller.ts";
import type { Controller, ControllerEvent } from "../../shared/http/controller-function.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import {
  csiNodes,
  csiStorageCapacities,
  namespaces,
  nodes,
  persistentVolumeClaims,
  persistentVolumes,
  storageClasses,
} from "../../shared/kube/resources.ts";
import type {
  CSINode,
  CSIStorageCapacity,
  Node,
  PersistentVolume,
  PersistentVolumeClaim,
  StorageClass,
} from "../../shared/kube/types.ts";
import { envOf, field, loadManifests, servingContainer } from "../deploy/manifests.ts";
import { eventually } from "../helpers/eventually.ts";
import { type FunctionProcess, startFunctionProcess } from "../helpers/function-process.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";

const event: ControllerEvent = { action: "add", kind: "PersistentVolumeClaim", apiVersion: "v1", name: "c" };

/** A controller that answers after `ms`, or fails, and records what it saw. */
function recording(name: string, ms: number, fail?: Error) {
  const seen: string[] = [];
  let finished = 0;
  const controller: Controller = {
    async handleEvent(e) {
      seen.push(e.name);
      await new Promise((r) => setTimeout(r, ms));
      finished++;
      if (fail) throw fail;
      return [{ object: name }];
    },
    async resync() {
      return { [`${name}Writes`]: 1 };
    },
  };
  return { controller, seen, finished: () => finished };
}

describe("hostControllers", () => {
  it("hands each event to every controller and answers with all their reports", async () => {
    const a = recording("a", 5);
    const b = recording("b", 1);
    const host = hostControllers({ a: a.controller, b: b.controller });
    assert.deepEqual(await host.handleEvent(event), [{ object: "a" }, { object: "b" }]);
    assert.deepEqual([a.seen, b.seen], [["c"], ["c"]]);
  });

  it("a failure is the answer only once every controller is done with the event", async () => {
    const failing = recording("failing", 1, new Error("lost"));
    const slow = recording("slow", 40);
    const host = hostControllers({ failing: failing.controller, slow: slow.controller });
    await assert.rejects(host.handleEvent(event), /lost/);
    assert.equal(slow.finished(), 1, "the slow controller finished before the answer");
  });

  it("a resync runs every pass and reports each under its name", async () => {
    const host = hostControllers({ a: recording("a", 0).controller, b: recording("b", 0).controller });
    assert.deepEqual(await host.resync(), { a: { aWrites: 1 }, b: { bWrites: 1 } });
  });

  it("hosts at least one", () => assert.throws(() => hostControllers({}), /no controllers/));
});

describe("combineControllers (the provisioner and its capacity tracking)", () => {
  it("waits for every controller too, and reports the primary's resync at the top", async () => {
    const failing = recording("failing", 1, new Error("lost"));
    const slow = recording("slow", 40);
    const combined = combineControllers(failing.controller, { slow: slow.controller });
    await assert.rejects(combined.handleEvent(event), /lost/);
    assert.equal(slow.finished(), 1, "the slow controller finished before the answer");
    assert.deepEqual(await combined.resync(), { failingWrites: 1, slow: { slowWrites: 1 } });
  });
});

describe("CONTROLLERS", () => {
  it("every controller function by default: each function but admission, the webhook", () => {
    assert.deepEqual(
      controllersFromEnv({}),
      FUNCTION_NAMES.filter((name) => name !== "admission"),
    );
    assert.deepEqual(controllersFromEnv({ CONTROLLERS: "  " }), HOSTABLE);
  });
  it("a list picks some, whatever its order, spaces or repeats", () =>
    assert.deepEqual(controllersFromEnv({ CONTROLLERS: "protection, binder,binder" }), [
      "binder",
      "protection",
    ]));
  for (const bad of ["admission", "Binder", "binder,,provisioner", "controllers"])
    it(`refuses ${JSON.stringify(bad)}`, () =>
      assert.throws(
        () => controllersFromEnv({ CONTROLLERS: bad }),
        /CONTROLLERS: .* is not a controller function/,
      ));
});

const driver = "hostpath.csi.k8s.io";

/** Delivers the object's state once to the host, as the forwarder would, and returns the answer. */
async function deliverTo(
  host: FunctionProcess,
  kind: "PersistentVolumeClaim" | "PersistentVolume",
  object: object,
) {
  return deliverEvent(host, "MODIFIED", { ...object, kind, apiVersion: "v1" });
}

async function deliverEvent(host: FunctionProcess, type: "ADDED" | "MODIFIED", object: object) {
  const r = await fetch(`${host.url}/`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ type, object }),
  });
  assert.equal(r.status, 200, await r.clone().text());
  return (await r.json()) as { results: { synced: { object: string; outcome: string }[] }[] };
}

/** A sandbox seeded with the driver's Immediate, Delete class "fast"; an API client to it; the host once started. */
function hostOverSandbox(controllers: string, env: Record<string, string> = {}) {
  const world = {} as { sandbox: TestSandbox; kube: KubeJsonClient; host: FunctionProcess };
  before(async () => {
    world.sandbox = await startTestSandbox();
    world.kube = new KubeJsonClient(world.sandbox.kubeConfig);
    await world.sandbox.admin.seed([
      {
        apiVersion: "storage.k8s.io/v1",
        kind: "StorageClass",
        metadata: { name: "fast" },
        provisioner: driver,
        reclaimPolicy: "Delete",
        volumeBindingMode: "Immediate",
      },
    ]);
    await world.sandbox.admin.resetCounters();
    world.host = await startFunctionProcess("controllers", {
      KUBECONFIG: world.sandbox.kubeconfigPath,
      CSI_ENDPOINT: world.sandbox.csiEndpoint,
      DRIVER_NAME: driver,
      CONTROLLERS: controllers,
      ...env,
    });
  });
  after(async () => {
    await world.host?.stop();
    await world.kube?.close();
    await world.sandbox?.close();
  });
  return world;
}

describe("FUNCTION=controllers as a process over the sandbox", () => {
  const world = hostOverSandbox("binder,provisioner,protection");
  const deliver = (kind: "PersistentVolumeClaim" | "PersistentVolume", object: object) =>
    deliverTo(world.host, kind, object);

  const claim = (): Promise<PersistentVolumeClaim> =>
    world.kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "hosted", "default");

  it("is ready once every hosted controller is (the provisioner's driver answers Probe)", async () => {
    assert.equal((await fetch(`${world.host.url}/readyz`)).status, 200);
  });

  it("one delivery per change does the binder's, the provisioner's and protection's work", async () => {
    await world.kube.create(persistentVolumeClaims, {
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: { name: "hosted", namespace: "default" },
      spec: {
        accessModes: ["ReadWriteOnce"],
        resources: { requests: { storage: "1Gi" } },
        storageClassName: "fast",
      },
    });
    // Each change is delivered once, until the claim is Bound: every controller answers every delivery.
    const outcomes: string[] = [];
    for (let i = 0; i < 10 && (await claim()).status?.phase !== "Bound"; i++) {
      const answer = await deliver("PersistentVolumeClaim", await claim());
      outcomes.push(...answer.results.flatMap((r) => r.synced.map((s) => `${s.object}: ${s.outcome}`)));
      const name = (await claim()).spec.volumeName ?? `pvc-${(await claim()).metadata.uid}`;
      const pv = await world.kube.get<PersistentVolume>(persistentVolumes, name).catch(() => undefined);
      if (pv) await deliver("PersistentVolume", pv);
    }
    const bound = await claim();
    assert.equal(bound.status?.phase, "Bound", outcomes.join("\n"));
    assert.ok(
      bound.metadata.finalizers?.includes("kubernetes.io/pvc-protection"),
      "protection added its finalizer",
    );
    assert.ok(
      outcomes.some((o) => /provisioned volume pvc-/.test(o)),
      outcomes.join("\n"),
    );

    // Deleted: protection lets the claim go, the binder releases the volume, the provisioner deletes it.
    const volumeName = bound.spec.volumeName as string;
    await world.kube.delete(persistentVolumeClaims, "hosted", "default");
    for (let i = 0; i < 10; i++) {
      const left = await claim().catch(() => undefined);
      if (left) await deliver("PersistentVolumeClaim", left);
      else await deliver("PersistentVolumeClaim", { ...bound, metadata: { ...bound.metadata } });
      const pv = await world.kube.get<PersistentVolume>(persistentVolumes, volumeName).catch(() => undefined);
      if (!pv && !left) break;
      if (pv) await deliver("PersistentVolume", pv);
    }
    await assert.rejects(claim(), /404|not found/i);
    await assert.rejects(world.kube.get(persistentVolumes, volumeName), /404|not found/i);
    assert.equal((await world.sandbox.csi.volumes()).length, 0, "the backing volume is gone");
  });

  it("POST /resync runs each hosted controller's pass and reports it by name", async () => {
    const r = await fetch(`${world.host.url}/resync`, { method: "POST" });
    assert.equal(r.status, 200);
    const body = (await r.json()) as Record<string, unknown>;
    const text = JSON.stringify(body);
    for (const name of ["binder", "provisioner", "protection"]) assert.match(text, new RegExp(`"${name}"`));
    assert.doesNotMatch(text, /"attacher"/);
  });
});

describe("FUNCTION=controllers keeps the copies its controllers share once", () => {
  const world = hostOverSandbox("binder,provisioner,attacher");

  it("one watch of the PVs for the binder and the attacher, one of the classes for the binder and the provisioner", async () => {
    const { sandbox, kube } = world;
    const claim = await kube.create<PersistentVolumeClaim>(persistentVolumeClaims, {
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: { name: "shared", namespace: "default" },
      spec: {
        accessModes: ["ReadWriteOnce"],
        resources: { requests: { storage: "1Gi" } },
        storageClassName: "fast",
      },
    });
    // A claim event: the binder and the provisioner each read its class, which starts the class copy.
    await deliverTo(world.host, "PersistentVolumeClaim", claim);
    await eventually("the class copy's watch", async () =>
      (await sandbox.admin.counters())["watch storageclasses"] ? true : undefined,
    );
    // Give a second watch, if one were started, the time to show.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const seen = await sandbox.admin.counters();
    assert.equal(seen["watch persistentvolumes"], 1, JSON.stringify(seen));
    assert.equal(seen["list persistentvolumes"], 1, JSON.stringify(seen));
    assert.equal(seen["watch storageclasses"], 1, JSON.stringify(seen));
    assert.equal(seen["list storageclasses"], 1, JSON.stringify(seen));
  });
});

describe("FUNCTION=controllers of a managed cluster with capacity tracking, as components/one-process-managed-capacity sets it up", () => {
  const rendered = loadManifests(
    [
      "components/capacity",
      "components/one-process",
      "components/managed",
      "components/one-process-managed-capacity",
    ],
    { unmatched: [] },
  );
  const service = rendered.find((m) => m.kind === "Service" && m.metadata.name === "controllers");
  assert.ok(service);
  const env = envOf(servingContainer(service));
  const namespace = env.get("NAMESPACE") ?? "";
  const world = hostOverSandbox(env.get("CONTROLLERS") ?? "", {
    ENABLE_CAPACITY: env.get("ENABLE_CAPACITY") ?? "",
    NAMESPACE: namespace,
  });
  const source = rendered.find(
    (m) => m.kind === "ApiServerSource" && m.metadata.name === "controllers-events",
  );
  const forwarded = ((field(source!, "spec.resources") ?? []) as { apiVersion: string; kind: string }[]).map(
    (r) => `${r.apiVersion}/${r.kind}`,
  );

  /** Capacity objects of class "tracked", by segment. */
  async function segments(): Promise<string[]> {
    const list = await world.kube.list<CSIStorageCapacity>(csiStorageCapacities, { namespace });
    return list.items
      .filter((c) => c.storageClassName === "tracked")
      .map((c) => Object.values(c.nodeTopology?.matchLabels ?? {}).join(","))
      .sort();
  }

  it("a forwarded Node with a new topology segment gets that segment its capacity object", async () => {
    const { kube } = world;
    assert.deepEqual(controllersFromEnv({ CONTROLLERS: env.get("CONTROLLERS") }), [
      "provisioner",
      "attacher",
      "resizer",
    ]);
    await kube.create(namespaces, { apiVersion: "v1", kind: "Namespace", metadata: { name: namespace } });
    const tracked = await kube.create<StorageClass>(storageClasses, {
      apiVersion: "storage.k8s.io/v1",
      kind: "StorageClass",
      metadata: { name: "tracked" },
      provisioner: driver,
      volumeBindingMode: "WaitForFirstConsumer",
    });
    assert.ok(forwarded.includes("storage.k8s.io/v1/StorageClass"));
    await deliverEvent(world.host, "ADDED", tracked);
    const before = await eventually("a capacity object per node", async () => {
      const s = await segments();
      return s.length === 2 ? s : undefined;
    });
    assert.deepEqual(before, ["sandbox-node", "sandbox-node-2"]);

    // A third node of the driver, in a segment of its own: only its Node event is delivered.
    const first = await kube.get<CSINode>(csiNodes, "sandbox-node");
    const topologyKey = first.spec.drivers[0]?.topologyKeys?.[0] ?? "";
    assert.ok(topologyKey);
    await kube.create(csiNodes, {
      apiVersion: "storage.k8s.io/v1",
      kind: "CSINode",
      metadata: { name: "sandbox-node-3" },
      spec: { drivers: [{ name: driver, nodeID: "sandbox-node-3", topologyKeys: [topologyKey] }] },
    });
    const node = await kube.create<Node>(nodes, {
      apiVersion: "v1",
      kind: "Node",
      metadata: { name: "sandbox-node-3", labels: { [topologyKey]: "sandbox-node-3" } },
    });
    assert.ok(forwarded.includes("v1/Node"), `the source forwards Nodes: ${forwarded.join(", ")}`);
    await deliverEvent(world.host, "ADDED", node);
    const after = await eventually("a capacity object for the new segment", async () => {
      const s = await segments();
      return s.length === 3 ? s : undefined;
    });
    assert.deepEqual(after, ["sandbox-node", "sandbox-node-2", "sandbox-node-3"]);
  });
});
