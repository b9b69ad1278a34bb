// The sandbox pod garbage collector: which pods it force deletes (a table)
// and that it does so against the real sandbox API server, where pod
// deletion is graceful and no kubelet would ever finish these.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { KubeConfig } from "@kubernetes/client-node";
import { type ApiServerHandle, startApiServer } from "../../sandbox/apiserver/server.ts";
import { writeSandboxKubeconfig } from "../../sandbox/kubeconfig.ts";
import { outOfServiceTaint, podsToCollect } from "../../sandbox/podgc/decide.ts";
import { SandboxPodGc } from "../../sandbox/podgc/podgc.ts";
import { isNotFound } from "../../shared/kube/api-errors.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { nodes, pods } from "../../shared/kube/resources.ts";
import type { Node, Pod } from "../../shared/kube/types.ts";

function node(name: string, ready: boolean, taints: { key: string; effect: string }[] = []): Node {
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name },
    spec: { taints },
    status: { conditions: [{ type: "Ready", status: ready ? "True" : "False" }] },
  };
}

function pod(name: string, nodeName: string | undefined, deleting: boolean): Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace: "default",
      ...(deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}),
    },
    spec: { ...(nodeName ? { nodeName } : {}) },
  };
}

describe("podsToCollect", () => {
  const oos = [{ key: outOfServiceTaint, effect: "NoExecute" }];
  const rows: { name: string; pods: Pod[]; nodes: Node[]; want: string[] }[] = [
    {
      name: "a running pod on a Ready node stays",
      pods: [pod("a", "n1", false)],
      nodes: [node("n1", true)],
      want: [],
    },
    {
      name: "a terminating pod on a Ready node is its kubelet's",
      pods: [pod("a", "n1", true)],
      nodes: [node("n1", true, oos)],
      want: [],
    },
    {
      name: "a terminating pod on a NotReady node without the taint waits",
      pods: [pod("a", "n1", true)],
      nodes: [node("n1", false)],
      want: [],
    },
    {
      name: "a terminating pod on a NotReady out-of-service node goes",
      pods: [pod("a", "n1", true), pod("b", "n1", false)],
      nodes: [node("n1", false, oos)],
      want: ["a:terminating-out-of-service"],
    },
    {
      name: "a terminating pod never scheduled goes",
      pods: [pod("a", undefined, true), pod("b", undefined, false)],
      nodes: [],
      want: ["a:unscheduled-terminating"],
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const got = podsToCollect(row.pods, row.nodes, new Map(), 0, 40_000);
      assert.deepEqual(
        got.map((c) => `${c.pod.metadata.name}:${c.reason}`),
        row.want,
      );
    });
  }

  it("orphans go once their node has been missing for the quarantine", () => {
    const missing = new Map<string, number>();
    const p = [pod("a", "gone", false)];
    assert.deepEqual(podsToCollect(p, [], missing, 1000, 40_000), []);
    assert.equal(missing.get("gone"), 1000);
    assert.deepEqual(podsToCollect(p, [], missing, 30_000, 40_000), []);
    assert.deepEqual(
      podsToCollect(p, [], missing, 41_000, 40_000).map((c) => c.reason),
      ["orphaned"],
    );
    // A node that comes back is no longer missing.
    podsToCollect(p, [node("gone", true)], missing, 42_000, 40_000);
    assert.equal(missing.has("gone"), false);
  });
});

describe("sandbox pod gc over the API", () => {
  let dir: string;
  let api: ApiServerHandle;
  let kube: KubeJsonClient;
  let gc: SandboxPodGc;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "ksf-podgc-"));
    api = await startApiServer({ gracefulPodDeletion: true });
    await writeSandboxKubeconfig(join(dir, "kubeconfig"), api.url);
    const kc = new KubeConfig();
    kc.loadFromFile(join(dir, "kubeconfig"));
    kube = new KubeJsonClient(kc);
    gc = new SandboxPodGc({ kubeConfig: kc, periodMs: 100, quarantineMs: 300 });
    await gc.start();
  });
  after(async () => {
    await gc.stop();
    await kube.close();
    await api.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function gone(name: string): Promise<void> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      try {
        await kube.get(pods, name, "default");
      } catch (err) {
        if (isNotFound(err)) return;
        throw err;
      }
      if (Date.now() > deadline) assert.fail(`pod ${name} is still there`);
      await sleep(50);
    }
  }

  const createPod = (name: string, nodeName: string) =>
    kube.create<Pod>(pods, {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name, namespace: "default" },
      spec: { nodeName, containers: [{ name: "c", image: "busybox" }] },
    });

  it("force deletes a terminating pod of a shut-down node once it carries the out-of-service taint, marked Failed first", async () => {
    const phases: string[] = [];
    const unsubscribe = api.store.subscribe((c) => {
      if (c.object.metadata.name === "stuck" && c.type !== "ADDED")
        phases.push(`${c.type} ${(c.object.status as { phase?: string } | undefined)?.phase}`);
    });
    await kube.create(nodes, {
      ...node("down", false),
      metadata: { name: "down" },
    });
    await createPod("stuck", "down");
    const marked = await kube.delete(pods, "stuck", "default");
    assert.ok(marked?.metadata.deletionTimestamp);
    await sleep(400);
    assert.ok(await kube.get(pods, "stuck", "default"), "without the taint the pod waits for its kubelet");
    const n = await kube.get<Node>(nodes, "down");
    await kube.replace(nodes, {
      ...n,
      spec: { taints: [{ key: outOfServiceTaint, value: "nodeshutdown", effect: "NoExecute" }] },
    });
    try {
      await gone("stuck");
    } finally {
      unsubscribe();
    }
    // The graceful DELETE marks it; the gc writes Failed, then force deletes it.
    assert.deepEqual(phases, ["MODIFIED Pending", "MODIFIED Failed", "DELETED Failed"]);
  });

  it("marks an orphan Failed with DisruptionTarget, then deletes it", async () => {
    const states: { type: string; phase?: string; reason?: string }[] = [];
    const unsubscribe = api.store.subscribe((c) => {
      if (c.object.metadata.name !== "orphan") return;
      const status = c.object.status as
        | { phase?: string; conditions?: { type: string; reason: string }[] }
        | undefined;
      states.push({
        type: c.type,
        phase: status?.phase,
        reason: status?.conditions?.find((x) => x.type === "DisruptionTarget")?.reason,
      });
    });
    try {
      await createPod("orphan", "never-existed");
      await gone("orphan");
    } finally {
      unsubscribe();
    }
    assert.deepEqual(
      states.map((x) => [x.type, x.phase, x.reason]),
      [
        ["ADDED", "Pending", undefined],
        ["MODIFIED", "Failed", "DeletionByPodGC"],
        ["DELETED", "Failed", "DeletionByPodGC"],
      ],
    );
  });
});
