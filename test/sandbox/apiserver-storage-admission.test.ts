// kube-apiserver's default storage admission plugins in the sandbox API
// server: DefaultStorageClass and StorageObjectInUseProtection on CREATE of
// the main resource, before any webhook, and what `disableAdmissionPlugins`
// (kube-apiserver's --disable-admission-plugins) turns off.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, beforeEach, describe, it } from "node:test";
import { type ApiServerHandle, startApiServer } from "../../sandbox/apiserver/server.ts";
import {
  admitStorageCreate,
  STORAGE_ADMISSION_PLUGINS,
  type StorageAdmissionPlugin,
} from "../../sandbox/apiserver/storage-admission.ts";
import type { KubeObject } from "../../sandbox/apiserver/store.ts";

const all = new Set<StorageAdmissionPlugin>(STORAGE_ADMISSION_PLUGINS);

function storageClass(name: string, created: string, annotations: Record<string, string> = {}): KubeObject {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: { name, creationTimestamp: created, annotations },
    provisioner: "x.csi",
  } as KubeObject;
}

const isDefault = { "storageclass.kubernetes.io/is-default-class": "true" };
const isBetaDefault = { "storageclass.beta.kubernetes.io/is-default-class": "true" };

function claim(spec: Record<string, unknown> = {}, metadata: Record<string, unknown> = {}): KubeObject {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name: "c", namespace: "default", ...metadata },
    spec: { accessModes: ["ReadWriteOnce"], resources: { requests: { storage: "1Gi" } }, ...spec },
  } as KubeObject;
}

describe("admitStorageCreate", () => {
  const classes = [
    storageClass("old-default", "2026-01-01T00:00:00Z", isDefault),
    storageClass("b-new-default", "2026-06-01T00:00:00Z", isBetaDefault),
    storageClass("a-new-default", "2026-06-01T00:00:00Z", isDefault),
    storageClass("newest-not-default", "2026-09-01T00:00:00Z", {
      "storageclass.kubernetes.io/is-default-class": "false",
    }),
  ];
  const cases: {
    name: string;
    object: KubeObject;
    plural?: string;
    enabled?: ReadonlySet<StorageAdmissionPlugin>;
    classes?: KubeObject[];
    finalizers: string[] | undefined;
    storageClassName?: unknown;
  }[] = [
    {
      name: "no class: the newest default, ties by name; the finalizer appended",
      object: claim(),
      finalizers: ["kubernetes.io/pvc-protection"],
      storageClassName: "a-new-default",
    },
    {
      name: 'an empty class is a class: left ""',
      object: claim({ storageClassName: "" }),
      finalizers: ["kubernetes.io/pvc-protection"],
      storageClassName: "",
    },
    {
      name: "the beta class annotation is a class, whatever its value",
      object: claim({}, { annotations: { "volume.beta.kubernetes.io/storage-class": "" } }),
      finalizers: ["kubernetes.io/pvc-protection"],
      storageClassName: undefined,
    },
    {
      name: "no default class: unchanged",
      object: claim(),
      classes: [storageClass("plain", "2026-01-01T00:00:00Z")],
      finalizers: ["kubernetes.io/pvc-protection"],
      storageClassName: undefined,
    },
    {
      name: "a finalizer already there is not added twice; others are kept in order",
      object: claim({ storageClassName: "x" }, { finalizers: ["kubernetes.io/pvc-protection", "mine"] }),
      finalizers: ["kubernetes.io/pvc-protection", "mine"],
      storageClassName: "x",
    },
    {
      name: "a PV gets pv-protection after its own finalizers",
      plural: "persistentvolumes",
      object: { apiVersion: "v1", kind: "PersistentVolume", metadata: { name: "v", finalizers: ["mine"] } },
      finalizers: ["mine", "kubernetes.io/pv-protection"],
    },
    {
      name: "both plugins disabled: nothing changes",
      object: claim(),
      enabled: new Set(["PersistentVolumeClaimResize"]),
      finalizers: undefined,
      storageClassName: undefined,
    },
    {
      name: "other kinds: nothing changes",
      plural: "configmaps",
      object: { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "m" } },
      finalizers: undefined,
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const o = structuredClone(c.object);
      admitStorageCreate(
        c.plural ?? "persistentvolumeclaims",
        "",
        o,
        c.enabled ?? all,
        () => c.classes ?? classes,
      );
      assert.deepEqual(o.metadata.finalizers, c.finalizers);
      if ("storageClassName" in c)
        assert.equal((o.spec as Record<string, unknown> | undefined)?.storageClassName, c.storageClassName);
    });
  }
});

