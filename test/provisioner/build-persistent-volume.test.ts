// The PersistentVolume recording a created volume, checked against what
// external-provisioner's Provision (pkg/controller/controller.go) and
// sig-storage-lib-external-provisioner's provisionClaimOperation write.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Volume } from "../../shared/csi/types.ts";
import type { PersistentVolume, PersistentVolumeClaim, StorageClass } from "../../shared/kube/types.ts";
import {
  type BuildVolumeInput,
  type BuildVolumeResult,
  buildPersistentVolume,
} from "../../shared/provisioner/build-persistent-volume.ts";

const driver = "hostpath.csi.k8s.io";
const identity = "kube-storage-functions-hostpath.csi.k8s.io";
const pvName = "pvc-0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b";

function claim(
  spec: { storage?: string; volumeMode?: string; accessModes?: string[] } = {},
): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: {
      name: "data",
      namespace: "team-a",
      uid: "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b",
      resourceVersion: "4711",
    },
    spec: {
      accessModes: spec.accessModes ?? ["ReadWriteOnce"],
      resources: { requests: { storage: spec.storage ?? "1Gi" } },
      storageClassName: "fast",
      ...(spec.volumeMode ? { volumeMode: spec.volumeMode } : {}),
    },
  };
}

function storageClass(extra: { reclaimPolicy?: string; mountOptions?: string[] } = {}): StorageClass {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: { name: "fast" },
    provisioner: driver,
    ...extra,
  };
}

function volume(extra: Partial<Volume> = {}): Volume {
  return {
    capacityBytes: 1073741824n,
    volumeId: "vol-1",
    volumeContext: {},
    accessibleTopology: [],
    ...extra,
  };
}

function input(over: Partial<BuildVolumeInput> = {}): BuildVolumeInput {
  return {
    claim: claim(),
    storageClass: storageClass(),
    pvName,
    driverName: driver,
    identity,
    fsType: "",
    volume: volume(),
    secretRefs: {},
    ...over,
  };
}

function built(over: Partial<BuildVolumeInput> = {}): PersistentVolume {
  const r = buildPersistentVolume(input(over));
  assert.ok(r.ok, r.ok ? "" : r.error);
  return r.value;
}

describe("buildPersistentVolume: the whole object", () => {
  it("matches upstream's PV for a plain filesystem claim", () => {
    const want: PersistentVolume = {
      apiVersion: "v1",
      kind: "PersistentVolume",
      metadata: {
        name: pvName,
        annotations: {
          "pv.kubernetes.io/provisioned-by": driver,
          // Upstream always writes the pair, empty without a provisioner secret.
          "volume.kubernetes.io/provisioner-deletion-secret-name": "",
          "volume.kubernetes.io/provisioner-deletion-secret-namespace": "",
        },
        finalizers: ["external-provisioner.volume.kubernetes.io/finalizer"],
      },
      spec: {
        accessModes: ["ReadWriteOnce"],
        capacity: { storage: "1Gi" },
        claimRef: {
          kind: "PersistentVolumeClaim",
          apiVersion: "v1",
          namespace: "team-a",
          name: "data",
          uid: "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b",
          resourceVersion: "4711",
        },
        persistentVolumeReclaimPolicy: "Delete",
        storageClassName: "fast",
        volumeMode: "Filesystem",
        csi: {
          driver,
          volumeHandle: "vol-1",
          volumeAttributes: { "storage.kubernetes.io/csiProvisionerIdentity": identity },
          fsType: "ext4",
        },
      },
    };
    assert.deepEqual(buildPersistentVolume(input({ fsType: "ext4" })), { ok: true, value: want });
  });
});

describe("buildPersistentVolume: capacity", () => {
  const cases: { name: string; storage: string; capacityBytes: bigint; want: string }[] = [
    { name: "1073741824 → 1Gi", storage: "1Gi", capacityBytes: 1073741824n, want: "1Gi" },
    { name: "larger than asked is kept", storage: "1Gi", capacityBytes: 2147483648n, want: "2Gi" },
    { name: "0 → the requested 1Gi", storage: "1Gi", capacityBytes: 0n, want: "1Gi" },
    { name: "0 → the requested 1.5Gi, written binary", storage: "1.5Gi", capacityBytes: 0n, want: "1536Mi" },
    { name: "0 → the requested 500M, in plain bytes", storage: "500M", capacityBytes: 0n, want: "500000000" },
    {
      name: "a non-binary size is plain bytes",
      storage: "500M",
      capacityBytes: 1000000000n,
      want: "1000000000",
    },
    { name: "a Ki multiple", storage: "500M", capacityBytes: 500000768n, want: "488282Ki" },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const pv = built({
        claim: claim({ storage: c.storage }),
        volume: volume({ capacityBytes: c.capacityBytes }),
      });
      assert.deepEqual(pv.spec.capacity, { storage: c.want });
    });
  }

  it("smaller than requested: the tooSmall error with upstream's text", () => {
    const r = buildPersistentVolume(input({ volume: volume({ capacityBytes: 1073741823n }) }));
    assert.deepEqual(r, {
      ok: false,
      tooSmall: true,
      error: "created volume capacity 1073741823 less than requested capacity 1073741824",
    } satisfies BuildVolumeResult);
  });

  it("500M requested, 499999999 returned: too small", () => {
    const r = buildPersistentVolume(
      input({ claim: claim({ storage: "500M" }), volume: volume({ capacityBytes: 499999999n }) }),
    );
    assert.equal(r.ok, false);
    assert.equal(!r.ok && r.tooSmall, true);
  });
});

