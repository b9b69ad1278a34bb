// The CreateVolume / PV name derived from the claim UID.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { PersistentVolumeClaim } from "../../shared/kube/types.ts";
import {
  type VolumeNameOptions,
  type VolumeNameResult,
  volumeNameForClaim,
} from "../../shared/provisioner/volume-name.ts";

const uid = "5f4e8c7a-1b2c-4d3e-9f00-aabbccddeeff";

function claim(u: string | undefined): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name: "data", namespace: "ns", ...(u === undefined ? {} : { uid: u }) },
    spec: {},
  };
}

const cases: {
  name: string;
  uid: string | undefined;
  options?: VolumeNameOptions;
  want: VolumeNameResult;
}[] = [
  { name: "default prefix, whole UID", uid, want: { ok: true, value: `pvc-${uid}` } },
  { name: "custom prefix", uid, options: { prefix: "vol" }, want: { ok: true, value: `vol-${uid}` } },
  {
    name: "uuid length strips dashes and truncates",
    uid,
    options: { uuidLength: 16 },
    want: { ok: true, value: "pvc-5f4e8c7a1b2c4d3e" },
  },
  {
    name: "uuid length of the full compact UID",
    uid,
    options: { uuidLength: 32 },
    want: { ok: true, value: "pvc-5f4e8c7a1b2c4d3e9f00aabbccddeeff" },
  },
  { name: "uuid length 0", uid, options: { uuidLength: 0 }, want: { ok: true, value: "pvc-" } },
  {
    name: "-1 keeps the UID as is",
    uid,
    options: { uuidLength: -1 },
    want: { ok: true, value: `pvc-${uid}` },
  },
  {
    name: "uuid length beyond the UID",
    uid,
    options: { uuidLength: 33 },
    want: {
      ok: false,
      error: "volume name UUID length 33 is longer than the claim UID without dashes (32)",
    },
  },
  {
    name: "missing UID",
    uid: undefined,
    want: { ok: false, error: "corrupted PVC object, it is missing UID" },
  },
  { name: "empty UID", uid: "", want: { ok: false, error: "corrupted PVC object, it is missing UID" } },
  {
    name: "empty prefix",
    uid,
    options: { prefix: "" },
    want: { ok: false, error: "volume name prefix cannot be of length 0" },
  },
];

describe("volumeNameForClaim", () => {
  for (const c of cases) {
    it(c.name, () => {
      assert.deepEqual(volumeNameForClaim(claim(c.uid), c.options), c.want);
    });
  }
});
