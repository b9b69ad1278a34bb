// KubeJsonClient against the sandbox API server over real HTTP (and a small
// HTTPS server for TLS and auth): CRUD, subresources, patch types, error
// classification, paging, unknown-field preservation and connection reuse.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer as createHttpServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { KubeConfig } from "@kubernetes/client-node";
import { MUTATING_STORAGE_PLUGINS } from "../../sandbox/apiserver/storage-admission.ts";
import { type Sandbox, startSandbox } from "../../sandbox/start.ts";
import {
  isAlreadyExists,
  isConflict,
  isNotFound,
  isTransient,
  networkErrorCodeOf,
  reasonOf,
  retryAfterSeconds,
  statusCodeOf,
} from "../../shared/kube/api-errors.ts";
import { createKubeClients } from "../../shared/kube/client.ts";
import { KubeApiError, KubeJsonClient, KubeRequestError } from "../../shared/kube/json-client.ts";
import {
  csiDrivers,
  namespaces,
  persistentVolumeClaims,
  persistentVolumes,
  volumeAttachments,
  volumeSnapshots,
} from "../../shared/kube/resources.ts";
import type {
  KubeObject,
  PersistentVolume,
  PersistentVolumeClaim,
  VolumeAttachment,
} from "../../shared/kube/types.ts";
import { rejection } from "../helpers/rejection.ts";
import { type SandboxAdmin, sandboxAdmin } from "../helpers/sandbox.ts";

function pv(name: string, extra: Record<string, unknown> = {}): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name },
    spec: {
      capacity: { storage: "1Gi" },
      accessModes: ["ReadWriteOnce"],
      persistentVolumeReclaimPolicy: "Retain",
      csi: { driver: "hostpath.csi.k8s.io", volumeHandle: `vol-${name}` },
    },
    ...extra,
  };
}

function pvc(name: string, namespace: string, labels?: Record<string, string>): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace, ...(labels ? { labels } : {}) },
    spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } } },
  };
}

function va(name: string): VolumeAttachment {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttachment",
    metadata: { name },
    spec: { attacher: "hostpath.csi.k8s.io", nodeName: "node-1", source: { persistentVolumeName: "pv-a" } },
  };
}