describe("buildPersistentVolume: spec.csi", () => {
  it("driver, volumeHandle, volume_context plus the provisioner identity", () => {
    const pv = built({
      volume: volume({ volumeId: "node-1/vol-7", volumeContext: { tier: "gold", path: "/x" } }),
    });
    assert.equal(pv.spec.csi?.driver, driver);
    assert.equal(pv.spec.csi?.volumeHandle, "node-1/vol-7");
    assert.deepEqual(pv.spec.csi?.volumeAttributes, {
      tier: "gold",
      path: "/x",
      "storage.kubernetes.io/csiProvisionerIdentity": identity,
    });
  });

  it("volume_context is copied over the identity, as upstream does (maps.Copy after setting it)", () => {
    const pv = built({
      volume: volume({ volumeContext: { "storage.kubernetes.io/csiProvisionerIdentity": "from-driver" } }),
    });
    assert.deepEqual(pv.spec.csi?.volumeAttributes, {
      "storage.kubernetes.io/csiProvisionerIdentity": "from-driver",
    });
  });

  const fsCases: { name: string; volumeMode?: string; fsType: string; want: string | undefined }[] = [
    { name: "fsType on a filesystem volume", fsType: "xfs", want: "xfs" },
    { name: "fsType on an explicit Filesystem volume", volumeMode: "Filesystem", fsType: "xfs", want: "xfs" },
    { name: "no fsType when none is known", fsType: "", want: undefined },
    { name: "no fsType for Block", volumeMode: "Block", fsType: "ext4", want: undefined },
  ];
  for (const c of fsCases) {
    it(c.name, () => {
      const pv = built({ claim: claim(c.volumeMode ? { volumeMode: c.volumeMode } : {}), fsType: c.fsType });
      assert.equal(pv.spec.csi?.fsType, c.want);
      assert.equal(Object.hasOwn(pv.spec.csi ?? {}, "fsType"), c.want !== undefined);
    });
  }

  it("each secret kind to its ref; provisioner and controllerModify stay out of spec.csi", () => {
    const pv = built({
      secretRefs: {
        provisioner: { name: "prov", namespace: "ns-prov" },
        controllerPublish: { name: "cp", namespace: "ns-cp" },
        nodeStage: { name: "ns", namespace: "ns-ns" },
        nodePublish: { name: "np", namespace: "ns-np" },
        controllerExpand: { name: "ce", namespace: "ns-ce" },
        nodeExpand: { name: "ne", namespace: "ns-ne" },
        controllerModify: { name: "cm", namespace: "ns-cm" },
      },
    });
    assert.deepEqual(pv.spec.csi, {
      driver,
      volumeHandle: "vol-1",
      volumeAttributes: { "storage.kubernetes.io/csiProvisionerIdentity": identity },
      controllerPublishSecretRef: { name: "cp", namespace: "ns-cp" },
      nodeStageSecretRef: { name: "ns", namespace: "ns-ns" },
      nodePublishSecretRef: { name: "np", namespace: "ns-np" },
      controllerExpandSecretRef: { name: "ce", namespace: "ns-ce" },
      nodeExpandSecretRef: { name: "ne", namespace: "ns-ne" },
    });
  });

  const refCases = [
    ["controllerPublish", "controllerPublishSecretRef"],
    ["nodeStage", "nodeStageSecretRef"],
    ["nodePublish", "nodePublishSecretRef"],
    ["controllerExpand", "controllerExpandSecretRef"],
    ["nodeExpand", "nodeExpandSecretRef"],
  ] as const;
  for (const [kind, field] of refCases) {
    it(`${kind} alone → ${field} alone`, () => {
      const pv = built({ secretRefs: { [kind]: { name: "s", namespace: "n" } } });
      const refs = Object.keys(pv.spec.csi ?? {}).filter((k) => k.endsWith("SecretRef"));
      assert.deepEqual(refs, [field]);
      assert.deepEqual(pv.spec.csi?.[field], { name: "s", namespace: "n" });
    });
  }
});

describe("buildPersistentVolume: reclaim policy and finalizer", () => {
  const cases: { name: string; reclaimPolicy?: string; want: string; finalizers: string[] | undefined }[] = [
    {
      name: "class without a policy → Delete, finalizer",
      want: "Delete",
      finalizers: ["external-provisioner.volume.kubernetes.io/finalizer"],
    },
    {
      name: "Delete → finalizer",
      reclaimPolicy: "Delete",
      want: "Delete",
      finalizers: ["external-provisioner.volume.kubernetes.io/finalizer"],
    },
    { name: "Retain → no finalizer", reclaimPolicy: "Retain", want: "Retain", finalizers: undefined },
    { name: "Recycle → no finalizer", reclaimPolicy: "Recycle", want: "Recycle", finalizers: undefined },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const pv = built({
        storageClass: storageClass(c.reclaimPolicy ? { reclaimPolicy: c.reclaimPolicy } : {}),
      });
      assert.equal(pv.spec.persistentVolumeReclaimPolicy, c.want);
      assert.deepEqual(pv.metadata.finalizers, c.finalizers);
    });
  }
});

