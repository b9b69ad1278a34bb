import assert from "node:assert/strict";
import { test } from "node:test";
import {
  AccessModeError,
  csiAccessModeForVolume,
  csiAccessModesForClaim,
} from "../../shared/csi/access-modes.ts";

// Kubernetes modes -> [without SINGLE_NODE_MULTI_WRITER, with it]; Error = refused.
const table: [string[], string, string][] = [
  [["ReadWriteOnce"], "SINGLE_NODE_WRITER", "SINGLE_NODE_MULTI_WRITER"],
  [["ReadOnlyMany"], "MULTI_NODE_READER_ONLY", "MULTI_NODE_READER_ONLY"],
  [["ReadWriteMany"], "MULTI_NODE_MULTI_WRITER", "MULTI_NODE_MULTI_WRITER"],
  [["ReadWriteOncePod"], "SINGLE_NODE_WRITER", "SINGLE_NODE_SINGLE_WRITER"],
  [["ReadWriteOnce", "ReadWriteOnce"], "SINGLE_NODE_WRITER", "SINGLE_NODE_MULTI_WRITER"],
  [["ReadWriteOnce", "ReadWriteMany"], "MULTI_NODE_MULTI_WRITER", "MULTI_NODE_MULTI_WRITER"],
  [["ReadOnlyMany", "ReadWriteMany"], "MULTI_NODE_MULTI_WRITER", "MULTI_NODE_MULTI_WRITER"],
  [["ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany"], "MULTI_NODE_MULTI_WRITER", "MULTI_NODE_MULTI_WRITER"],
  [["ReadOnlyMany", "ReadWriteOnce"], "Error", "Error"],
  [["ReadWriteOncePod", "ReadWriteOnce"], "Error", "Error"],
  [["ReadWriteOncePod", "ReadWriteMany"], "Error", "Error"],
  [[], "Error", "Error"],
  [["ReadWriteSometimes"], "Error", "Error"],
];

for (const [modes, without, withSnmw] of table) {
  test(`[${modes.join(", ")}] -> ${without} / ${withSnmw}`, () => {
    for (const [snmw, expected] of [
      [false, without],
      [true, withSnmw],
    ] as const) {
      if (expected === "Error") {
        assert.throws(() => csiAccessModeForVolume(modes, snmw), AccessModeError);
      } else {
        assert.equal(csiAccessModeForVolume(modes, snmw), expected);
      }
    }
  });
}

test("error messages name the problem", () => {
  assert.throws(
    () => csiAccessModeForVolume(["ReadOnlyMany", "ReadWriteOnce"], false),
    /CSI does not support ReadOnlyMany and ReadWriteOnce on the same PersistentVolume/,
  );
  assert.throws(
    () => csiAccessModeForVolume(["ReadWriteOncePod", "ReadOnlyMany"], true),
    /ReadWriteOncePod with other access modes/,
  );
  assert.throws(() => csiAccessModeForVolume(["Foo"], false), /unsupported AccessMode combination: \[Foo\]/);
});

test("the provisioner maps each claim mode on its own, in order", () => {
  assert.deepEqual(csiAccessModesForClaim(["ReadWriteOnce", "ReadOnlyMany"], false), [
    "SINGLE_NODE_WRITER",
    "MULTI_NODE_READER_ONLY",
  ]);
  assert.deepEqual(csiAccessModesForClaim(["ReadWriteOnce", "ReadWriteOncePod"], true), [
    "SINGLE_NODE_MULTI_WRITER",
    "SINGLE_NODE_SINGLE_WRITER",
  ]);
  assert.deepEqual(csiAccessModesForClaim([], false), []);
  assert.throws(() => csiAccessModesForClaim(["ReadWriteOnce", "Bogus"], false), AccessModeError);
});