describe("over HTTP", () => {
  let onServer: ApiServerHandle;
  let offServer: ApiServerHandle;
  before(async () => {
    onServer = await startApiServer();
    offServer = await startApiServer({ disableAdmissionPlugins: [...STORAGE_ADMISSION_PLUGINS] });
  });
  after(async () => {
    await onServer.close();
    await offServer.close();
  });
  beforeEach(async () => {
    for (const s of [onServer, offServer]) await fetch(`${s.url}/_sandbox/reset`, { method: "POST" });
  });

  async function call(
    server: ApiServerHandle,
    method: string,
    path: string,
    body?: unknown,
    contentType = "application/json",
  ): Promise<{ status: number; body: KubeObject & { message?: string } }> {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: { "content-type": contentType },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: res.status, body: (await res.json()) as KubeObject & { message?: string } };
  }
  const claims = "/api/v1/namespaces/default/persistentvolumeclaims";
  const volumes = "/api/v1/persistentvolumes";
  const volume = {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name: "v1" },
    spec: {
      capacity: { storage: "1Gi" },
      accessModes: ["ReadWriteOnce"],
      csi: { driver: "x.csi", volumeHandle: "h" },
    },
  };

  /** A default class "std", then a claim with no class at all. */
  async function classlessClaimBesideDefaultClass(server: ApiServerHandle): Promise<KubeObject> {
    await call(server, "POST", "/apis/storage.k8s.io/v1/storageclasses", storageClass("std", "", isDefault));
    const created = await call(server, "POST", claims, claim());
    assert.equal(created.status, 201, JSON.stringify(created.body));
    return created.body;
  }

  it("a new claim gets the default class and pvc-protection, a new PV pv-protection; an update does not add them back", async () => {
    const created = await classlessClaimBesideDefaultClass(onServer);
    assert.equal((created.spec as Record<string, unknown>).storageClassName, "std");
    assert.deepEqual(created.metadata.finalizers, ["kubernetes.io/pvc-protection"]);
    const pv = await call(onServer, "POST", volumes, volume);
    assert.equal(pv.status, 201, JSON.stringify(pv.body));
    assert.deepEqual(pv.body.metadata.finalizers, ["kubernetes.io/pv-protection"]);

    const cleared = await call(
      onServer,
      "PATCH",
      `${claims}/c`,
      { metadata: { finalizers: null } },
      "application/merge-patch+json",
    );
    assert.equal(cleared.status, 200);
    assert.equal(cleared.body.metadata.finalizers, undefined, "only CREATE is admitted by the plugin");
    assert.equal((await call(onServer, "DELETE", `${claims}/c`)).status, 200);
    assert.equal((await call(onServer, "GET", `${claims}/c`)).status, 404, "nothing holds it back");
  });

  it("a deleted claim waits for its pvc-protection finalizer, as on kube-apiserver", async () => {
    assert.equal((await call(onServer, "POST", claims, claim({ storageClassName: "" }))).status, 201);
    assert.equal((await call(onServer, "DELETE", `${claims}/c`)).status, 200);
    const left = await call(onServer, "GET", `${claims}/c`);
    assert.equal(left.status, 200);
    assert.ok(left.body.metadata.deletionTimestamp);
  });

  it("with the plugins disabled: no class, no finalizers, and no resize check", async () => {
    const created = await classlessClaimBesideDefaultClass(offServer);
    assert.equal((created.spec as Record<string, unknown>).storageClassName, undefined);
    assert.equal(created.metadata.finalizers, undefined);
    assert.equal((await call(offServer, "POST", volumes, volume)).body.metadata.finalizers, undefined);
    // PersistentVolumeClaimResize refuses growing a Bound claim whose class does not allow expansion.
    const grow = async (server: ApiServerHandle) => {
      await call(server, "POST", "/apis/storage.k8s.io/v1/storageclasses", storageClass("fixed", ""));
      const made = await call(
        server,
        "POST",
        claims,
        claim({ storageClassName: "fixed", volumeName: "v9" }, { name: "g" }),
      );
      assert.equal(made.status, 201, JSON.stringify(made.body));
      const bound = await call(
        server,
        "PATCH",
        `${claims}/g/status`,
        { status: { phase: "Bound", capacity: { storage: "1Gi" } } },
        "application/merge-patch+json",
      );
      assert.equal(bound.status, 200, JSON.stringify(bound.body));
      const grown = { spec: { resources: { requests: { storage: "2Gi" } } } };
      return call(server, "PATCH", `${claims}/g`, grown, "application/merge-patch+json");
    };
    const off = await grow(offServer);
    assert.equal(off.status, 200, JSON.stringify(off.body));
    const on = await grow(onServer);
    assert.equal(on.status, 403, JSON.stringify(on.body));
    assert.match(on.body.message ?? "", /only dynamically provisioned pvc can be resized/);
  });
});

describe("npm run sandbox", () => {
  it("refuses a plugin name kube-apiserver's list does not have, and names the known ones", async () => {
    const child = spawn(process.execPath, ["sandbox/main.ts"], {
      env: {
        ...process.env,
        SANDBOX_PORT: "0",
        SANDBOX_DISABLE_ADMISSION_PLUGINS: "DefaultStorageClass,Bogus",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
    assert.equal(code, 2);
    assert.match(stderr, /SANDBOX_DISABLE_ADMISSION_PLUGINS names "Bogus"; known: DefaultStorageClass, /);
  });
});