describe("buildPersistentVolume: class, claim and topology fields", () => {
  it("mountOptions from the class", () => {
    const pv = built({ storageClass: storageClass({ mountOptions: ["noatime", "discard"] }) });
    assert.deepEqual(pv.spec.mountOptions, ["noatime", "discard"]);
  });

  it("no mountOptions when the class has none or an empty list", () => {
    assert.equal(Object.hasOwn(built().spec, "mountOptions"), false);
    const pv = built({ storageClass: storageClass({ mountOptions: [] }) });
    assert.equal(Object.hasOwn(pv.spec, "mountOptions"), false);
  });

  it("nodeAffinity: one term per accessible topology, one In per segment", () => {
    const pv = built({
      volume: volume({
        accessibleTopology: [
          { segments: { "topology.kubernetes.io/zone": "a", "topology.hostpath.csi/node": "n1" } },
          { segments: { "topology.kubernetes.io/zone": "b" } },
        ],
      }),
    });
    assert.deepEqual(pv.spec.nodeAffinity, {
      required: {
        nodeSelectorTerms: [
          {
            matchExpressions: [
              { key: "topology.hostpath.csi/node", operator: "In", values: ["n1"] },
              { key: "topology.kubernetes.io/zone", operator: "In", values: ["a"] },
            ],
          },
          { matchExpressions: [{ key: "topology.kubernetes.io/zone", operator: "In", values: ["b"] }] },
        ],
      },
    });
  });

  it("a topology without segments adds no term", () => {
    const pv = built({
      volume: volume({ accessibleTopology: [{ segments: {} }, { segments: { zone: "a" } }] }),
    });
    assert.deepEqual(pv.spec.nodeAffinity, {
      required: {
        nodeSelectorTerms: [{ matchExpressions: [{ key: "zone", operator: "In", values: ["a"] }] }],
      },
    });
  });

  it("no accessible topology → no nodeAffinity", () => {
    assert.equal(Object.hasOwn(built().spec, "nodeAffinity"), false);
  });

  const modeCases: { volumeMode?: string; want: string }[] = [
    { volumeMode: "Block", want: "Block" },
    { volumeMode: "Filesystem", want: "Filesystem" },
    { want: "Filesystem" },
  ];
  for (const c of modeCases) {
    it(`volumeMode ${c.volumeMode ?? "unset"} → ${c.want}`, () => {
      const pv = built({ claim: claim(c.volumeMode ? { volumeMode: c.volumeMode } : {}) });
      assert.equal(pv.spec.volumeMode, c.want);
    });
  }

  it("accessModes are the claim's, copied", () => {
    const c = claim({ accessModes: ["ReadWriteOnce", "ReadOnlyMany"] });
    const pv = built({ claim: c });
    assert.deepEqual(pv.spec.accessModes, ["ReadWriteOnce", "ReadOnlyMany"]);
    assert.notEqual(pv.spec.accessModes, c.spec.accessModes);
  });

  it("storageClassName and the full claimRef with uid", () => {
    const pv = built({ storageClass: { ...storageClass(), metadata: { name: "gold" } } });
    assert.equal(pv.spec.storageClassName, "gold");
    assert.deepEqual(pv.spec.claimRef, {
      kind: "PersistentVolumeClaim",
      apiVersion: "v1",
      namespace: "team-a",
      name: "data",
      uid: "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b",
      resourceVersion: "4711",
    });
  });
});

describe("buildPersistentVolume: annotations", () => {
  it("provisioned-by and the deletion secret from the provisioner secret", () => {
    const pv = built({
      secretRefs: {
        provisioner: { name: "prov-creds", namespace: "kube-system" },
        nodePublish: { name: "np", namespace: "team-a" },
      },
    });
    assert.deepEqual(pv.metadata.annotations, {
      "pv.kubernetes.io/provisioned-by": driver,
      "volume.kubernetes.io/provisioner-deletion-secret-name": "prov-creds",
      "volume.kubernetes.io/provisioner-deletion-secret-namespace": "kube-system",
    });
  });

  it("without a provisioner secret the deletion-secret pair is written empty, as upstream does", () => {
    // prepareProvision always returns a non-nil deletionSecretParams, so Provision always sets
    // both annotations; empty ones tell the deleter "no secrets" instead of re-reading the class.
    const pv = built({ secretRefs: { nodeStage: { name: "ns", namespace: "team-a" } } });
    assert.deepEqual(pv.metadata.annotations, {
      "pv.kubernetes.io/provisioned-by": driver,
      "volume.kubernetes.io/provisioner-deletion-secret-name": "",
      "volume.kubernetes.io/provisioner-deletion-secret-namespace": "",
    });
  });
});