describe("KubeJsonClient over the sandbox API server", () => {
  let dir: string;
  let sandbox: Sandbox;
  let admin: SandboxAdmin;
  let kc: KubeConfig;
  let client: KubeJsonClient;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "ksf-json-client-"));
    sandbox = await startSandbox({ dir, disableAdmissionPlugins: MUTATING_STORAGE_PLUGINS });
    admin = sandboxAdmin(sandbox.apiServer.url);
    kc = new KubeConfig();
    kc.loadFromFile(sandbox.kubeconfigPath);
    client = new KubeJsonClient(kc);
    await admin.seed([
      { apiVersion: "v1", kind: "Namespace", metadata: { name: "apps" } },
      { apiVersion: "v1", kind: "Namespace", metadata: { name: "paging" } },
    ]);
  });

  after(async () => {
    await client.close();
    await sandbox.close();
    await rm(dir, { recursive: true, force: true });
  });

  test("PersistentVolume: create, get, replace, merge patch, delete; timestamps stay strings", async () => {
    const created = await client.create(persistentVolumes, pv("crud-pv"));
    assert.equal(created.metadata.name, "crud-pv");
    assert.equal(typeof created.metadata.creationTimestamp, "string");
    assert.match(created.metadata.creationTimestamp ?? "", /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.equal(created.status?.phase, "Pending");

    const got = await client.get<PersistentVolume>(persistentVolumes, "crud-pv");
    assert.deepEqual(got, created);
    assert.equal(typeof got.metadata.creationTimestamp, "string");

    got.metadata.labels = { tier: "gold" };
    const replaced = await client.replace(persistentVolumes, got);
    assert.equal(replaced.metadata.labels?.tier, "gold");
    assert.notEqual(replaced.metadata.resourceVersion, got.metadata.resourceVersion);

    const patched = await client.patch<PersistentVolume>(
      persistentVolumes,
      "crud-pv",
      undefined,
      { metadata: { annotations: { note: "merged" } } },
      "merge",
    );
    assert.equal(patched.metadata.annotations?.note, "merged");
    assert.equal(patched.metadata.labels?.tier, "gold");

    // A dry-run create is validated and answered, but not stored.
    const dry = await client.create(persistentVolumes, pv("dry-pv"), { dryRun: true });
    assert.equal(dry.metadata.name, "dry-pv");
    assert.ok(isNotFound(await rejection(client.get(persistentVolumes, "dry-pv"))));

    assert.equal(await client.delete(persistentVolumes, "crud-pv"), undefined);
    const gone = await rejection(client.get(persistentVolumes, "crud-pv"));
    assert.ok(gone instanceof KubeApiError);
    assert.ok(isNotFound(gone));
  });

  test("PersistentVolumeClaim: namespaced CRUD, names and namespaces are required where they must be", async () => {
    const created = await client.create(persistentVolumeClaims, pvc("data", "apps"));
    assert.equal(created.metadata.namespace, "apps");
    const got = await client.get<PersistentVolumeClaim>(persistentVolumeClaims, "data", "apps");
    assert.equal(got.metadata.uid, created.metadata.uid);
    assert.ok(isNotFound(await rejection(client.get(persistentVolumeClaims, "data", "default"))));

    await assert.rejects(client.get(persistentVolumeClaims, "data"), (e) => {
      assert.ok(e instanceof TypeError);
      assert.match(e.message, /persistentvolumeclaims is namespaced: a namespace is required/);
      return true;
    });
    await assert.rejects(client.get(persistentVolumes, "x", "apps"), /cluster-scoped/);
    await assert.rejects(client.get(persistentVolumeClaims, "", "apps"), /a name is required/);
    await assert.rejects(client.create(persistentVolumeClaims, pvc("no-ns", "")), /namespace is required/);
    await assert.rejects(
      client.create(persistentVolumeClaims, pv("wrong-kind") as unknown as PersistentVolumeClaim),
      /expected a PersistentVolumeClaim, got a PersistentVolume/,
    );
    await assert.rejects(
      client.replace(persistentVolumeClaims, { ...got, metadata: { ...got.metadata, resourceVersion: "" } }),
      /resourceVersion is required/,
    );

    const deleted = await client.delete(persistentVolumeClaims, "data", "apps", {
      preconditions: { uid: created.metadata.uid ?? "" },
      propagationPolicy: "Background",
    });
    assert.equal(deleted, undefined);
    assert.ok(isNotFound(await rejection(client.get(persistentVolumeClaims, "data", "apps"))));
  });

  test("names and selectors are URL-encoded", async () => {
    await client.create(persistentVolumeClaims, pvc("sel-a", "apps", { app: "db", tier: "gold" }));
    await client.create(persistentVolumeClaims, pvc("sel-b", "apps", { app: "db", tier: "silver" }));
    await client.create(persistentVolumeClaims, pvc("sel-c", "apps", { app: "web" }));
    const names = async (labelSelector: string, fieldSelector?: string) =>
      (await client.list(persistentVolumeClaims, { namespace: "apps", labelSelector, fieldSelector })).items
        .map((i) => i.metadata.name)
        .sort();
    assert.deepEqual(await names("app=db,tier in (gold, silver)"), ["sel-a", "sel-b"]);
    assert.deepEqual(await names("app!=db"), ["sel-c"]);
    assert.deepEqual(await names("app", "metadata.name=sel-b"), ["sel-b"]);
    // A name with characters that mean something in a URL reaches the server as a name, not a path.
    const err = await rejection(client.get(persistentVolumeClaims, "a/../../b?c=d#e", "apps"));
    assert.ok(isNotFound(err));
    assert.ok(err instanceof KubeApiError);
    assert.match(err.path, /a%2F\.\.%2F\.\.%2Fb%3Fc%3Dd%23e$/);
  });

  test("VolumeAttachment: status only changes through the status subresource", async () => {
    const created = await client.create(volumeAttachments, va("csi-abc"));
    assert.equal(created.status?.attached, false);

    // The main endpoint ignores status, like kube-apiserver.
    const viaMain = await client.replace(volumeAttachments, {
      ...created,
      status: { attached: true, attachmentMetadata: { devicePath: "/dev/x" } },
    });
    assert.equal(viaMain.status?.attached, false);

    const viaStatus = await client.replace(
      volumeAttachments,
      { ...viaMain, status: { attached: true, attachmentMetadata: { devicePath: "/dev/x" } } },
      { subresource: "status" },
    );
    assert.equal(viaStatus.status?.attached, true);
    assert.equal(viaStatus.status?.attachmentMetadata?.devicePath, "/dev/x");

    const detachError = { time: "2024-05-01T10:00:00Z", message: "timeout" };
    const patched = await client.patch<VolumeAttachment>(
      volumeAttachments,
      "csi-abc",
      undefined,
      { status: { detachError } },
      "merge",
      { subresource: "status" },
    );
    assert.deepEqual(patched.status?.detachError, detachError);
    assert.equal(typeof patched.status?.detachError?.time, "string");

    assert.equal(await client.delete(volumeAttachments, "csi-abc"), undefined);
  });

  test("all three patch types, each with its content type", async () => {
    await client.create(persistentVolumeClaims, pvc("patchme", "apps", { a: "1" }));
    const json = await client.patch<PersistentVolumeClaim>(
      persistentVolumeClaims,
      "patchme",
      "apps",
      [
        { op: "test", path: "/metadata/labels/a", value: "1" },
        { op: "add", path: "/metadata/labels/b", value: "2" },
      ],
      "json",
    );
    assert.deepEqual(json.metadata.labels, { a: "1", b: "2" });

    const merge = await client.patch<PersistentVolumeClaim>(
      persistentVolumeClaims,
      "patchme",
      "apps",
      { metadata: { labels: { a: null } } },
      "merge",
    );
    assert.deepEqual(merge.metadata.labels, { b: "2" });

    const strategic = await client.patch<PersistentVolumeClaim>(
      persistentVolumeClaims,
      "patchme",
      "apps",
      { metadata: { finalizers: ["example.com/keep"] } },
      "strategic",
    );
    assert.deepEqual(strategic.metadata.finalizers, ["example.com/keep"]);

    // A conditional merge patch: the resourceVersion it carries must still be current.
    const stale = await rejection(
      client.patch(
        persistentVolumeClaims,
        "patchme",
        "apps",
        { metadata: { resourceVersion: merge.metadata.resourceVersion, labels: { c: "3" } } },
        "merge",
      ),
    );
    assert.ok(isConflict(stale));

    // A failed JSON patch `test` is a 422 from the server.
    const failedTest = await rejection(
      client.patch(
        persistentVolumeClaims,
        "patchme",
        "apps",
        [{ op: "test", path: "/metadata/labels/b", value: "x" }],
        "json",
      ),
    );
    assert.equal(statusCodeOf(failedTest), 422);

    await assert.rejects(
      client.patch(persistentVolumeClaims, "patchme", "apps", { not: "an array" }, "json"),
      TypeError,
    );
    await assert.rejects(client.patch(persistentVolumeClaims, "patchme", "apps", [], "merge"), TypeError);
  });

  test("deleting an object held by a finalizer answers with the object", async () => {
    await client.create(persistentVolumeClaims, {
      ...pvc("held", "apps"),
      metadata: { name: "held", namespace: "apps", finalizers: ["kubernetes.io/pvc-protection"] },
    });
    const answer = await client.delete(persistentVolumeClaims, "held", "apps");
    assert.equal(answer?.metadata.name, "held");
    assert.equal(typeof answer?.metadata.deletionTimestamp, "string");
    const still = await client.get<PersistentVolumeClaim>(persistentVolumeClaims, "held", "apps");
    await client.patch(
      persistentVolumeClaims,
      "held",
      "apps",
      [
        { op: "test", path: "/metadata/resourceVersion", value: still.metadata.resourceVersion },
        { op: "remove", path: "/metadata/finalizers" },
      ],
      "json",
    );
    assert.ok(isNotFound(await rejection(client.get(persistentVolumeClaims, "held", "apps"))));
  });

  test("404, 409 Conflict, 409 AlreadyExists and 422 carry the parsed Status and classify", async () => {
    const missing = await rejection(client.get(persistentVolumes, "no-such-pv"));
    assert.ok(missing instanceof KubeApiError);
    assert.equal(missing.code, 404);
    assert.equal(missing.reason, "NotFound");
    assert.ok(isNotFound(missing) && !isTransient(missing) && !isConflict(missing));
    assert.match(missing.message, /^GET \/api\/v1\/persistentvolumes\/no-such-pv: 404 NotFound: /);

    const first = await client.create(persistentVolumes, pv("conflict-pv"));
    await client.replace(persistentVolumes, {
      ...first,
      metadata: { ...first.metadata, labels: { v: "2" } },
    });
    const conflict = await rejection(
      client.replace(persistentVolumes, {
        ...first,
        metadata: { ...first.metadata, labels: { v: "stale" } },
      }),
    );
    assert.ok(conflict instanceof KubeApiError);
    assert.equal(conflict.code, 409);
    assert.ok(isConflict(conflict));
    assert.ok(!isAlreadyExists(conflict));
    assert.ok(!isTransient(conflict));

    const exists = await rejection(client.create(persistentVolumes, pv("conflict-pv")));
    assert.equal(statusCodeOf(exists), 409);
    assert.ok(isAlreadyExists(exists));
    assert.ok(!isConflict(exists));

    const invalid = await rejection(client.create(persistentVolumes, pv("Not_A_Valid_Name")));
    assert.ok(invalid instanceof KubeApiError);
    assert.equal(statusCodeOf(invalid), 422);
    assert.equal(reasonOf(invalid), "Invalid");
    assert.ok(!isTransient(invalid));
    const body = invalid.body as { kind?: string; details?: { causes?: unknown[] } };
    assert.equal(body.kind, "Status");
    assert.match(invalid.message, /is invalid/);
  });

  test("an injected 503 is transient and carries Retry-After", async () => {
    await admin.setFaults({ errorProbability: 1, errorCode: 503 });
    try {
      const err = await rejection(client.get(persistentVolumes, "anything"));
      assert.ok(err instanceof KubeApiError);
      assert.equal(err.code, 503);
      assert.ok(isTransient(err));
      assert.equal(retryAfterSeconds(err), 1);
    } finally {
      await admin.clearFaults();
    }
  });

  test("a request without an answer in time is a transient KubeRequestError", async () => {
    const impatient = new KubeJsonClient(kc, { requestTimeoutMs: 100 });
    await admin.setFaults({ latencyMs: 1_000, verbs: ["get"], resources: ["persistentvolumes"] });
    try {
      const started = performance.now();
      const err = await rejection(impatient.get(persistentVolumes, "slow"));
      assert.ok(performance.now() - started < 900, "the timeout cut the request short");
      assert.ok(err instanceof KubeRequestError);
      assert.equal(err.code, "ETIMEDOUT");
      assert.equal(statusCodeOf(err), undefined);
      assert.ok(isTransient(err));
    } finally {
      await admin.clearFaults();
      await impatient.close();
    }
  });

  test("a refused connection is a transient KubeRequestError", async () => {
    const probe = createHttpServer();
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const dead = new KubeConfig();
    dead.loadFromClusterAndUser(
      { name: "dead", server: `http://127.0.0.1:${port}`, skipTLSVerify: true },
      { name: "u", token: "t" },
    );
    const refused = new KubeJsonClient(dead);
    try {
      const err = await rejection(refused.get(persistentVolumes, "x"));
      assert.ok(err instanceof KubeRequestError);
      assert.equal(networkErrorCodeOf(err), "ECONNREFUSED");
      assert.ok(isTransient(err));
    } finally {
      await refused.close();
    }
  });

  test("list follows continue through 250 objects with pageSize 100", async () => {
    await admin.seed(
      Array.from({ length: 250 }, (_, i) => pvc(`claim-${String(i).padStart(3, "0")}`, "paging")),
    );
    await admin.resetCounters();
    const list = await client.list<PersistentVolumeClaim>(persistentVolumeClaims, {
      namespace: "paging",
      pageSize: 100,
    });
    assert.equal(list.items.length, 250);
    assert.equal(new Set(list.items.map((i) => i.metadata.name)).size, 250);
    assert.match(list.resourceVersion, /^\d+$/);
    assert.equal((await admin.counters())["list persistentvolumeclaims"], 3);
    for (const item of list.items) {
      assert.equal(item.apiVersion, "v1");
      assert.equal(item.kind, "PersistentVolumeClaim");
    }

    // pageSize 0: one unpaged request.
    await admin.resetCounters();
    const all = await client.list(persistentVolumeClaims, { namespace: "paging", pageSize: 0 });
    assert.equal(all.items.length, 250);
    assert.equal((await admin.counters())["list persistentvolumeclaims"], 1);

    // Cluster-scoped kinds list without a namespace; a namespace is a programming error.
    await client.list(csiDrivers);
    await assert.rejects(client.list(csiDrivers, { namespace: "apps" }), /cluster-scoped/);
    // Namespaced kinds without a namespace list across namespaces.
    const across = await client.list(persistentVolumeClaims, { labelSelector: "app=db" });
    assert.ok(across.items.every((i) => i.metadata.namespace === "apps"));
  });

  test("fields client-node does not know survive get -> replace -> get", async () => {
    const future = {
      someFutureField: { nested: ["a", "b"], enabled: true },
      csi: {
        driver: "hostpath.csi.k8s.io",
        volumeHandle: "vol-future",
        nodeExpandSecretRefV2: { name: "s", namespace: "kube-system" },
      },
    };
    await admin.seed([
      {
        ...pv("future-pv"),
        spec: { ...pv("future-pv").spec, ...future },
        futureTopLevel: { x: 1 },
      },
    ]);
    const got = await client.get<PersistentVolume>(persistentVolumes, "future-pv");
    assert.deepEqual(got.spec.someFutureField, future.someFutureField);
    got.metadata.labels = { touched: "yes" };
    await client.replace(persistentVolumes, got);
    const again = await client.get<PersistentVolume>(persistentVolumes, "future-pv");
    assert.equal(again.metadata.labels?.touched, "yes");
    assert.deepEqual(again.spec.someFutureField, future.someFutureField);
    assert.deepEqual(again.spec.csi, future.csi);
    assert.deepEqual(again.futureTopLevel, { x: 1 });
  });

  test("CRD kinds (snapshot.storage.k8s.io) use the /apis path", async () => {
    const snap = await client.create(volumeSnapshots, {
      apiVersion: "snapshot.storage.k8s.io/v1",
      kind: "VolumeSnapshot",
      metadata: { name: "snap-1", namespace: "apps" },
      spec: { source: { persistentVolumeClaimName: "data" } },
    });
    assert.equal(snap.metadata.namespace, "apps");
    const listed = await client.list(volumeSnapshots, { namespace: "apps" });
    assert.deepEqual(
      listed.items.map((i) => i.metadata.name),
      ["snap-1"],
    );
    await client.delete(volumeSnapshots, "snap-1", "apps");
  });

  test("keep-alive: 200 sequential GETs reuse two connections; concurrency opens only what it needs", async () => {
    await client.create(persistentVolumes, pv("keepalive-pv"));
    let connections = 0;
    const onConnection = () => connections++;
    sandbox.apiServer.server.on("connection", onConnection);
    try {
      // undici's pool alternates between two connections for strictly
      // sequential requests (the one that just answered is flagged busy
      // until the next tick), so 2 is the steady state, not 200.
      for (let i = 0; i < 200; i++) await client.get(persistentVolumes, "keepalive-pv");
      assert.ok(connections <= 2, `200 sequential GETs opened ${connections} connections`);

      connections = 0;
      await Promise.all(Array.from({ length: 20 }, () => client.get(persistentVolumes, "keepalive-pv")));
      assert.ok(connections <= 20, `20 concurrent GETs opened ${connections} connections`);
      connections = 0;
      for (let i = 0; i < 50; i++) await client.get(persistentVolumes, "keepalive-pv");
      assert.equal(connections, 0, "the pooled connections are reused afterwards");
    } finally {
      sandbox.apiServer.server.off("connection", onConnection);
    }
  });

  test("createKubeClients returns a JSON client on the same KubeConfig", async () => {
    const clients = createKubeClients(kc);
    assert.equal(clients.json.kubeConfig, kc);
    try {
      const ns = await clients.json.get<KubeObject>(namespaces, "apps");
      assert.equal(ns.kind, "Namespace");
    } finally {
      await clients.json.close();
    }
  });
});

