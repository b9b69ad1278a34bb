// The protection function over HTTP against the real sandbox API server (with
// graceful pod deletion, as a kubelet-backed cluster has it): forwarded watch
// events in, finalizers out, claims and PVs gone once nothing holds them.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, beforeEach, describe, it } from "node:test";
import { KubeConfig } from "@kubernetes/client-node";
import request from "supertest";
import { createProtectionApp } from "../../functions/protection/app.ts";
import { type ApiServerHandle, startApiServer } from "../../sandbox/apiserver/server.ts";
import { sandboxKubeconfig, writeSandboxKubeconfig } from "../../sandbox/kubeconfig.ts";
import { getOptional } from "../../shared/kube/api-errors.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { persistentVolumeClaims, persistentVolumes, pods } from "../../shared/kube/resources.ts";
import type { KubeObject, PersistentVolume, PersistentVolumeClaim, Pod } from "../../shared/kube/types.ts";
import { pvcProtectionFinalizer, pvProtectionFinalizer } from "../../shared/kube/well-known.ts";
import { createLogger } from "../../shared/log.ts";
import { createMetricsRegistry, type Registry } from "../../shared/metrics.ts";
import { LivePodLists } from "../../shared/protection/runtime/live-pod-lists.ts";
import { ProtectionController } from "../../shared/protection/runtime/protection-controller.ts";
import { protectionMetrics } from "../../shared/protection/runtime/protection-metrics.ts";
import { startFunctionProcess } from "../helpers/function-process.ts";

let api: ApiServerHandle;
let kube: KubeJsonClient;
let registry: Registry;
let app: ReturnType<typeof createProtectionApp>;

before(async () => {
  // Without kube-apiserver's StorageObjectInUseProtection: the function itself must add the finalizers.
  api = await startApiServer({
    gracefulPodDeletion: true,
    disableAdmissionPlugins: ["StorageObjectInUseProtection"],
  });
  const kc = new KubeConfig();
  kc.loadFromString(sandboxKubeconfig(api.url));
  kube = new KubeJsonClient(kc);
});
after(async () => {
  await kube.close();
  await api.close();
});
beforeEach(async () => {
  await fetch(`${api.url}/_sandbox/reset`, { method: "POST" });
  // A registry per test, so the counters each test reads are its own.
  registry = createMetricsRegistry({ defaultMetrics: false });
  app = createProtectionApp({
    controller: new ProtectionController({ kube, metrics: protectionMetrics(registry) }),
    logger: createLogger({ name: "protection", level: "silent" }),
    metrics: registry,
  });
});

interface SyncAnswer {
  status: number;
  outcomes: string[];
  body: Record<string, unknown>;
  retryAfter: string | undefined;
}

async function send(
  type: "ADDED" | "MODIFIED" | "DELETED",
  object: KubeObject | undefined,
): Promise<SyncAnswer> {
  const r = await request(app)
    .post("/")
    .set("content-type", "application/json")
    .send(JSON.stringify({ type, object }));
  const results = (r.body.results ?? []) as { synced?: { object: string; outcome: string }[] }[];
  return {
    status: r.status,
    body: r.body,
    retryAfter: r.headers["retry-after"],
    outcomes: results.flatMap((x) => (x.synced ?? []).map((s) => `${s.object}: ${s.outcome}`)),
  };
}

function claim(name: string, finalizers = [pvcProtectionFinalizer]): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace: "default", finalizers },
    spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
  };
}

function pod(name: string, claimName: string, nodeName = "node-a"): Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "default" },
    spec: {
      nodeName,
      containers: [{ name: "app", image: "busybox" }],
      volumes: [{ name: "data", persistentVolumeClaim: { claimName } }],
    },
  };
}

function volume(name: string, finalizers = [pvProtectionFinalizer]): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name, finalizers },
    spec: {
      accessModes: ["ReadWriteOnce"],
      capacity: { storage: "1Gi" },
      csi: { driver: "hostpath.csi.k8s.io", volumeHandle: name },
    },
  };
}

/** DELETE with DeleteOptions gracePeriodSeconds (which the JSON client does not send); the pod if it is still there. */
async function deletePod(name: string, gracePeriodSeconds?: number): Promise<Pod | undefined> {
  const res = await fetch(`${api.url}/api/v1/namespaces/default/pods/${name}`, {
    method: "DELETE",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ apiVersion: "v1", kind: "DeleteOptions", gracePeriodSeconds }),
  });
  assert.equal(res.status, 200, await res.text());
  return getOptional(() => kube.get<Pod>(pods, name, "default"));
}

