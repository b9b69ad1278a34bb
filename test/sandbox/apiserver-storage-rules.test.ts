// The sandbox API server as kube-apiserver 1.34+ for the resize and modify
// work, over real HTTP with @kubernetes/client-node: VolumeAttributesClass
// and CSIStorageCapacity served and validated, CSIDriver storageCapacity, the
// claim and volume rules of RecoverVolumeExpansionFailure and
// VolumeAttributesClass, and the PersistentVolumeClaimResize plugin.
import assert from "node:assert/strict";
import { after, before, beforeEach, describe, it } from "node:test";
import {
  ApiException,
  CoreV1Api,
  KubeConfig,
  StorageV1Api,
  type V1PersistentVolume,
  type V1PersistentVolumeClaim,
} from "@kubernetes/client-node";
import { type ApiServerHandle, startApiServer } from "../../sandbox/apiserver/server.ts";

let api: ApiServerHandle;
let core: CoreV1Api;
let storage: StorageV1Api;

before(async () => {
  api = await startApiServer();
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: "sandbox", server: api.url, skipTLSVerify: true }],
    users: [{ name: "u" }],
    contexts: [{ name: "c", cluster: "sandbox", user: "u" }],
    currentContext: "c",
  });
  core = kc.makeApiClient(CoreV1Api);
  storage = kc.makeApiClient(StorageV1Api);
});
after(() => api.close());
beforeEach(async () => {
  await fetch(`${api.url}/_sandbox/reset`, { method: "POST" });
});

const ns = "default";

/** client-node answers class instances; compare their data. */
function plain(v: unknown): unknown {
  return JSON.parse(JSON.stringify(v ?? null));
}

interface Failure {
  code: number;
  message: string;
  reason: string;
  causes: { reason?: string; field?: string; message?: string }[];
}

async function failure(p: Promise<unknown>): Promise<Failure> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof ApiException, `expected ApiException, got ${String(e)}`);
    const body = (typeof e.body === "string" ? JSON.parse(e.body) : e.body) as {
      message: string;
      reason: string;
      details?: { causes?: Failure["causes"] };
    };
    return { code: e.code, message: body.message, reason: body.reason, causes: body.details?.causes ?? [] };
  }
  assert.fail("expected the call to fail");
}

describe("discovery", () => {
  it("storage.k8s.io/v1 lists volumeattributesclasses (cluster-scoped, vac) and csistoragecapacities (namespaced)", async () => {
    const res = await fetch(`${api.url}/apis/storage.k8s.io/v1`);
    const list = (await res.json()) as {
      resources: {
        name: string;
        kind: string;
        namespaced: boolean;
        shortNames?: string[];
        verbs: string[];
      }[];
    };
    const vac = list.resources.find((r) => r.name === "volumeattributesclasses");
    const cap = list.resources.find((r) => r.name === "csistoragecapacities");
    assert.deepEqual(
      { kind: vac?.kind, namespaced: vac?.namespaced, shortNames: vac?.shortNames },
      { kind: "VolumeAttributesClass", namespaced: false, shortNames: ["vac"] },
    );
    assert.deepEqual(
      { kind: cap?.kind, namespaced: cap?.namespaced },
      { kind: "CSIStorageCapacity", namespaced: true },
    );
    for (const r of [vac, cap]) assert.ok(r?.verbs.includes("watch") && r.verbs.includes("update"));
  });
});

