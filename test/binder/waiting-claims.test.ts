// Which Pending claims a volume's event follows up (shared/binder/waiting-claims.ts),
// as tables: the volume as its event carried it, the claims listed, the claims expected.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { waitingClaimsFor, waitingClaimsScope } from "../../shared/binder/waiting-claims.ts";
import type { PersistentVolume, PersistentVolumeClaim } from "../../shared/kube/types.ts";
import {
  annBindCompleted,
  classEmpty,
  classGold,
  classSilver,
  newClaim,
  newVolume,
  withAccessModes,
  withAnnotation,
  withLabelSelector,
  withLabels,
  withVolumeMode,
} from "./framework.ts";

const Available = "Available";
const Pending = "Pending";
const Bound = "Bound";
const Lost = "Lost";
const Retain = "Retain";

function withoutClass(c: PersistentVolumeClaim): PersistentVolumeClaim {
  const spec = { ...c.spec };
  delete spec.storageClassName;
  return { ...c, spec };
}

function deleting<T extends PersistentVolume | PersistentVolumeClaim>(o: T): T {
  return { ...o, metadata: { ...o.metadata, deletionTimestamp: "2026-01-01T00:00:00Z" } };
}

function inNamespace(namespace: string, c: PersistentVolumeClaim): PersistentVolumeClaim {
  return { ...c, metadata: { ...c.metadata, namespace } };
}

interface PickCase {
  name: string;
  volume: PersistentVolume;
  claims: PersistentVolumeClaim[];
  limit?: number;
  /** namespace/name of the claims followed up, in order. */
  expected: string[];
}

const gold5 = newVolume("gold-5", "5Gi", "", "", Available, Retain, classGold);
const pending = (name: string, size: string, cls: string | undefined = classGold): PersistentVolumeClaim =>
  newClaim(name, `uid-${name}`, size, "", Pending, cls);

const pickCases: PickCase[] = [
  {
    name: "a Pending claim of the volume's class that fits",
    volume: gold5,
    claims: [pending("a", "1Gi")],
    expected: ["default/a"],
  },
  {
    name: "smallest request first, ties by namespace/name",
    volume: gold5,
    claims: [
      pending("big", "5Gi"),
      pending("mid-b", "2Gi"),
      pending("mid-a", "2Gi"),
      pending("tiny", "100Mi"),
    ],
    expected: ["default/tiny", "default/mid-a", "default/mid-b", "default/big"],
  },
  {
    name: "at most the limit, the smallest kept",
    volume: gold5,
    claims: [pending("c", "3Gi"), pending("a", "1Gi"), pending("b", "2Gi")],
    limit: 2,
    expected: ["default/a", "default/b"],
  },
  {
    name: "at most 8 by default",
    volume: gold5,
    claims: Array.from({ length: 12 }, (_, i) => pending(`c${String(i).padStart(2, "0")}`, "1Gi")),
    expected: Array.from({ length: 8 }, (_, i) => `default/c${String(i).padStart(2, "0")}`),
  },
  {
    name: "another class, or a class where the volume has none: none",
    volume: gold5,
    claims: [pending("silver", "1Gi", classSilver), pending("empty", "1Gi", classEmpty)],
    expected: [],
  },
  {
    name: "a volume without class: claims with an empty class and claims with no class at all",
    volume: newVolume("plain", "5Gi", "", "", Available, Retain, classEmpty),
    claims: [
      pending("empty", "1Gi", classEmpty),
      withoutClass(pending("none", "2Gi")),
      pending("gold", "1Gi"),
    ],
    expected: ["default/empty", "default/none"],
  },
  {
    name: "the beta class annotation wins over spec.storageClassName",
    volume: gold5,
    claims: [
      withAnnotation(
        "volume.beta.kubernetes.io/storage-class",
        classGold,
        pending("beta", "1Gi", classSilver),
      ),
      withAnnotation(
        "volume.beta.kubernetes.io/storage-class",
        classSilver,
        pending("spec", "1Gi", classGold),
      ),
    ],
    expected: ["default/beta"],
  },
  {
    name: "a claim asking for more than the capacity: none",
    volume: gold5,
    claims: [pending("huge", "6Gi"), pending("exact", "5Gi")],
    expected: ["default/exact"],
  },
  {
    name: "bound, Lost, being deleted, bound before, or naming another volume: none",
    volume: gold5,
    claims: [
      newClaim("bound", "uid-bound", "1Gi", "other", Bound, classGold, annBindCompleted),
      newClaim("lost", "uid-lost", "1Gi", "", Lost, classGold),
      deleting(pending("deleting", "1Gi")),
      withAnnotation(annBindCompleted, "yes", pending("was-bound", "1Gi")),
      newClaim("other", "uid-other", "1Gi", "other-volume", Pending, classGold),
      pending("ok", "1Gi"),
    ],
    expected: ["default/ok"],
  },
  {
    name: "a claim with no phase yet counts as Pending",
    volume: gold5,
    claims: [{ ...pending("new", "1Gi"), status: {} }],
    expected: ["default/new"],
  },
  {
    name: "a claim naming this volume waits for it",
    volume: gold5,
    claims: [newClaim("named", "uid-named", "1Gi", "gold-5", Pending, classGold)],
    expected: ["default/named"],
  },
  {
    name: "access modes, volume mode and selector must fit",
    volume: withLabels({ tier: "fast" }, gold5),
    claims: [
      withAccessModes(["ReadWriteMany"], pending("rwx", "1Gi")),
      withVolumeMode("Block", pending("block", "1Gi")),
      withLabelSelector({ tier: "slow" }, pending("slow", "1Gi")),
      withLabelSelector({ tier: "fast" }, pending("fast", "1Gi")),
    ],
    expected: ["default/fast"],
  },
  {
    name: "pre-bound: only the claim it names, whatever its class, if it fits",
    volume: newVolume("pre", "5Gi", "", "mine", Available, Retain, classGold),
    claims: [
      pending("other", "1Gi"),
      pending("mine", "1Gi", classSilver),
      inNamespace("elsewhere", pending("mine", "1Gi")),
    ],
    expected: ["default/mine"],
  },
  {
    name: "pre-bound to a claim that asks for more than the capacity: none",
    volume: newVolume("pre", "5Gi", "", "mine", Available, Retain, classGold),
    claims: [pending("mine", "10Gi")],
    expected: [],
  },
  {
    name: "pre-bound to one claim: another claim naming the volume is not followed up",
    volume: newVolume("pre", "5Gi", "", "mine", Available, Retain, classGold),
    claims: [newClaim("thief", "uid-thief", "1Gi", "pre", Pending, classGold)],
    expected: [],
  },
];