async function deleting<T extends KubeObject>(
  r: typeof persistentVolumeClaims,
  name: string,
  namespace?: string,
): Promise<T> {
  const marked = await kube.delete(r, name, namespace);
  assert.ok(marked?.metadata.deletionTimestamp, `${name} is held by its finalizer`);
  return marked as T;
}

async function metric(name: string, kind: string): Promise<number> {
  const m = await registry.getSingleMetric(name)?.get();
  return m?.values.find((v) => v.labels.kind === kind)?.value ?? 0;
}

describe("pvc-protection", () => {
  it("an unused claim being deleted loses its finalizer and is gone", async () => {
    await kube.create(persistentVolumeClaims, claim("unused"));
    const marked = await deleting<PersistentVolumeClaim>(persistentVolumeClaims, "unused", "default");
    const r = await send("MODIFIED", marked);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.outcomes, [`claim default/unused: removed ${pvcProtectionFinalizer}: no pod uses it`]);
    assert.equal(await getOptional(() => kube.get(persistentVolumeClaims, "unused", "default")), undefined);
    assert.equal(await metric("protection_finalizers_removed_total", "PersistentVolumeClaim"), 1);
    // Told again (a duplicate delivery): nothing left to do, nothing written.
    const again = await send("MODIFIED", marked);
    assert.deepEqual(again.outcomes, ["claim default/unused: claim is gone"]);
    const text = (await request(app).get("/metrics")).text;
    assert.match(text, /protection_finalizers_removed_total\{kind="PersistentVolumeClaim"\} 1/);
  });

  it("a claim used by a scheduled pod stays until the pod is gone, then goes", async () => {
    await kube.create(persistentVolumeClaims, claim("used"));
    await kube.create(pods, pod("user", "used"));
    const marked = await deleting<PersistentVolumeClaim>(persistentVolumeClaims, "used", "default");
    const kept = await send("MODIFIED", marked);
    assert.deepEqual(kept.outcomes, [
      `claim default/used: kept ${pvcProtectionFinalizer}: used by pod default/user`,
    ]);
    const still = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "used", "default");
    assert.deepEqual(still.metadata.finalizers, [pvcProtectionFinalizer]);

    // A running pod's update frees nothing and reads no claim.
    const running = await kube.get<Pod>(pods, "user", "default");
    assert.deepEqual((await send("MODIFIED", running)).outcomes, [
      "pod default/user: scheduled and not terminated: frees no claim",
    ]);

    // Graceful deletion: the pod is terminating but still there, so it still holds the claim.
    const terminating = await deletePod("user");
    assert.ok(terminating?.metadata.deletionTimestamp, "a scheduled pod is deleted gracefully");
    assert.deepEqual((await send("MODIFIED", terminating)).outcomes, [
      `claim default/used: kept ${pvcProtectionFinalizer}: used by pod default/user`,
    ]);
    assert.ok(await getOptional(() => kube.get(persistentVolumeClaims, "used", "default")));

    // Gone for good (the kubelet's grace-0 delete): its DELETED event frees the claim.
    assert.equal(await deletePod("user", 0), undefined);
    const freed = await send("DELETED", terminating);
    assert.deepEqual(freed.outcomes, [
      `claim default/used: removed ${pvcProtectionFinalizer}: no pod uses it`,
    ]);
    assert.equal(await getOptional(() => kube.get(persistentVolumeClaims, "used", "default")), undefined);
  });

  it("a finished pod that is not deleted still holds its claim; an unscheduled one never does", async () => {
    await kube.create(persistentVolumeClaims, claim("done"));
    const finished = await kube.create(pods, pod("job", "done"));
    await kube.replace(pods, { ...finished, status: { phase: "Succeeded" } }, { subresource: "status" });
    await kube.create(persistentVolumeClaims, claim("pending"));
    await kube.create(pods, {
      ...pod("waiting", "pending"),
      spec: { ...pod("waiting", "pending").spec, nodeName: undefined },
    } as Pod);
    await deleting(persistentVolumeClaims, "done", "default");
    await deleting(persistentVolumeClaims, "pending", "default");
    const job = await kube.get<Pod>(pods, "job", "default");
    assert.deepEqual((await send("MODIFIED", job)).outcomes, [
      `claim default/done: kept ${pvcProtectionFinalizer}: used by pod default/job`,
    ]);
    const waiting = await kube.get<Pod>(pods, "waiting", "default");
    assert.deepEqual((await send("MODIFIED", waiting)).outcomes, [
      `claim default/pending: removed ${pvcProtectionFinalizer}: no pod uses it`,
    ]);
  });

  it("a claim without the finalizer gets it; a protected claim's event reads nothing", async () => {
    const bare = await kube.create(persistentVolumeClaims, claim("bare", []));
    assert.deepEqual((await send("ADDED", bare)).outcomes, [
      `claim default/bare: added ${pvcProtectionFinalizer}`,
    ]);
    const now = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "bare", "default");
    assert.deepEqual(now.metadata.finalizers, [pvcProtectionFinalizer]);
    api.counters.clear();
    assert.deepEqual((await send("MODIFIED", now)).outcomes, [
      "claim default/bare: protected (the event's copy)",
    ]);
    assert.deepEqual([...api.counters.keys()], [], "no API request");
    assert.equal(await metric("protection_finalizers_added_total", "PersistentVolumeClaim"), 1);
  });

  it("a write that loses a race is decided again on fresh state", async () => {
    await kube.create(persistentVolumeClaims, claim("raced"));
    const marked = await deleting<PersistentVolumeClaim>(persistentVolumeClaims, "raced", "default");
    // Our patch (decided on the event's copy) waits 400 ms at the server; meanwhile someone else changes the claim.
    api.faults.set({ latencyMs: 400, verbs: ["patch"], resources: ["persistentvolumeclaims"] });
    api.counters.clear();
    const sync = send("MODIFIED", marked);
    await new Promise((resolve) => setTimeout(resolve, 150));
    const current = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "raced", "default");
    await kube.replace(persistentVolumeClaims, {
      ...current,
      metadata: { ...current.metadata, labels: { touched: "yes" } },
    });
    const r = await sync;
    api.faults.clear();
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.outcomes, [`claim default/raced: removed ${pvcProtectionFinalizer}: no pod uses it`]);
    assert.equal(api.counters.get("patch persistentvolumeclaims"), 1, "the tested patch lost (422)");
    assert.equal(
      api.counters.get("update persistentvolumeclaims"),
      2,
      "the other writer's PUT, then ours on the fresh read",
    );
    assert.equal(api.counters.get("list pods"), 2, "each attempt proves non-use on its own live list");
    assert.equal(await getOptional(() => kube.get(persistentVolumeClaims, "raced", "default")), undefined);
  });
});

