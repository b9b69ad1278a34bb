// provisionsWhenNoMatch: which claims the binder may hand to a provisioner
// on a watched copy that is behind, instead of listing every PV.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { provisionsWhenNoMatch } from "../../shared/binder/provision-claim.ts";
import type { PersistentVolumeClaim, StorageClass } from "../../shared/kube/types.ts";
import { annSelectedNode } from "../../shared/kube/well-known.ts";

function cls(name: string, provisioner: string, mode?: string): StorageClass {
  return {
    apiVersion: "storage.k8s.io/v1",
    kind: "StorageClass",
    metadata: { name },
    provisioner,
    ...(mode ? { volumeBindingMode: mode } : {}),
  };
}

function claim(className: string | undefined, node?: string): PersistentVolumeClaim {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: {
      name: "c",
      namespace: "default",
      ...(node ? { annotations: { [annSelectedNode]: node } } : {}),
    },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: "1Gi" } },
      ...(className !== undefined ? { storageClassName: className } : {}),
    },
  };
}

const classes = [
  cls("fast", "csi.example.com"),
  cls("late", "csi.example.com", "WaitForFirstConsumer"),
  cls("local", "kubernetes.io/no-provisioner"),
];

describe("provisionsWhenNoMatch", () => {
  const table: [string, PersistentVolumeClaim, boolean][] = [
    ["an Immediate class of an external provisioner", claim("fast"), true],
    ["a WaitForFirstConsumer class with the scheduler's node", claim("late", "node-1"), true],
    ["a WaitForFirstConsumer class before the scheduler picks a node", claim("late"), false],
    ["an in-tree provisioner name (no-provisioner)", claim("local"), false],
    ["a class that does not exist", claim("gone"), false],
    ["an empty class (static volumes only)", claim(""), false],
    ["no class at all (may get the default)", claim(undefined), false],
  ];
  for (const [name, c, want] of table) it(name, () => assert.equal(provisionsWhenNoMatch(c, classes), want));
});
