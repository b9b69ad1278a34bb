// The binder function end to end: real HTTP events (watch events and
// ApiServerSource CloudEvents) posted to the function, real client-node and
// JSON client against the sandbox API server, objects read back.
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, beforeEach, describe, it } from "node:test";
import request from "supertest";
import { createBinderApp } from "../../functions/binder/app.ts";
import { BinderController } from "../../shared/binder/runtime/binder-controller.ts";
import type { FunctionApp } from "../../shared/http/function-app.ts";
import { EventRecorder } from "../../shared/kube/event-recorder.ts";
import { KubeJsonClient } from "../../shared/kube/json-client.ts";
import { compareQuantities } from "../../shared/kube/quantity.ts";
import { persistentVolumeClaims, persistentVolumes } from "../../shared/kube/resources.ts";
import type { PersistentVolume, PersistentVolumeClaim } from "../../shared/kube/types.ts";
import { createLogger } from "../../shared/log.ts";
import { createMetricsRegistry } from "../../shared/metrics.ts";
import { type FunctionProcess, startFunctionProcess } from "../helpers/function-process.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";

let sandbox: TestSandbox;
let kube: KubeJsonClient;
let app: FunctionApp;

const quiet = createLogger({ name: "binder", level: "silent" });

before(async () => {
  sandbox = await startTestSandbox();
  kube = new KubeJsonClient(sandbox.kubeConfig);
  const controller = new BinderController({
    kube,
    events: new EventRecorder(kube, {
      component: "persistentvolume-controller",
      logger: { warn: () => undefined },
    }),
  });
  app = createBinderApp({
    controller,
    logger: quiet,
    metrics: createMetricsRegistry({ defaultMetrics: false }),
  });
});
after(async () => {
  await kube.close();
  await sandbox.close();
});
beforeEach(() => sandbox.admin.reset());

function pv(name: string, size: string, extra: Partial<PersistentVolume["spec"]> = {}): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name },
    spec: {
      capacity: { storage: size },
      accessModes: ["ReadWriteOnce"],
      csi: { driver: "hostpath.csi.k8s.io", volumeHandle: name },
      storageClassName: "",
      ...extra,
    },
  };
}

function pvc(name: string, size: string): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace: "default" },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: size } },
      storageClassName: "",
    },
  };
}

function watchEvent(type: "ADDED" | "MODIFIED" | "DELETED", object: object): string {
  return JSON.stringify({ type, object });
}

/** Binary-mode CloudEvent headers as Knative ApiServerSource sends them (Resource mode). */
function ceHeaders(
  action: "add" | "update" | "delete",
  o: PersistentVolume | PersistentVolumeClaim,
): Record<string, string> {
  const ns = o.metadata.namespace ?? "";
  const plural = o.kind === "PersistentVolume" ? "persistentvolumes" : "persistentvolumeclaims";
  return {
    "content-type": "application/json",
    "ce-specversion": "1.0",
    "ce-id": randomUUID(),
    "ce-type": `dev.knative.apiserver.resource.${action}`,
    "ce-source": "https://10.96.0.1:443",
    "ce-subject": `/apis/v1/namespaces/${ns}/${plural}/${o.metadata.name}`,
    "ce-kind": o.kind,
    "ce-apiversion": "v1",
    "ce-name": o.metadata.name,
    ...(ns ? { "ce-namespace": ns } : {}),
  };
}