describe("VolumeAttributesClass", () => {
  const gold = {
    apiVersion: "storage.k8s.io/v1",
    kind: "VolumeAttributesClass",
    metadata: { name: "gold" },
    driverName: "hostpath.csi.k8s.io",
    parameters: { iops: "3000" },
  };

  it("create, get, list, update of metadata, delete", async () => {
    const created = await storage.createVolumeAttributesClass({ body: gold });
    assert.equal(created.driverName, "hostpath.csi.k8s.io");
    assert.deepEqual(created.parameters, { iops: "3000" });
    const read = await storage.readVolumeAttributesClass({ name: "gold" });
    assert.equal(read.metadata?.uid, created.metadata?.uid);
    const listed = await storage.listVolumeAttributesClass();
    assert.deepEqual(
      listed.items.map((i) => i.metadata?.name),
      ["gold"],
    );
    const relabelled = await storage.replaceVolumeAttributesClass({
      name: "gold",
      body: { ...read, metadata: { ...read.metadata, labels: { tier: "1" } } },
    });
    assert.deepEqual(relabelled.metadata?.labels, { tier: "1" });
    await storage.deleteVolumeAttributesClass({ name: "gold" });
    assert.equal((await failure(storage.readVolumeAttributesClass({ name: "gold" }))).code, 404);
  });

  const invalidCreates: { name: string; body: Record<string, unknown>; message: string }[] = [
    {
      name: "driverName missing",
      body: { ...gold, driverName: undefined },
      message: 'VolumeAttributesClass.storage.k8s.io "gold" is invalid: driverName: Required value',
    },
    {
      name: "driverName not a qualified name",
      body: { ...gold, driverName: "a/b/c" },
      message:
        "VolumeAttributesClass.storage.k8s.io \"gold\" is invalid: driverName: Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
    },
    {
      name: "parameters missing: at least one pair is required",
      body: { ...gold, parameters: undefined },
      message:
        'VolumeAttributesClass.storage.k8s.io "gold" is invalid: parameters: Required value: must contain at least one key/value pair',
    },
    {
      name: "more than 512 parameters",
      body: {
        ...gold,
        parameters: Object.fromEntries(Array.from({ length: 513 }, (_, i) => [`k${i}`, "v"])),
      },
      message:
        'VolumeAttributesClass.storage.k8s.io "gold" is invalid: parameters: Too long: may not be more than 512 bytes',
    },
    {
      name: "parameters over 256 KiB",
      body: { ...gold, parameters: { big: "x".repeat(256 * 1024) } },
      message:
        'VolumeAttributesClass.storage.k8s.io "gold" is invalid: parameters: Too long: may not be more than 262144 bytes',
    },
  ];
  for (const c of invalidCreates) {
    it(`create refused, 422: ${c.name}`, async () => {
      const f = await failure(storage.createVolumeAttributesClass({ body: c.body as typeof gold }));
      assert.equal(f.code, 422);
      assert.equal(f.reason, "Invalid");
      assert.equal(f.message, c.message);
    });
  }

  it("driverName and parameters are immutable, each with upstream's Forbidden", async () => {
    const created = await storage.createVolumeAttributesClass({ body: gold });
    const f = await failure(
      storage.replaceVolumeAttributesClass({
        name: "gold",
        body: { ...created, driverName: "other.csi.k8s.io", parameters: { iops: "6000" } },
      }),
    );
    assert.equal(f.code, 422);
    assert.equal(
      f.message,
      'VolumeAttributesClass.storage.k8s.io "gold" is invalid: [driverName: Forbidden: updates to driverName are forbidden., parameters: Forbidden: updates to parameters are forbidden.]',
    );
    assert.deepEqual(
      f.causes.map((c) => [c.reason, c.field]),
      [
        ["FieldValueForbidden", "driverName"],
        ["FieldValueForbidden", "parameters"],
      ],
    );
    assert.deepEqual((await storage.readVolumeAttributesClass({ name: "gold" })).parameters, {
      iops: "3000",
    });
  });
});