describe("KubeJsonClient list fallback", () => {
  test("an expired continue token (410) falls back to one full list", async (t) => {
    const requests: string[] = [];
    const item = (name: string) => ({ metadata: { name, namespace: "ns", resourceVersion: "5" } });
    const server = createHttpServer((req, res) => {
      requests.push(req.url ?? "");
      const url = new URL(req.url ?? "/", "http://x");
      res.setHeader("content-type", "application/json");
      if (url.searchParams.get("continue") === "tok") {
        res.statusCode = 410;
        res.end(
          JSON.stringify({
            kind: "Status",
            apiVersion: "v1",
            status: "Failure",
            reason: "Expired",
            code: 410,
            message: "The provided continue parameter is too old",
          }),
        );
      } else if (url.searchParams.get("limit")) {
        res.end(
          JSON.stringify({
            kind: "List",
            metadata: { resourceVersion: "5", continue: "tok" },
            items: [item("a")],
          }),
        );
      } else {
        res.end(
          JSON.stringify({ kind: "List", metadata: { resourceVersion: "7" }, items: [item("a"), item("b")] }),
        );
      }
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    t.after(() => server.close());
    const kc = new KubeConfig();
    kc.loadFromClusterAndUser(
      {
        name: "fake",
        server: `http://127.0.0.1:${(server.address() as AddressInfo).port}/prefix/`,
        skipTLSVerify: true,
      },
      { name: "u", token: "t" },
    );
    const client = new KubeJsonClient(kc);
    t.after(() => client.close());
    const list = await client.list(persistentVolumeClaims, {
      namespace: "ns",
      pageSize: 1,
      labelSelector: "a=b",
    });
    assert.deepEqual(
      list.items.map((i) => [i.metadata.name, i.kind, i.apiVersion]),
      [
        ["a", "PersistentVolumeClaim", "v1"],
        ["b", "PersistentVolumeClaim", "v1"],
      ],
    );
    assert.equal(list.resourceVersion, "7");
    assert.deepEqual(requests, [
      "/prefix/api/v1/namespaces/ns/persistentvolumeclaims?labelSelector=a%3Db&limit=1",
      "/prefix/api/v1/namespaces/ns/persistentvolumeclaims?labelSelector=a%3Db&limit=1&continue=tok",
      "/prefix/api/v1/namespaces/ns/persistentvolumeclaims?labelSelector=a%3Db",
    ]);
  });
});

/**
 * A plain-HTTP API server that records each request and answers a Success
 * Status, and a kubeconfig pointing at it with bearer token tok-1.
 */
async function recordingServer(t: { after(fn: () => unknown): void }): Promise<{
  seen: { method: string; url: string; headers: Record<string, unknown>; body: string }[];
  kc: KubeConfig;
}> {
  const seen: { method: string; url: string; headers: Record<string, unknown>; body: string }[] = [];
  const server = createHttpServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => {
      body += c.toString("utf8");
    });
    req.on("end", () => {
      seen.push({ method: req.method ?? "", url: req.url ?? "", headers: req.headers, body });
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ apiVersion: "v1", kind: "Status", status: "Success" }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  t.after(() => server.close());
  const kc = new KubeConfig();
  kc.loadFromClusterAndUser(
    {
      name: "fake",
      server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      skipTLSVerify: true,
    },
    { name: "u", token: "tok-1" },
  );
  return { seen, kc };
}

describe("KubeJsonClient request shape", () => {
  test("auth material is computed once per authReuseMs, not per request", async (t) => {
    const { seen, kc } = await recordingServer(t);
    let computed = 0;
    const apply = kc.applyToHTTPSOptions.bind(kc);
    kc.applyToHTTPSOptions = async (opts) => {
      computed++;
      await apply(opts);
    };
    const client = new KubeJsonClient(kc, { authReuseMs: 60_000 });
    t.after(() => client.close());
    await Promise.all(Array.from({ length: 5 }, () => client.get(persistentVolumes, "p")));
    (kc.getCurrentUser() as { token?: string }).token = "tok-2";
    for (let i = 0; i < 5; i++) await client.get(persistentVolumes, "p");
    assert.equal(computed, 1, "ten requests, one computation");
    assert.deepEqual(
      new Set(seen.map((r) => r.headers.authorization)),
      new Set(["Bearer tok-1"]),
      "within the window the token is reused",
    );
  });

  test("headers, content types and bodies on the wire", async (t) => {
    const { seen, kc } = await recordingServer(t);
    const client = new KubeJsonClient(kc, { userAgent: "storage-test/1", authReuseMs: 100 });
    t.after(() => client.close());

    for (const type of ["json", "merge", "strategic"] as const) {
      await client.patch(persistentVolumeClaims, "c", "ns", type === "json" ? [] : {}, type, {
        subresource: "status",
      });
    }
    // Auth headers are computed again once authReuseMs has passed: a rotated
    // token is used from then on (client-node reads token files on each computation).
    const user = kc.getCurrentUser();
    assert.ok(user);
    (user as { token?: string }).token = "tok-2";
    await sleep(120);
    await client.delete(volumeAttachments, "va-1", undefined, {
      preconditions: { resourceVersion: "42" },
      propagationPolicy: "Foreground",
    });
    await client.create(persistentVolumes, { ...pv("p"), apiVersion: "", kind: "" }, { dryRun: true });

    assert.deepEqual(
      seen.map((s) => [s.method, s.url, s.headers["content-type"]]),
      [
        ["PATCH", "/api/v1/namespaces/ns/persistentvolumeclaims/c/status", "application/json-patch+json"],
        ["PATCH", "/api/v1/namespaces/ns/persistentvolumeclaims/c/status", "application/merge-patch+json"],
        [
          "PATCH",
          "/api/v1/namespaces/ns/persistentvolumeclaims/c/status",
          "application/strategic-merge-patch+json",
        ],
        ["DELETE", "/apis/storage.k8s.io/v1/volumeattachments/va-1", "application/json"],
        ["POST", "/api/v1/persistentvolumes?dryRun=All", "application/json"],
      ],
    );
    for (const s of seen) {
      assert.equal(s.headers.accept, "application/json");
      assert.equal(s.headers["user-agent"], "storage-test/1");
    }
    assert.deepEqual(
      seen.map((s) => s.headers.authorization),
      ["Bearer tok-1", "Bearer tok-1", "Bearer tok-1", "Bearer tok-2", "Bearer tok-2"],
    );
    assert.deepEqual(JSON.parse(seen[3]?.body ?? ""), {
      apiVersion: "v1",
      kind: "DeleteOptions",
      preconditions: { resourceVersion: "42" },
      propagationPolicy: "Foreground",
    });
    const created = JSON.parse(seen[4]?.body ?? "") as KubeObject;
    assert.equal(created.apiVersion, "v1");
    assert.equal(created.kind, "PersistentVolume");
  });
});

// The sandbox speaks plain HTTP; a real kube-apiserver speaks HTTPS with a
// cluster CA and usually client certificates. This pins down that the TLS and
// auth settings reach the server, that one TLS connection carries many
// requests, and that a rotated client certificate gets a new connection.
describe("KubeJsonClient over HTTPS", () => {
  test("cluster CA, client certificate, bearer token; TLS connections are reused", async (t) => {
    const { generateKeyPairSync } = await import("node:crypto");
    const { createServer } = await import("node:https");
    const { default: forge } = await import("node-forge");

    const keyPair = () => {
      const { privateKey, publicKey } = generateKeyPairSync("rsa", { modulusLength: 2048 });
      return {
        pem: privateKey.export({ type: "pkcs8", format: "pem" }).toString(),
        forgePrivate: forge.pki.privateKeyFromPem(
          privateKey.export({ type: "pkcs1", format: "pem" }).toString(),
        ),
        forgePublic: forge.pki.publicKeyFromPem(publicKey.export({ type: "spki", format: "pem" }).toString()),
      };
    };
    type Key = ReturnType<typeof keyPair>;
    const certificate = (cn: string, subject: Key, issuer: Key, extensions: object[], serial: string) => {
      const cert = forge.pki.createCertificate();
      cert.publicKey = subject.forgePublic;
      cert.serialNumber = serial;
      cert.validity.notBefore = new Date(Date.now() - 60_000);
      cert.validity.notAfter = new Date(Date.now() + 3_600_000);
      cert.setSubject([{ name: "commonName", value: cn }]);
      cert.setIssuer([{ name: "commonName", value: issuer === subject ? cn : "test-ca" }]);
      cert.setExtensions(extensions);
      cert.sign(issuer.forgePrivate, forge.md.sha256.create());
      return forge.pki.certificateToPem(cert);
    };
    const caKey = keyPair();
    const caPem = certificate(
      "test-ca",
      caKey,
      caKey,
      [
        { name: "basicConstraints", cA: true },
        { name: "keyUsage", keyCertSign: true },
      ],
      "01",
    );
    const serverKey = keyPair();
    const serverPem = certificate(
      "apiserver",
      serverKey,
      caKey,
      [{ name: "subjectAltName", altNames: [{ type: 7, ip: "127.0.0.1" }] }],
      "02",
    );
    const clientCert = (cn: string, serial: string) => {
      const key = keyPair();
      return {
        cert: certificate(cn, key, caKey, [{ name: "extKeyUsage", clientAuth: true }], serial),
        key: key.pem,
      };
    };
    const first = clientCert("storage-functions", "03");
    const rotated = clientCert("storage-functions-rotated", "04");

    const seen: { cn: string | undefined; authorization: string | undefined }[] = [];
    let tlsConnections = 0;
    const server = createServer(
      { key: serverKey.pem, cert: serverPem, ca: caPem, requestCert: true, rejectUnauthorized: true },
      (req, res) => {
        const peer = (req.socket as import("node:tls").TLSSocket).getPeerCertificate();
        seen.push({ cn: peer?.subject?.CN?.toString(), authorization: req.headers.authorization });
        res.writeHead(200, { "content-type": "application/json" });
        res.end(
          JSON.stringify({
            apiVersion: "v1",
            kind: "PersistentVolumeClaim",
            metadata: {
              name: "data",
              namespace: "ns",
              resourceVersion: "9",
              creationTimestamp: "2024-01-02T03:04:05Z",
            },
            spec: {},
          }),
        );
      },
    );
    server.on("secureConnection", () => tlsConnections++);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    t.after(() => server.close());
    const port = (server.address() as AddressInfo).port;

    const b64 = (s: string) => Buffer.from(s).toString("base64");
    const kc = new KubeConfig();
    kc.loadFromString(
      [
        "apiVersion: v1",
        "kind: Config",
        "clusters:",
        "- name: real",
        "  cluster:",
        `    server: https://127.0.0.1:${port}`,
        `    certificate-authority-data: ${b64(caPem)}`,
        "users:",
        "- name: me",
        "  user:",
        `    client-certificate-data: ${b64(first.cert)}`,
        `    client-key-data: ${b64(first.key)}`,
        "    token: s3cret",
        "contexts:",
        "- name: real",
        "  context: {cluster: real, user: me}",
        "current-context: real",
      ].join("\n"),
    );
    const client = new KubeJsonClient(kc, { authReuseMs: 0 });
    t.after(() => client.close());

    for (let i = 0; i < 50; i++) {
      const claim = await client.get<PersistentVolumeClaim>(persistentVolumeClaims, "data", "ns");
      assert.equal(claim.metadata.creationTimestamp, "2024-01-02T03:04:05Z");
    }
    assert.ok(tlsConnections <= 2, `50 GETs opened ${tlsConnections} TLS connections`);
    assert.deepEqual(seen[0], { cn: "storage-functions", authorization: "Bearer s3cret" });

    // Concurrent requests while the pool is being built share one dispatcher.
    const fresh = new KubeJsonClient(kc);
    t.after(() => fresh.close());
    tlsConnections = 0;
    await Promise.all(Array.from({ length: 5 }, () => fresh.get(persistentVolumeClaims, "data", "ns")));
    for (let i = 0; i < 5; i++) await fresh.get(persistentVolumeClaims, "data", "ns");
    assert.ok(tlsConnections <= 5, `${tlsConnections} TLS connections`);

    // A rotated client certificate (as an exec plugin would hand out) is used
    // on the next request, over a new connection; the old pool is closed.
    const user = kc.getCurrentUser() as { certData?: string; keyData?: string };
    user.certData = b64(rotated.cert);
    user.keyData = b64(rotated.key);
    tlsConnections = 0;
    seen.length = 0;
    for (let i = 0; i < 10; i++) await client.get(persistentVolumeClaims, "data", "ns");
    assert.ok(tlsConnections >= 1 && tlsConnections <= 2, `${tlsConnections} TLS connections after rotation`);
    assert.deepEqual(new Set(seen.map((s) => s.cn)), new Set(["storage-functions-rotated"]));

    // A server certificate the cluster CA did not sign is refused, and that is not transient.
    const otherKey = keyPair();
    const otherCa = certificate(
      "other-ca",
      otherKey,
      otherKey,
      [{ name: "basicConstraints", cA: true }],
      "05",
    );
    const wrong = new KubeConfig();
    wrong.loadFromString(kc.exportConfig());
    const cluster = wrong.getCurrentCluster() as { caData?: string };
    cluster.caData = b64(otherCa);
    const distrustful = new KubeJsonClient(wrong);
    t.after(() => distrustful.close());
    const err = await rejection(distrustful.get(persistentVolumeClaims, "data", "ns"));
    assert.ok(err instanceof KubeRequestError);
    assert.ok(
      !isTransient(err),
      `TLS verification failure (${networkErrorCodeOf(err)}) is configuration, not weather`,
    );
  });
});