describe("binder function over HTTP", () => {
  it("binds on forwarded watch events and answers with what it did", async () => {
    const volume = await kube.create(persistentVolumes, pv("pv-a", "1Gi"));
    const r1 = await request(app)
      .post("/")
      .set("content-type", "application/json")
      .send(watchEvent("ADDED", volume));
    assert.equal(r1.status, 200);
    assert.equal(r1.body.results[0].synced[0].outcome, "volume is available");
    const claim = await kube.create(persistentVolumeClaims, pvc("claim-a", "1Gi"));
    const r2 = await request(app)
      .post("/")
      .set("content-type", "application/json")
      .send(watchEvent("ADDED", claim));
    assert.equal(r2.status, 200);
    assert.equal(r2.body.results[0].synced[0].outcome, "bound to volume pv-a");
    assert.equal(r2.body.results[0].synced[0].writes, 4);
    const bound = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "claim-a", "default");
    assert.equal(bound.status?.phase, "Bound");
  });

  it("takes ApiServerSource CloudEvents in binary and structured mode; a deleted claim releases its volume", async () => {
    const volume = await kube.create(persistentVolumes, pv("pv-ce", "1Gi"));
    await request(app).post("/").set(ceHeaders("add", volume)).send(JSON.stringify(volume)).expect(200);
    const claim = await kube.create(persistentVolumeClaims, pvc("claim-ce", "1Gi"));
    const structured = {
      specversion: "1.0",
      id: randomUUID(),
      type: "dev.knative.apiserver.resource.add",
      source: "https://10.96.0.1:443",
      datacontenttype: "application/json",
      kind: "PersistentVolumeClaim",
      data: claim,
    };
    const r = await request(app)
      .post("/")
      .set("content-type", "application/cloudevents+json")
      .send(JSON.stringify(structured));
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.results[0].synced[0].outcome, "bound to volume pv-ce");

    const last = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "claim-ce", "default");
    await kube.delete(persistentVolumeClaims, "claim-ce", "default");
    await request(app).post("/").set(ceHeaders("delete", last)).send(JSON.stringify(last)).expect(200);
    const released = await kube.get<PersistentVolume>(persistentVolumes, "pv-ce");
    assert.equal(released.status?.phase, "Released");
    assert.equal(released.spec.persistentVolumeReclaimPolicy, "Retain");
  });

  it("binds a waiting claim on the event of a PV created after it, without a resync", async () => {
    const claim = await kube.create(persistentVolumeClaims, pvc("late", "2Gi"));
    const pending = await request(app)
      .post("/")
      .set("content-type", "application/json")
      .send(watchEvent("ADDED", claim))
      .expect(200);
    assert.equal(pending.body.results[0].synced[0].outcome, "no volume available and no class set");

    const volume = await kube.create(persistentVolumes, pv("pv-late", "5Gi"));
    const r = await request(app)
      .post("/")
      .set("content-type", "application/json")
      .send(watchEvent("ADDED", volume))
      .expect(200);
    assert.deepEqual(
      r.body.results[0].synced.map((s: { object: string; outcome: string }) => [s.object, s.outcome]),
      [
        ["volume pv-late", "volume is available"],
        ["claim default/late", "bound to volume pv-late"],
      ],
    );
    const bound = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "late", "default");
    assert.equal(bound.status?.phase, "Bound");
    assert.equal(bound.spec.volumeName, "pv-late");

    // The echo of the binder's own Available write looks for no claims again.
    const echo = await kube.get<PersistentVolume>(persistentVolumes, "pv-late");
    await sandbox.admin.resetCounters();
    await request(app)
      .post("/")
      .set("content-type", "application/json")
      .send(
        watchEvent("MODIFIED", {
          ...echo,
          spec: { ...echo.spec, claimRef: undefined },
          status: { phase: "Available" },
        }),
      )
      .expect(200);
    assert.equal((await sandbox.admin.counters())["list persistentvolumeclaims"], undefined);
  });

  it("binds a claim waiting for a pre-bound PV on that PV's event", async () => {
    const claim = await kube.create(persistentVolumeClaims, pvc("wants", "1Gi"));
    await request(app).post("/").set("content-type", "application/json").send(watchEvent("ADDED", claim));
    const volume = await kube.create(
      persistentVolumes,
      pv("pv-pre", "1Gi", {
        claimRef: { kind: "PersistentVolumeClaim", namespace: "default", name: "wants" },
      }),
    );
    const r = await request(app)
      .post("/")
      .set("content-type", "application/json")
      .send(watchEvent("ADDED", volume))
      .expect(200);
    assert.equal(r.body.results[0].synced[1]?.outcome, "bound to volume pv-pre");
    const bound = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "wants", "default");
    assert.equal(bound.status?.phase, "Bound");
  });

  it("syncs no claim for a PV no waiting claim can use (another class, too small)", async () => {
    const claim = await kube.create(persistentVolumeClaims, pvc("picky", "2Gi"));
    await request(app).post("/").set("content-type", "application/json").send(watchEvent("ADDED", claim));
    for (const volume of [
      await kube.create(persistentVolumes, pv("pv-gold", "5Gi", { storageClassName: "gold" })),
      await kube.create(persistentVolumes, pv("pv-small", "1Gi")),
    ]) {
      await sandbox.admin.resetCounters();
      const r = await request(app)
        .post("/")
        .set("content-type", "application/json")
        .send(watchEvent("ADDED", volume))
        .expect(200);
      assert.deepEqual(
        r.body.results[0].synced.map((s: { object: string }) => s.object),
        [`volume ${volume.metadata.name}`],
      );
      const counters = await sandbox.admin.counters();
      assert.equal(counters["list persistentvolumeclaims"], 1, "one list of claims per such event");
      assert.equal(counters["get persistentvolumeclaims"], undefined, "no claim synced");
    }
    const still = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "picky", "default");
    assert.equal(still.status?.phase, "Pending");
    assert.equal(still.spec.volumeName, undefined);
  });

  it("takes Reference-mode CloudEvents (no object) and reads the object itself", async () => {
    await kube.create(persistentVolumes, pv("pv-ref", "1Gi"));
    await request(app).post("/resync").expect(200);
    await kube.create(persistentVolumeClaims, pvc("claim-ref", "1Gi"));
    const r = await request(app)
      .post("/")
      .set({
        "content-type": "application/json",
        "ce-specversion": "1.0",
        "ce-id": randomUUID(),
        "ce-type": "dev.knative.apiserver.ref.add",
        "ce-source": "https://10.96.0.1:443",
      })
      .send(
        JSON.stringify({
          apiVersion: "v1",
          kind: "PersistentVolumeClaim",
          name: "claim-ref",
          namespace: "default",
        }),
      );
    assert.equal(r.status, 200, JSON.stringify(r.body));
    assert.equal(r.body.results[0].synced[0].outcome, "bound to volume pv-ref");
  });

  it("answers 400 for a malformed envelope and changes nothing", async () => {
    await sandbox.admin.resetCounters();
    const bad = await request(app).post("/").set("content-type", "application/json").send("{not json");
    assert.equal(bad.status, 400);
    assert.equal(typeof bad.body.error, "string");
    const noObject = await request(app)
      .post("/")
      .set("content-type", "application/json")
      .send('{"type":"ADDED"}');
    assert.equal(noObject.status, 400);
    assert.deepEqual(await sandbox.admin.counters(), {});
  });

  it("ignores kinds that are not its own, and answers 503 with Retry-After when the API server fails", async () => {
    const other = await request(app)
      .post("/")
      .set("content-type", "application/json")
      .send(
        watchEvent("ADDED", {
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name: "x", namespace: "default" },
        }),
      );
    assert.equal(other.status, 200);
    assert.match(other.body.results[0].ignored, /not handled by binder/);

    const claim = await kube.create(persistentVolumeClaims, pvc("claim-503", "1Gi"));
    await sandbox.admin.setFaults({ errorProbability: 1, errorCode: 503 });
    const r = await request(app)
      .post("/")
      .set("content-type", "application/json")
      .send(watchEvent("ADDED", claim));
    await sandbox.admin.clearFaults();
    assert.equal(r.status, 503);
    assert.ok(Number(r.headers["retry-after"]) >= 1);
  });

  it("POST /resync binds what no event announced", async () => {
    await sandbox.admin.seed([
      { ...pv("pv-quiet", "5Gi"), status: { phase: "Available" } },
      {
        ...pvc("claim-quiet", "5Gi"),
        metadata: { name: "claim-quiet", namespace: "default" },
        status: { phase: "Pending" },
      },
    ]);
    const r = await request(app).post("/resync");
    assert.equal(r.status, 200);
    assert.equal(r.body.result.claims, 1);
    const claim = await kube.get<PersistentVolumeClaim>(persistentVolumeClaims, "claim-quiet", "default");
    assert.equal(claim.spec.volumeName, "pv-quiet");
    assert.equal(claim.status?.phase, "Bound");
  });

  it("GET /explain says why a claim is Pending, 404 for a missing claim, 400 for a bad name", async () => {
    await kube.create(persistentVolumes, pv("pv-small", "1Gi"));
    await request(app).post("/resync").expect(200);
    await kube.create(persistentVolumeClaims, pvc("big-claim", "100Gi"));
    const r = await request(app).get("/explain/namespaces/default/persistentvolumeclaims/big-claim");
    assert.equal(r.status, 200);
    assert.equal(r.body.volumes[0].name, "pv-small");
    assert.equal(r.body.volumes[0].reason, "too-small");
    assert.match(r.body.volumes[0].detail, /capacity 1Gi is less than the requested 100Gi/);
    await request(app).get("/explain/namespaces/default/persistentvolumeclaims/nope").expect(404);
    await request(app).get("/explain/namespaces/Bad_NS/persistentvolumeclaims/x").expect(400);
  });
});