describe("CSIStorageCapacity", () => {
  const body = (name: string, extra: Record<string, unknown> = {}) => ({
    apiVersion: "storage.k8s.io/v1",
    kind: "CSIStorageCapacity",
    metadata: { name, labels: { "csi.storage.k8s.io/drivername": "hostpath.csi.k8s.io" } },
    storageClassName: "fast",
    nodeTopology: { matchLabels: { "topology.hostpath.csi/node": "node-1" } },
    capacity: "10Gi",
    maximumVolumeSize: "5Gi",
    ...extra,
  });

  it("create, list by label, update of capacity and maximumVolumeSize, delete", async () => {
    const created = await storage.createNamespacedCSIStorageCapacity({
      namespace: ns,
      body: body("csisc-a"),
    });
    assert.equal(created.capacity, "10Gi");
    assert.equal(created.maximumVolumeSize, "5Gi");
    assert.deepEqual(plain(created.nodeTopology), {
      matchLabels: { "topology.hostpath.csi/node": "node-1" },
    });
    await storage.createNamespacedCSIStorageCapacity({
      namespace: ns,
      body: { ...body("csisc-b"), metadata: { name: "csisc-b" } },
    });
    const mine = await storage.listNamespacedCSIStorageCapacity({
      namespace: ns,
      labelSelector: "csi.storage.k8s.io/drivername=hostpath.csi.k8s.io",
    });
    assert.deepEqual(
      mine.items.map((i) => i.metadata?.name),
      ["csisc-a"],
    );
    const updated = await storage.replaceNamespacedCSIStorageCapacity({
      name: "csisc-a",
      namespace: ns,
      body: { ...created, capacity: "0", maximumVolumeSize: "1Gi" },
    });
    assert.equal(updated.capacity, "0");
    assert.equal(updated.maximumVolumeSize, "1Gi");
    await storage.deleteNamespacedCSIStorageCapacity({ name: "csisc-a", namespace: ns });
    const left = await storage.listNamespacedCSIStorageCapacity({ namespace: ns });
    assert.deepEqual(
      left.items.map((i) => i.metadata?.name),
      ["csisc-b"],
    );
  });

  it("generateName works (the provisioner creates csisc-<random>)", async () => {
    const created = await storage.createNamespacedCSIStorageCapacity({
      namespace: ns,
      body: { ...body(""), metadata: { generateName: "csisc-" } },
    });
    assert.match(created.metadata?.name ?? "", /^csisc-[a-z0-9]{5}$/);
  });

  it("an invalid name is 422 Invalid (the external-provisioner's probe for the v1 API)", async () => {
    const f = await failure(
      storage.createNamespacedCSIStorageCapacity({ namespace: ns, body: body("#%123-invalid-name") }),
    );
    assert.equal(f.code, 422);
    assert.equal(f.reason, "Invalid");
  });

  const invalidCreates: {
    name: string;
    extra: Record<string, unknown>;
    causes: [string, string, RegExp][];
  }[] = [
    {
      name: "storageClassName missing",
      extra: { storageClassName: undefined },
      causes: [
        ["FieldValueInvalid", "storageClassName", /^Invalid value: "": a lowercase RFC 1123 subdomain/],
      ],
    },
    {
      name: "negative capacity",
      extra: { capacity: "-1Gi" },
      causes: [
        ["FieldValueInvalid", "capacity", /^Invalid value: "-1Gi": must be greater than or equal to 0$/],
      ],
    },
    {
      name: "maximumVolumeSize not a quantity",
      extra: { maximumVolumeSize: "big" },
      causes: [["FieldValueInvalid", "maximumVolumeSize", /^Invalid value: "big": quantities must match/]],
    },
    {
      name: "a selector operator that does not exist",
      extra: { nodeTopology: { matchExpressions: [{ key: "zone", operator: "Near", values: ["a"] }] } },
      causes: [
        [
          "FieldValueInvalid",
          "nodeTopology.matchExpressions[0].operator",
          /^Invalid value: "Near": not a valid selector operator$/,
        ],
      ],
    },
    {
      name: "In without values",
      extra: { nodeTopology: { matchExpressions: [{ key: "zone", operator: "In" }] } },
      causes: [
        [
          "FieldValueRequired",
          "nodeTopology.matchExpressions[0].values",
          /^Required value: must be specified when `operator` is 'In' or 'NotIn'$/,
        ],
      ],
    },
  ];
  for (const c of invalidCreates) {
    it(`create refused, 422: ${c.name}`, async () => {
      const f = await failure(
        storage.createNamespacedCSIStorageCapacity({
          namespace: ns,
          body: body("c", c.extra) as ReturnType<typeof body> & { storageClassName: string },
        }),
      );
      assert.equal(f.code, 422);
      assert.equal(f.causes.length, c.causes.length, JSON.stringify(f.causes));
      c.causes.forEach(([reason, field, message], i) => {
        assert.equal(f.causes[i]?.reason, reason);
        assert.equal(f.causes[i]?.field, field);
        assert.match(f.causes[i]?.message ?? "", message);
      });
    });
  }

  it("storageClassName and nodeTopology are immutable: Invalid, field is immutable", async () => {
    const created = await storage.createNamespacedCSIStorageCapacity({
      namespace: ns,
      body: body("csisc-a"),
    });
    const f = await failure(
      storage.replaceNamespacedCSIStorageCapacity({
        name: "csisc-a",
        namespace: ns,
        body: { ...created, storageClassName: "slow", nodeTopology: {} },
      }),
    );
    assert.equal(f.code, 422);
    assert.deepEqual(
      f.causes.map((c) => [c.field, c.message]),
      [
        ["nodeTopology", "Invalid value: {}: field is immutable"],
        ["storageClassName", 'Invalid value: "slow": field is immutable'],
      ],
    );
  });
});