describe("pvc-protection: reads", () => {
  it("a claim's event is decided on the event's own copy: no GET of the claim, one live pod list, one write", async () => {
    await kube.create(persistentVolumeClaims, claim("copied"));
    const marked = await deleting<PersistentVolumeClaim>(persistentVolumeClaims, "copied", "default");
    api.counters.clear();
    const r = await send("MODIFIED", marked);
    assert.deepEqual(r.outcomes, [`claim default/copied: removed ${pvcProtectionFinalizer}: no pod uses it`]);
    assert.deepEqual(Object.fromEntries(api.counters), {
      "list pods": 1,
      "patch persistentvolumeclaims": 1,
    });
  });

  it("an event's copy that is not the stored claim (a forged deletion) changes nothing: the patch's tests fail, the retry reads the truth", async () => {
    const stored = await kube.create(persistentVolumeClaims, claim("forged"));
    const forged = { ...stored, metadata: { ...stored.metadata, deletionTimestamp: "2026-01-01T00:00:00Z" } };
    api.counters.clear();
    const r = await send("MODIFIED", forged);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const still = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "forged", "default");
    assert.deepEqual(still.metadata.finalizers, [pvcProtectionFinalizer], "the finalizer stays");
    assert.equal(still.metadata.deletionTimestamp, undefined);
    assert.equal(api.counters.get("patch persistentvolumeclaims"), 1, "the tested patch was refused");
    assert.ok((api.counters.get("get persistentvolumeclaims") ?? 0) >= 1, "the retry read the claim");
    assert.equal(api.counters.get("update persistentvolumeclaims") ?? 0, 0, "and wrote nothing");
  });

  it("a forged PV copy (deleting, not Bound) changes nothing either", async () => {
    const stored = await kube.create(persistentVolumes, volume("forged-pv"));
    const forged = {
      ...stored,
      metadata: { ...stored.metadata, deletionTimestamp: "2026-01-01T00:00:00Z" },
      status: { phase: "Released" },
    };
    const r = await send("MODIFIED", forged);
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const still = await kube.get<PersistentVolume>(persistentVolumes, "forged-pv");
    assert.deepEqual(still.metadata.finalizers, [pvProtectionFinalizer]);
  });

  it("claims deleted together share the live pod lists, each started after the claims it serves were in hand", async () => {
    const names = ["batch-a", "batch-b", "batch-c", "batch-d", "batch-e", "batch-f"];
    const marked: PersistentVolumeClaim[] = [];
    for (const name of names) {
      await kube.create(persistentVolumeClaims, claim(name));
      marked.push(await deleting<PersistentVolumeClaim>(persistentVolumeClaims, name, "default"));
    }
    api.faults.set({ latencyMs: 150, verbs: ["list"], resources: ["pods"] });
    api.counters.clear();
    const answers = await Promise.all(marked.map((c) => send("MODIFIED", c)));
    api.faults.clear();
    for (const [i, a] of answers.entries())
      assert.deepEqual(a.outcomes, [
        `claim default/${names[i]}: removed ${pvcProtectionFinalizer}: no pod uses it`,
      ]);
    const lists = api.counters.get("list pods") ?? 0;
    assert.ok(lists >= 1 && lists < names.length, `${lists} lists for ${names.length} claims`);
    const counted = await registry.getSingleMetric("protection_live_pod_lists_total")?.get();
    assert.equal(counted?.values[0]?.value, lists);
  });

  it("a list already in flight when a claim copy arrives is not used for it: the next list is", async () => {
    const lists = new LivePodLists(kube, protectionMetrics(registry));
    await kube.create(pods, pod("early", "some-claim"));
    api.faults.set({ latencyMs: 200, verbs: ["list"], resources: ["pods"] });
    api.counters.clear();
    const first = lists.podsIn("default", performance.now());
    await new Promise((resolve) => setTimeout(resolve, 50));
    // A copy in hand only now: the list above may have been read before the claim's deletion.
    const joined = lists.podsIn("default", 0);
    const later = lists.podsIn("default", performance.now());
    const [a, b, c] = await Promise.all([first, joined, later]);
    api.faults.clear();
    assert.equal(a, b, "a caller whose copy is older than the list shares it");
    assert.notEqual(c, a, "a caller whose copy is newer waits for the next list");
    assert.equal(api.counters.get("list pods"), 2);
    assert.deepEqual(
      c.map((p) => p.metadata.name),
      ["early"],
    );
  });
});

