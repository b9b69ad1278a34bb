// CreateVolume volumeCapabilities from a claim and its class.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { PersistentVolumeClaim, StorageClass } from "../../shared/kube/types.ts";
import {
  type VolumeCapabilitiesResult,
  type VolumeCapabilityOptions,
  volumeCapabilitiesForClaim,
} from "../../shared/provisioner/volume-capabilities.ts";

function claim(accessModes: string[] | undefined, volumeMode?: string): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name: "data", namespace: "ns", uid: "u" },
    spec: { ...(accessModes ? { accessModes } : {}), ...(volumeMode ? { volumeMode } : {}) },
  };
}

function storageClass(mountOptions?: string[]): StorageClass {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: { name: "fast" },
    provisioner: "hostpath.csi.k8s.io",
    ...(mountOptions ? { mountOptions } : {}),
  };
}

interface Case {
  name: string;
  claim: PersistentVolumeClaim;
  class: StorageClass;
  fsType: string;
  options?: VolumeCapabilityOptions;
  want: VolumeCapabilitiesResult;
}

const cases: Case[] = [
  {
    name: "RWO filesystem with fsType and mount options",
    claim: claim(["ReadWriteOnce"]),
    class: storageClass(["noatime", "discard"]),
    fsType: "ext4",
    want: {
      ok: true,
      value: [
        {
          mount: { fsType: "ext4", mountFlags: ["noatime", "discard"] },
          accessMode: { mode: "SINGLE_NODE_WRITER" },
        },
      ],
    },
  },
  {
    name: "explicit Filesystem mode, no fsType, no options",
    claim: claim(["ReadWriteMany"], "Filesystem"),
    class: storageClass(),
    fsType: "",
    want: {
      ok: true,
      value: [{ mount: { fsType: "", mountFlags: [] }, accessMode: { mode: "MULTI_NODE_MULTI_WRITER" } }],
    },
  },
  {
    name: "block ignores fsType and mount options",
    claim: claim(["ReadWriteOnce"], "Block"),
    class: storageClass(["noatime"]),
    fsType: "ext4",
    want: { ok: true, value: [{ block: {}, accessMode: { mode: "SINGLE_NODE_WRITER" } }] },
  },
  {
    name: "one capability per access mode, each mapped on its own",
    claim: claim(["ReadWriteOnce", "ReadOnlyMany"], "Block"),
    class: storageClass(),
    fsType: "",
    want: {
      ok: true,
      value: [
        { block: {}, accessMode: { mode: "SINGLE_NODE_WRITER" } },
        { block: {}, accessMode: { mode: "MULTI_NODE_READER_ONLY" } },
      ],
    },
  },
  {
    name: "ReadWriteOncePod without SINGLE_NODE_MULTI_WRITER",
    claim: claim(["ReadWriteOncePod"], "Block"),
    class: storageClass(),
    fsType: "",
    want: { ok: true, value: [{ block: {}, accessMode: { mode: "SINGLE_NODE_WRITER" } }] },
  },
  {
    name: "ReadWriteOncePod with SINGLE_NODE_MULTI_WRITER",
    claim: claim(["ReadWriteOncePod"], "Block"),
    class: storageClass(),
    fsType: "",
    options: { supportsSingleNodeMultiWriter: true },
    want: { ok: true, value: [{ block: {}, accessMode: { mode: "SINGLE_NODE_SINGLE_WRITER" } }] },
  },
  {
    name: "ReadWriteOnce with SINGLE_NODE_MULTI_WRITER",
    claim: claim(["ReadWriteOnce"], "Block"),
    class: storageClass(),
    fsType: "",
    options: { supportsSingleNodeMultiWriter: true },
    want: { ok: true, value: [{ block: {}, accessMode: { mode: "SINGLE_NODE_MULTI_WRITER" } }] },
  },
  {
    name: "unknown access mode",
    claim: claim(["ReadWriteSometimes"]),
    class: storageClass(),
    fsType: "",
    want: { ok: false, error: "unsupported AccessMode combination: [ReadWriteSometimes]" },
  },
  {
    name: "no access modes",
    claim: claim(undefined),
    class: storageClass(),
    fsType: "",
    want: { ok: true, value: [] },
  },
];

describe("volumeCapabilitiesForClaim", () => {
  for (const c of cases) {
    it(c.name, () => {
      assert.deepEqual(volumeCapabilitiesForClaim(c.claim, c.class, c.fsType, c.options), c.want);
    });
  }

  it("does not share the class's mountOptions array", () => {
    const cls = storageClass(["noatime"]);
    const result = volumeCapabilitiesForClaim(claim(["ReadWriteOnce"]), cls, "ext4");
    assert.ok(result.ok);
    const cap = result.value[0];
    assert.ok(cap && "mount" in cap);
    cap.mount.mountFlags.push("x");
    assert.deepEqual(cls.mountOptions, ["noatime"]);
  });
});