describe("CSIDriver spec.storageCapacity", () => {
  it("defaults to false, is stored as sent, and may change (mutable since 1.23); attachRequired may not", async () => {
    const plain = await storage.createCSIDriver({
      body: { metadata: { name: "plain.csi.k8s.io" }, spec: {} },
    });
    assert.equal(plain.spec.storageCapacity, false);
    const created = await storage.createCSIDriver({
      body: { metadata: { name: "cap.csi.k8s.io" }, spec: { storageCapacity: true, attachRequired: false } },
    });
    assert.equal(created.spec.storageCapacity, true);
    assert.equal((await storage.readCSIDriver({ name: "cap.csi.k8s.io" })).spec.storageCapacity, true);
    const off = await storage.replaceCSIDriver({
      name: "cap.csi.k8s.io",
      body: { ...created, spec: { ...created.spec, storageCapacity: false } },
    });
    assert.equal(off.spec.storageCapacity, false);
    const f = await failure(
      storage.replaceCSIDriver({
        name: "cap.csi.k8s.io",
        body: { ...off, spec: { ...off.spec, attachRequired: true } },
      }),
    );
    assert.equal(f.code, 422);
    assert.equal(
      f.message,
      'CSIDriver.storage.k8s.io "cap.csi.k8s.io" is invalid: spec.attachedRequired: Invalid value: true: field is immutable',
    );
  });
});

function claim(
  name: string,
  size: string,
  spec: Partial<V1PersistentVolumeClaim["spec"]> = {},
): V1PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name },
    spec: {
      accessModes: ["ReadWriteOnce"],
      storageClassName: "fast",
      resources: { requests: { storage: size } },
      ...spec,
    },
  };
}

async function storageClass(allowVolumeExpansion: boolean): Promise<void> {
  await storage.createStorageClass({
    body: { metadata: { name: "fast" }, provisioner: "hostpath.csi.k8s.io", allowVolumeExpansion },
  });
}

/** A claim bound by status write (as the binder would): phase Bound, capacity as given. */
async function boundClaim(
  name: string,
  size: string,
  capacity = size,
  spec = {},
): Promise<V1PersistentVolumeClaim> {
  const created = await core.createNamespacedPersistentVolumeClaim({
    namespace: ns,
    body: claim(name, size, { volumeName: `pv-${name}`, ...spec }),
  });
  return core.replaceNamespacedPersistentVolumeClaimStatus({
    name,
    namespace: ns,
    body: { ...created, status: { phase: "Bound", capacity: { storage: capacity } } },
  });
}

function resized(c: V1PersistentVolumeClaim, size: string): V1PersistentVolumeClaim {
  return { ...c, spec: { ...c.spec, resources: { requests: { storage: size } } } };
}

async function replace(c: V1PersistentVolumeClaim): Promise<V1PersistentVolumeClaim> {
  return core.replaceNamespacedPersistentVolumeClaim({
    name: c.metadata?.name ?? "",
    namespace: ns,
    body: c,
  });
}