describe("binder function as processes", () => {
  const instances: FunctionProcess[] = [];

  after(async () => {
    for (const p of instances) await p.stop();
  });

  it("`npm run serve` with FUNCTION=binder prints its ready line and serves", async () => {
    const p = await startFunctionProcess("binder", { KUBECONFIG: sandbox.kubeconfigPath });
    instances.push(p);
    assert.match(p.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    const health = await fetch(`${p.url}/healthz`);
    assert.equal(health.status, 200);
  });

  it("several instances, shuffled and duplicated events: no volume bound twice, no claim waiting while a volume that fits is Available", async () => {
    while (instances.length < 3)
      instances.push(await startFunctionProcess("binder", { KUBECONFIG: sandbox.kubeconfigPath }));
    const volumeCount = 40;
    const claimCount = 30;
    const created: object[] = [];
    for (let i = 0; i < volumeCount; i++) {
      created.push(await kube.create(persistentVolumes, pv(`cv-${i}`, `${1 + (i % 5)}Gi`)));
    }
    for (let i = 0; i < claimCount; i++) {
      created.push(await kube.create(persistentVolumeClaims, pvc(`cc-${i}`, `${1 + (i % 3)}Gi`)));
    }
    // Every change delivered twice, in random order, to random instances, 12 at a time.
    const deliveries = [...created, ...created].map((o) => watchEvent("ADDED", o));
    for (let i = deliveries.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [deliveries[i], deliveries[j]] = [deliveries[j]!, deliveries[i]!];
    }
    let next = 0;
    const statuses: number[] = [];
    await Promise.all(
      Array.from({ length: 12 }, async () => {
        while (next < deliveries.length) {
          const body = deliveries[next++]!;
          const target = instances[Math.floor(Math.random() * instances.length)]!;
          const r = await fetch(`${target.url}/`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body,
          });
          statuses.push(r.status);
          await r.arrayBuffer();
        }
      }),
    );
    assert.ok(
      statuses.every((s) => s === 200 || s === 503),
      `statuses: ${[...new Set(statuses)]}`,
    );
    // Lost or refused events are what the periodic resync repairs: passes on
    // each instance in turn, as the PingSource's would come, three at least
    // and up to six, until no claim waits while a volume that fits it is
    // Available. Not every claim need end Bound: a claim whose event comes
    // while only bigger volumes are Available binds one of those, as
    // upstream's binder would, and a later claim may find none left that fits.
    const fits = (v: PersistentVolume, c: PersistentVolumeClaim) =>
      compareQuantities(v.spec.capacity?.storage ?? "0", c.spec.resources?.requests?.storage ?? "0") >= 0;
    const read = async () => ({
      claims: (await kube.list<PersistentVolumeClaim>(persistentVolumeClaims)).items,
      volumes: (await kube.list<PersistentVolume>(persistentVolumes)).items,
    });
    const freeFor = (c: PersistentVolumeClaim, volumes: PersistentVolume[]) =>
      volumes.filter((v) => v.status?.phase === "Available" && !v.spec.claimRef && fits(v, c));
    const passes: string[] = [];
    for (let pass = 0; pass < 6; pass++) {
      const r = await fetch(`${instances[pass % instances.length]!.url}/resync`, { method: "POST" });
      assert.equal(r.status, 200);
      passes.push(`pass ${pass}: ${await r.text()}`);
      if (pass < 2) continue;
      const now = await read();
      const stranded = now.claims.filter(
        (c) => c.status?.phase !== "Bound" && freeFor(c, now.volumes).length > 0,
      );
      if (stranded.length === 0) break;
    }

    const { claims, volumes } = await read();
    const byName = new Map(volumes.map((v) => [v.metadata.name, v]));
    const used = new Map<string, string>();
    // On failure, say what each pass reported and what every claim and volume holds.
    const why = (c: PersistentVolumeClaim) =>
      [
        `${c.metadata.name} (${c.spec.resources?.requests?.storage}) is ${c.status?.phase}`,
        `volumes: ${volumes.map((v) => `${v.metadata.name} ${v.spec.capacity?.storage} ${v.status?.phase} ${v.spec.claimRef?.name ?? "-"}`).join("; ")}`,
        `claims: ${claims.map((k) => `${k.metadata.name} ${k.spec.resources?.requests?.storage} ${k.status?.phase} ${k.spec.volumeName ?? "-"}`).join("; ")}`,
        ...passes,
      ].join("\n");
    for (const c of claims) {
      if (c.status?.phase !== "Bound") {
        assert.equal(c.spec.volumeName ?? undefined, undefined, why(c));
        assert.deepEqual(
          freeFor(c, volumes).map((v) => v.metadata.name),
          [],
          `a volume that fits is Available while ${why(c)}`,
        );
        continue;
      }
      const name = c.spec.volumeName!;
      assert.ok(!used.has(name), `volume ${name} bound to ${used.get(name)} and ${c.metadata.name}`);
      used.set(name, c.metadata.name);
      const v = byName.get(name)!;
      assert.equal(v.spec.claimRef?.uid, c.metadata.uid);
      assert.equal(v.status?.phase, "Bound");
      assert.ok(fits(v, c), why(c));
    }
    // Each 1Gi or 2Gi claim has more volumes that fit (32) than there are other claims: all Bound.
    for (const c of claims)
      if (compareQuantities(c.spec.resources?.requests?.storage ?? "0", "2Gi") <= 0)
        assert.equal(c.status?.phase, "Bound", why(c));
    // Volumes no claim uses are Available again (any losing race was rolled back).
    for (const v of volumes) {
      if (used.has(v.metadata.name)) continue;
      assert.equal(
        v.spec.claimRef ?? undefined,
        undefined,
        `${v.metadata.name} still points at ${v.spec.claimRef?.name}`,
      );
      assert.equal(v.status?.phase, "Available");
    }
  });
});
