// The sandbox's stand-in for kube-controller-manager's volume expand
// controller: which claims it tells that an external controller is to expand
// them (a table), and the Normal ExternalExpanding Event it records on the
// real sandbox API server when a bound CSI claim asks for more.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import {
  claimsWaitingForExternalExpansion,
  externalExpandingMessage,
  type SeenClaim,
} from "../../sandbox/expander/decide.ts";
import { createKubeClients } from "../../shared/kube/client.ts";
import type { KubeJsonClient } from "../../shared/kube/json-client.ts";
import {
  events,
  persistentVolumeClaims,
  persistentVolumes,
  storageClasses,
} from "../../shared/kube/resources.ts";
import type { KubeEvent, PersistentVolume, PersistentVolumeClaim } from "../../shared/kube/types.ts";
import { eventually } from "../helpers/eventually.ts";
import { startTestSandbox, type TestSandbox } from "../helpers/sandbox.ts";

function claim(
  name: string,
  request: string,
  capacity: string | undefined,
  phase = "Bound",
  uid = `uid-${name}`,
): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name, namespace: "default", uid },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: request } },
      volumeName: `pv-${name}`,
    },
    status: { phase, ...(capacity ? { capacity: { storage: capacity } } : {}) },
  };
}

function volume(claimName: string, csi = true, uid = `uid-${claimName}`): PersistentVolume {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name: `pv-${claimName}` },
    spec: {
      accessModes: ["ReadWriteOnce"],
      capacity: { storage: "1Gi" },
      claimRef: { kind: "PersistentVolumeClaim", namespace: "default", name: claimName, uid },
      ...(csi ? { csi: { driver: "x.csi", volumeHandle: "h" } } : { hostPath: { path: "/tmp/x" } }),
    },
  };
}

describe("claimsWaitingForExternalExpansion", () => {
  const names = (claims: PersistentVolumeClaim[]) => claims.map((c) => c.metadata.name);
  const rows: {
    name: string;
    before?: PersistentVolumeClaim;
    claim: PersistentVolumeClaim;
    volume?: PersistentVolume;
    told: boolean;
  }[] = [
    { name: "first seen Bound, asking for more than it has", claim: claim("a", "2Gi", "1Gi"), told: true },
    { name: "first seen Bound, at its size", claim: claim("a", "1Gi", "1Gi"), told: false },
    { name: "not Bound", claim: claim("a", "2Gi", undefined, "Pending"), told: false },
    {
      name: "the request grew",
      before: claim("a", "1Gi", "1Gi"),
      claim: claim("a", "2Gi", "1Gi"),
      told: true,
    },
    {
      name: "the request stayed above the capacity but did not grow: told once already",
      before: claim("a", "2Gi", "1Gi"),
      claim: claim("a", "2Gi", "1Gi"),
      told: false,
    },
    {
      name: "the capacity grew, still below the request",
      before: claim("a", "3Gi", "1Gi"),
      claim: claim("a", "3Gi", "2Gi"),
      told: true,
    },
    {
      name: "the request went down (backing out of a failed expansion)",
      before: claim("a", "3Gi", "1Gi"),
      claim: claim("a", "2Gi", "1Gi"),
      told: false,
    },
    {
      name: "recreated under the same name: seen anew",
      before: claim("a", "2Gi", "1Gi", "Bound", "old"),
      claim: claim("a", "2Gi", "1Gi"),
      told: true,
    },
    { name: "an in-tree volume", claim: claim("a", "2Gi", "1Gi"), volume: volume("a", false), told: false },
    {
      name: "a volume bound to another claim of that name",
      claim: claim("a", "2Gi", "1Gi"),
      volume: volume("a", true, "other"),
      told: false,
    },
  ];
  for (const row of rows) {
    it(row.name, () => {
      const seen = new Map<string, SeenClaim>();
      const vols = [row.volume ?? volume("a")];
      if (row.before) claimsWaitingForExternalExpansion([row.before], vols, seen);
      assert.deepEqual(
        names(claimsWaitingForExternalExpansion([row.claim], vols, seen)),
        row.told ? ["a"] : [],
      );
    });
  }

  it("forgets claims that are gone", () => {
    const seen = new Map<string, SeenClaim>();
    claimsWaitingForExternalExpansion([claim("a", "2Gi", "1Gi")], [volume("a")], seen);
    claimsWaitingForExternalExpansion([], [], seen);
    assert.equal(seen.size, 0);
  });
});

describe("against the sandbox API server", () => {
  let sandbox: TestSandbox;
  let kube: KubeJsonClient;
  before(async () => {
    sandbox = await startTestSandbox({ expander: true });
    kube = createKubeClients(sandbox.kubeConfig).json;
  });
  after(async () => {
    await kube.close();
    await sandbox.close();
  });

  it("records a Normal ExternalExpanding Event as volume_expand when a bound CSI claim asks for more", async () => {
    await kube.create(storageClasses, {
      apiVersion: "storage.k8s.io/v1",
      kind: "StorageClass",
      metadata: { name: "grows" },
      provisioner: "x.csi",
      allowVolumeExpansion: true,
    });
    const made = await kube.create<PersistentVolumeClaim>(persistentVolumeClaims, {
      ...claim("data", "1Gi", undefined),
      metadata: { name: "data", namespace: "default" },
      spec: { ...claim("data", "1Gi", undefined).spec, storageClassName: "grows" },
      status: {},
    });
    await kube.create(persistentVolumes, {
      ...volume("data", true, made.metadata.uid),
      spec: { ...volume("data", true, made.metadata.uid).spec, storageClassName: "grows" },
    });
    const bound = await kube.replace<PersistentVolumeClaim>(
      persistentVolumeClaims,
      { ...made, status: { phase: "Bound", capacity: { storage: "1Gi" } } },
      { subresource: "status" },
    );
    await kube.replace(persistentVolumeClaims, {
      ...bound,
      spec: { ...bound.spec, resources: { requests: { storage: "2Gi" } } },
    });
    const told = await eventually("ExternalExpanding", async () =>
      (await kube.list<KubeEvent>(events, { namespace: "default" })).items.find(
        (e) => e.reason === "ExternalExpanding" && e.involvedObject.name === "data",
      ),
    );
    assert.equal(told.type, "Normal");
    assert.equal(told.message, externalExpandingMessage);
    assert.equal(
      (told as KubeEvent & { source?: { component?: string } }).source?.component,
      "volume_expand",
    );
    assert.equal(told.involvedObject.uid, made.metadata.uid);
  });
});