describe("waitingClaimsFor: the Pending claims a volume's event follows up", () => {
  for (const c of pickCases) {
    it(c.name, () => {
      const picked = waitingClaimsFor(c.volume, c.claims, c.limit);
      assert.deepEqual(
        picked.map((p) => `${p.metadata.namespace}/${p.metadata.name}`),
        c.expected,
      );
    });
  }
});

interface ScopeCase {
  name: string;
  volume: PersistentVolume;
  action: "add" | "update";
  expected: { namespace?: string } | undefined;
}

const scopeCases: ScopeCase[] = [
  {
    name: "a new unclaimed volume: every namespace",
    volume: newVolume("v", "1Gi", "", "", "Pending", Retain, classGold),
    action: "add",
    expected: {},
  },
  {
    name: "an unclaimed volume released by hand (update, not yet Available): every namespace",
    volume: newVolume("v", "1Gi", "", "", "Released", Retain, classGold),
    action: "update",
    expected: {},
  },
  {
    name: "the echo of the binder's own Available write: not again",
    volume: newVolume("v", "1Gi", "", "", Available, Retain, classGold),
    action: "update",
    expected: undefined,
  },
  {
    name: "pre-bound (claimRef without uid): the claim's namespace only",
    volume: newVolume("v", "1Gi", "", "mine", "Pending", Retain, classGold),
    action: "add",
    expected: { namespace: "default" },
  },
  {
    name: "bound (claimRef with uid): none",
    volume: newVolume("v", "1Gi", "uid-mine", "mine", Bound, Retain, classGold),
    action: "add",
    expected: undefined,
  },
  {
    name: "being deleted: none",
    volume: deleting(newVolume("v", "1Gi", "", "", "Pending", Retain, classGold)),
    action: "add",
    expected: undefined,
  },
];

describe("waitingClaimsScope: which volume events look for waiting claims", () => {
  for (const c of scopeCases) {
    it(c.name, () => {
      assert.deepEqual(waitingClaimsScope(c.volume, c.action), c.expected);
    });
  }
});
