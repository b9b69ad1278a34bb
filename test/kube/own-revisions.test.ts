// OwnRevisions: which event copies are older than what this process wrote.
import assert from "node:assert/strict";
import { test } from "node:test";
import { OwnRevisions } from "../../shared/kube/own-revisions.ts";
import type { KubeObject } from "../../shared/kube/types.ts";

const obj = (
  name: string,
  uid: string | undefined,
  resourceVersion: string | undefined,
  namespace?: string,
) =>
  ({
    metadata: {
      name,
      ...(uid ? { uid } : {}),
      ...(resourceVersion ? { resourceVersion } : {}),
      ...(namespace ? { namespace } : {}),
    },
  }) as KubeObject;

test("a copy is behind only when the same object (same uid) was written at a higher revision", () => {
  const cases: [string, KubeObject[], KubeObject, boolean][] = [
    ["nothing written", [], obj("a", "u1", "5"), false],
    ["written later", [obj("a", "u1", "7")], obj("a", "u1", "5"), true],
    ["the same revision", [obj("a", "u1", "7")], obj("a", "u1", "7"), false],
    ["a newer copy", [obj("a", "u1", "7")], obj("a", "u1", "9"), false],
    ["recreated under the name (another uid)", [obj("a", "u1", "7")], obj("a", "u2", "5"), false],
    ["another object", [obj("b", "u1", "7")], obj("a", "u1", "5"), false],
    ["same name, other namespace", [obj("a", "u1", "7", "x")], obj("a", "u1", "5", "y"), false],
    [
      "revisions that are not decimals cannot be ordered",
      [obj("a", "u1", "x7")],
      obj("a", "u1", "x5"),
      false,
    ],
    ["a copy without a revision", [obj("a", "u1", "7")], obj("a", "u1", undefined), false],
    [
      "writes returned out of order keep the newest",
      [obj("a", "u1", "9"), obj("a", "u1", "7")],
      obj("a", "u1", "8"),
      true,
    ],
    ["a write without uid is not noted", [obj("a", undefined, "9")], obj("a", "u1", "8"), false],
    [
      "revisions beyond 2^53 compare exactly",
      [obj("a", "u1", "9007199254740993")],
      obj("a", "u1", "9007199254740992"),
      true,
    ],
  ];
  for (const [name, written, copy, behind] of cases) {
    const own = new OwnRevisions();
    for (const w of written) own.note(w);
    assert.equal(own.isBehind(copy), behind, name);
  }
});

test("it keeps the most recently written objects up to its bound", () => {
  const own = new OwnRevisions(2);
  own.note(obj("a", "u", "10"));
  own.note(obj("b", "u", "10"));
  own.note(obj("a", "u", "11")); // a is now the most recent
  own.note(obj("c", "u", "10")); // evicts b
  assert.equal(own.isBehind(obj("a", "u", "5")), true);
  assert.equal(own.isBehind(obj("b", "u", "5")), false);
  assert.equal(own.isBehind(obj("c", "u", "5")), true);
});