describe("claim size: expansion (PersistentVolumeClaimResize) and recovery (RecoverVolumeExpansionFailure)", () => {
  it("a Bound claim of a class that allows expansion grows, then lowers back while above status.capacity", async () => {
    await storageClass(true);
    const c = await boundClaim("data", "1Gi");
    const grown = await replace(resized(c, "3Gi"));
    assert.equal(grown.spec?.resources?.requests?.storage, "3Gi");
    // The expansion failed; capacity is still 1Gi. The user backs out to 2Gi.
    const lowered = await replace(resized(grown, "2Gi"));
    assert.equal(lowered.spec?.resources?.requests?.storage, "2Gi");
  });

  it("lowering to status.capacity or below: 422 Forbidden with upstream's message", async () => {
    await storageClass(true);
    const grown = await replace(resized(await boundClaim("data", "1Gi"), "3Gi"));
    for (const size of ["1Gi", "1024Mi", "500Mi"]) {
      const f = await failure(replace(resized(grown, size)));
      assert.equal(f.code, 422);
      assert.equal(
        f.message,
        'PersistentVolumeClaim "data" is invalid: spec.resources.requests.storage: Forbidden: field can not be less than status.capacity',
      );
    }
  });

  it("growing when the class does not allow it: 403 from the admission plugin", async () => {
    await storageClass(false);
    const f = await failure(replace(resized(await boundClaim("data", "1Gi"), "2Gi")));
    assert.equal(f.code, 403);
    assert.equal(f.reason, "Forbidden");
    assert.equal(
      f.message,
      'persistentvolumeclaims "data" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize',
    );
  });

  it("growing when the class does not exist: 403", async () => {
    const f = await failure(replace(resized(await boundClaim("data", "1Gi"), "2Gi")));
    assert.equal(f.code, 403);
    assert.match(f.message, /must support resize$/);
  });

  it("growing a Pending claim: validation's 422 (spec immutable) comes before the plugin", async () => {
    await storageClass(true);
    const c = await core.createNamespacedPersistentVolumeClaim({ namespace: ns, body: claim("data", "1Gi") });
    const f = await failure(replace(resized(c, "2Gi")));
    assert.equal(f.code, 422);
    assert.match(f.message, /spec: Forbidden: spec is immutable after creation except resources\.requests/);
  });

  it("a status write cannot grow anything: the plugin looks at main-resource writes only", async () => {
    const c = await boundClaim("data", "1Gi");
    const written = await core.replaceNamespacedPersistentVolumeClaimStatus({
      name: "data",
      namespace: ns,
      body: { ...c, status: { ...c.status, capacity: { storage: "5Gi" } } },
    });
    assert.equal(written.status?.capacity?.storage, "5Gi");
  });
});

describe("claim volumeAttributesClassName", () => {
  it("a Bound claim may set and change it", async () => {
    const c = await boundClaim("data", "1Gi");
    const gold = await replace({ ...c, spec: { ...c.spec, volumeAttributesClassName: "gold" } });
    assert.equal(gold.spec?.volumeAttributesClassName, "gold");
    const silver = await replace({ ...gold, spec: { ...gold.spec, volumeAttributesClassName: "silver" } });
    assert.equal(silver.spec?.volumeAttributesClassName, "silver");
  });

  it('set to "" once set: 422 Forbidden', async () => {
    const c = await boundClaim("data", "1Gi", "1Gi", { volumeAttributesClassName: "gold" });
    const f = await failure(replace({ ...c, spec: { ...c.spec, volumeAttributesClassName: "" } }));
    assert.equal(f.code, 422);
    assert.equal(
      f.message,
      'PersistentVolumeClaim "data" is invalid: spec.volumeAttributesClassName: Forbidden: update from non-nil value to an empty string is forbidden',
    );
  });

  it("unset once set: 422, spec immutable and Forbidden", async () => {
    const c = await boundClaim("data", "1Gi", "1Gi", { volumeAttributesClassName: "gold" });
    const spec = { ...c.spec };
    delete spec.volumeAttributesClassName;
    const f = await failure(replace({ ...c, spec }));
    assert.equal(f.code, 422);
    assert.deepEqual(
      f.causes.map((x) => [x.field, x.message]),
      [
        [
          "spec",
          "Forbidden: spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims",
        ],
        ["spec.volumeAttributesClassName", "Forbidden: update from non-nil value to nil is forbidden"],
      ],
    );
  });

  it("null is no class, as absent: a PUT that spells unset fields as null changes nothing", async () => {
    const c = await boundClaim("data", "1Gi");
    const body = JSON.parse(JSON.stringify(c)) as { spec: Record<string, unknown> };
    body.spec.volumeAttributesClassName = null;
    body.spec.selector = null;
    const res = await fetch(`${api.url}/api/v1/namespaces/${ns}/persistentvolumeclaims/data`, {
      method: "PUT",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
    });
    assert.equal(res.status, 200, await res.text());
  });

  it("a Pending claim may not change it", async () => {
    const c = await core.createNamespacedPersistentVolumeClaim({
      namespace: ns,
      body: claim("data", "1Gi", { volumeAttributesClassName: "gold" }),
    });
    const f = await failure(replace({ ...c, spec: { ...c.spec, volumeAttributesClassName: "silver" } }));
    assert.equal(f.code, 422);
    assert.match(f.message, /spec: Forbidden: spec is immutable/);
  });

  it("a name that is not a DNS subdomain: 422 Invalid on create", async () => {
    const f = await failure(
      core.createNamespacedPersistentVolumeClaim({
        namespace: ns,
        body: claim("data", "1Gi", { volumeAttributesClassName: "Gold!" }),
      }),
    );
    assert.equal(f.code, 422);
    assert.deepEqual(
      f.causes.map((x) => x.field),
      ["spec.volumeAttributesClassName"],
    );
  });
});