describe("Reference mode (ApiServerSource sends only the object's name)", () => {
  function referenceEvent(action: "update" | "delete", name: string) {
    return request(app)
      .post("/")
      .set({
        "content-type": "application/json",
        "ce-specversion": "1.0",
        "ce-id": `ref-${action}-${name}`,
        "ce-source": api.url,
        "ce-type": `dev.knative.apiserver.ref.${action}`,
      })
      .send(JSON.stringify({ apiVersion: "v1", kind: "Pod", name, namespace: "default" }));
  }

  it("a pod's update is judged on the pod read from the API; a deleted pod's claims are left to the resync", async () => {
    await kube.create(persistentVolumeClaims, claim("for-unscheduled"));
    const unscheduled = pod("unscheduled", "for-unscheduled");
    delete unscheduled.spec.nodeName;
    await kube.create(pods, unscheduled);
    await deleting(persistentVolumeClaims, "for-unscheduled", "default");
    const r = await referenceEvent("update", "unscheduled");
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(
      r.body.results[0].synced.map((s: { outcome: string }) => s.outcome),
      [`removed ${pvcProtectionFinalizer}: no pod uses it`],
    );
    const gone = await referenceEvent("delete", "unscheduled");
    assert.equal(gone.status, 200);
    assert.match(gone.body.results[0].synced[0].outcome, /left to the resync/);
  });
});

describe("pv-protection", () => {
  it("a Bound PV being deleted keeps its finalizer; once Released it goes", async () => {
    const created = await kube.create(persistentVolumes, volume("pv-1"));
    await kube.replace(
      persistentVolumes,
      { ...created, status: { phase: "Bound" } },
      { subresource: "status" },
    );
    const marked = await deleting<PersistentVolume>(persistentVolumes, "pv-1");
    assert.deepEqual((await send("MODIFIED", marked)).outcomes, [
      `volume pv-1: kept ${pvProtectionFinalizer}: Bound`,
    ]);
    const bound = await kube.get<PersistentVolume>(persistentVolumes, "pv-1");
    assert.deepEqual(bound.metadata.finalizers, [pvProtectionFinalizer]);
    const released = await kube.replace(
      persistentVolumes,
      { ...bound, status: { phase: "Released" } },
      { subresource: "status" },
    );
    assert.deepEqual((await send("MODIFIED", released)).outcomes, [
      `volume pv-1: removed ${pvProtectionFinalizer}: not Bound`,
    ]);
    assert.equal(await getOptional(() => kube.get(persistentVolumes, "pv-1")), undefined);
    assert.equal(await metric("protection_finalizers_removed_total", "PersistentVolume"), 1);
    assert.equal(await metric("protection_deletions_held_total", "PersistentVolume"), 1);
  });
});