describe("claim status writes", () => {
  it("allocatedResources, allocatedResourceStatuses, currentVolumeAttributesClassName and modifyVolumeStatus round-trip", async () => {
    const c = await boundClaim("data", "1Gi");
    const status = {
      ...c.status,
      allocatedResources: { storage: "3Gi" },
      allocatedResourceStatuses: { storage: "ControllerResizeInProgress" },
      currentVolumeAttributesClassName: "gold",
      modifyVolumeStatus: { targetVolumeAttributesClassName: "silver", status: "InProgress" },
    };
    const written = await core.replaceNamespacedPersistentVolumeClaimStatus({
      name: "data",
      namespace: ns,
      body: { ...c, status },
    });
    const read = await core.readNamespacedPersistentVolumeClaim({ name: "data", namespace: ns });
    for (const o of [written, read]) {
      assert.deepEqual(o.status?.allocatedResources, { storage: "3Gi" });
      assert.deepEqual(o.status?.allocatedResourceStatuses, { storage: "ControllerResizeInProgress" });
      assert.equal(o.status?.currentVolumeAttributesClassName, "gold");
      assert.deepEqual(plain(o.status?.modifyVolumeStatus), {
        targetVolumeAttributesClassName: "silver",
        status: "InProgress",
      });
    }
  });

  const refused: { name: string; status: Record<string, unknown>; causes: [string, string, string][] }[] = [
    {
      name: "an unknown resize status (upstream names the key as the bad value)",
      status: { allocatedResourceStatuses: { storage: "Resizing" } },
      causes: [
        [
          "FieldValueNotSupported",
          "status.allocatedResourceStatus",
          'Unsupported value: "storage": supported values: "ControllerResizeInProgress", "ControllerResizeInfeasible", "NodeResizeInProgress", "NodeResizeInfeasible", "NodeResizePending"',
        ],
      ],
    },
    {
      name: "a resize status for a resource other than storage",
      status: { allocatedResourceStatuses: { cpu: "NodeResizePending" } },
      causes: [
        [
          "FieldValueNotSupported",
          "status.allocatedResourceStatus",
          'Unsupported value: "cpu": supported values: "storage"',
        ],
      ],
    },
    {
      name: "allocatedResources for a resource other than storage",
      status: { allocatedResources: { memory: "1Gi" } },
      causes: [
        [
          "FieldValueNotSupported",
          "status.allocatedResources",
          'Unsupported value: "memory": supported values: "storage"',
        ],
      ],
    },
    {
      name: "a negative allocatedResources",
      status: { allocatedResources: { storage: "-1Gi" } },
      causes: [
        [
          "FieldValueInvalid",
          "status.allocatedResources[storage]",
          "Invalid value: -1073741824: must be a valid resource quantity",
        ],
      ],
    },
  ];
  for (const c of refused) {
    it(`refused, 422: ${c.name}`, async () => {
      const claimNow = await boundClaim("data", "1Gi");
      const f = await failure(
        core.replaceNamespacedPersistentVolumeClaimStatus({
          name: "data",
          namespace: ns,
          body: { ...claimNow, status: { ...claimNow.status, ...c.status } } as V1PersistentVolumeClaim,
        }),
      );
      assert.equal(f.code, 422);
      assert.deepEqual(
        f.causes.map((x) => [x.reason, x.field, x.message]),
        c.causes,
      );
    });
  }

  it("a prefixed resource name is not Kubernetes' own and is accepted (as upstream)", async () => {
    const c = await boundClaim("data", "1Gi");
    const written = await core.replaceNamespacedPersistentVolumeClaimStatus({
      name: "data",
      namespace: ns,
      body: {
        ...c,
        status: { ...c.status, allocatedResources: { storage: "1Gi", "example.com/iops": "100" } },
      },
    });
    assert.equal(written.status?.allocatedResources?.["example.com/iops"], "100");
  });
});

function volume(name: string, spec: Partial<V1PersistentVolume["spec"]> = {}): V1PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name },
    spec: {
      accessModes: ["ReadWriteOnce"],
      capacity: { storage: "1Gi" },
      csi: { driver: "hostpath.csi.k8s.io", volumeHandle: name },
      ...spec,
    },
  };
}