describe("resync", () => {
  it("checks every claim and PV being deleted or lacking its finalizer, and only those", async () => {
    await kube.create(persistentVolumeClaims, claim("plain", []));
    await kube.create(persistentVolumeClaims, claim("ok"));
    await kube.create(persistentVolumeClaims, claim("gone-soon"));
    await kube.create(persistentVolumeClaims, claim("held"));
    await kube.create(pods, pod("holder", "held"));
    await deleting(persistentVolumeClaims, "gone-soon", "default");
    await deleting(persistentVolumeClaims, "held", "default");
    await kube.create(persistentVolumes, volume("pv-plain", []));
    await kube.create(persistentVolumes, volume("pv-released"));
    await deleting(persistentVolumes, "pv-released");
    const r = await request(app).post("/resync");
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body.result, { claims: 3, volumes: 2, writes: 4, errors: [] });
    const left = (await kube.list<PersistentVolumeClaim>(persistentVolumeClaims)).items;
    assert.deepEqual(left.map((c) => [c.metadata.name, c.metadata.finalizers]).sort(), [
      ["held", [pvcProtectionFinalizer]],
      ["ok", [pvcProtectionFinalizer]],
      ["plain", [pvcProtectionFinalizer]],
    ]);
    const pvs = (await kube.list<PersistentVolume>(persistentVolumes)).items;
    assert.deepEqual(
      pvs.map((v) => [v.metadata.name, v.metadata.finalizers]),
      [["pv-plain", [pvProtectionFinalizer]]],
    );
  });
});

describe("bad input", () => {
  it("garbage answers 4xx and changes nothing", async () => {
    await kube.create(persistentVolumeClaims, claim("victim"));
    const before = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "victim", "default");
    for (const body of [
      "not json",
      "[1,2",
      JSON.stringify({ type: "MODIFIED" }),
      JSON.stringify({ type: "NOPE", object: {} }),
    ]) {
      const r = await request(app).post("/").set("content-type", "application/json").send(body);
      assert.equal(r.status, 400, body);
      assert.equal(typeof r.body.error, "string");
    }
    const badPod = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: "evil", namespace: "default" },
      spec: { volumes: [{ name: "d", persistentVolumeClaim: { claimName: "../../victim" } }] },
    };
    const r = await send("DELETED", badPod as KubeObject);
    assert.equal(r.status, 400);
    assert.match(String(r.body.error), /claimName/);
    const noNamespace = { ...claim("victim"), metadata: { name: "victim" } };
    const r2 = await send("MODIFIED", noNamespace as KubeObject);
    assert.equal(r2.status, 400);
    assert.match(String(r2.body.error), /namespace/);
    const after = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "victim", "default");
    assert.equal(after.metadata.resourceVersion, before.metadata.resourceVersion);
  });

  it("kinds it does not handle are acknowledged and ignored", async () => {
    const r = await send("MODIFIED", { apiVersion: "v1", kind: "Node", metadata: { name: "node-a" } });
    assert.equal(r.status, 200);
    assert.match(JSON.stringify(r.body.results), /not handled by protection/);
  });

  it("API trouble answers 503 with Retry-After, so the event is sent again", async () => {
    await kube.create(persistentVolumeClaims, claim("later"));
    const marked = await deleting<PersistentVolumeClaim>(persistentVolumeClaims, "later", "default");
    api.faults.set({ errorProbability: 1, errorCode: 503, verbs: ["list"], resources: ["pods"] });
    const r = await send("MODIFIED", marked);
    api.faults.clear();
    assert.equal(r.status, 503);
    assert.match(String(r.retryAfter), /^\d+$/);
    const kept = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "later", "default");
    assert.deepEqual(kept.metadata.finalizers, [pvcProtectionFinalizer], "no live list, no removal");
  });
});

it("`FUNCTION=protection npm run serve` serves", async () => {
  const dir = await mkdtemp(join(tmpdir(), "ksf-protection-"));
  const kubeconfig = join(dir, "kubeconfig");
  await writeSandboxKubeconfig(kubeconfig, api.url);
  const p = await startFunctionProcess("protection", { KUBECONFIG: kubeconfig });
  try {
    const r = await fetch(`${p.url}/resync`, { method: "POST" });
    assert.equal(r.status, 200);
    assert.equal(((await r.json()) as { function: string }).function, "protection");
  } finally {
    assert.equal(await p.stop(), 0);
    await rm(dir, { recursive: true, force: true });
  }
});