describe("volume volumeAttributesClassName", () => {
  it("set on a CSI volume, changed (as the resizer does), never removed", async () => {
    const created = await core.createPersistentVolume({
      body: volume("pv-1", { volumeAttributesClassName: "gold" }),
    });
    const silver = await core.replacePersistentVolume({
      name: "pv-1",
      body: { ...created, spec: { ...created.spec, volumeAttributesClassName: "silver" } },
    });
    assert.equal(silver.spec?.volumeAttributesClassName, "silver");
    const spec = { ...silver.spec };
    delete spec.volumeAttributesClassName;
    const f = await failure(core.replacePersistentVolume({ name: "pv-1", body: { ...silver, spec } }));
    assert.equal(f.code, 422);
    assert.equal(
      f.message,
      'PersistentVolume "pv-1" is invalid: spec.volumeAttributesClassName: Forbidden: update from non-nil value to nil is forbidden',
    );
  });

  it('"" is refused: Required, an empty string is disallowed', async () => {
    const f = await failure(
      core.createPersistentVolume({ body: volume("pv-1", { volumeAttributesClassName: "" }) }),
    );
    assert.equal(f.code, 422);
    assert.equal(
      f.message,
      'PersistentVolume "pv-1" is invalid: spec.volumeAttributesClassName: Required value: an empty string is disallowed',
    );
  });

  it("needs spec.csi", async () => {
    const f = await failure(
      core.createPersistentVolume({
        body: volume("pv-1", {
          csi: undefined,
          hostPath: { path: "/tmp/x" },
          volumeAttributesClassName: "gold",
        }),
      }),
    );
    assert.equal(f.code, 422);
    assert.equal(
      f.message,
      'PersistentVolume "pv-1" is invalid: spec.csi: Required value: has to be specified when using volumeAttributesClassName',
    );
  });
});

describe("kubectl get tables", () => {
  async function table(path: string): Promise<{ columns: string[]; rows: unknown[][] }> {
    const res = await fetch(`${api.url}${path}`, {
      headers: { Accept: "application/json;as=Table;v=v1;g=meta.k8s.io" },
    });
    const t = (await res.json()) as { columnDefinitions: { name: string }[]; rows: { cells: unknown[] }[] };
    return { columns: t.columnDefinitions.map((c) => c.name), rows: t.rows.map((r) => r.cells) };
  }

  it("VolumeAttributesClass, CSIStorageCapacity, and the claim's VolumeAttributesClass column, as upstream's printers", async () => {
    await storage.createVolumeAttributesClass({
      body: { metadata: { name: "gold" }, driverName: "hostpath.csi.k8s.io", parameters: { iops: "1" } },
    });
    await storage.createNamespacedCSIStorageCapacity({
      namespace: ns,
      body: { metadata: { name: "csisc-a" }, storageClassName: "fast", capacity: "10Gi" },
    });
    await core.createNamespacedPersistentVolumeClaim({ namespace: ns, body: claim("plain", "1Gi") });
    await core.createNamespacedPersistentVolumeClaim({
      namespace: ns,
      body: claim("tiered", "1Gi", { volumeAttributesClassName: "gold" }),
    });

    const vac = await table("/apis/storage.k8s.io/v1/volumeattributesclasses");
    assert.deepEqual(vac.columns, ["Name", "DriverName", "Age"]);
    assert.deepEqual(vac.rows[0]?.slice(0, 2), ["gold", "hostpath.csi.k8s.io"]);
    const cap = await table(`/apis/storage.k8s.io/v1/namespaces/${ns}/csistoragecapacities`);
    assert.deepEqual(cap.columns, ["Name", "StorageClassName", "Capacity", "Age"]);
    assert.deepEqual(cap.rows[0]?.slice(0, 3), ["csisc-a", "fast", "10Gi"]);
    const pvcs = await table(`/api/v1/namespaces/${ns}/persistentvolumeclaims`);
    const at = pvcs.columns.indexOf("VolumeAttributesClass");
    assert.equal(pvcs.columns[at - 1], "StorageClass");
    assert.deepEqual(
      pvcs.rows.map((r) => [r[0], r[at]]),
      [
        ["plain", "<unset>"],
        ["tiered", "gold"],
      ],
    );
  });
});
