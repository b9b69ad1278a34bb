import assert from "node:assert/strict";
import { test } from "node:test";
import { compareResourceVersions } from "../../shared/kube/resource-version.ts";

test("orders decimal resourceVersions numerically, not lexically", () => {
  assert.equal(compareResourceVersions("9", "10"), -1);
  assert.equal(compareResourceVersions("10", "9"), 1);
  assert.equal(compareResourceVersions("42", "42"), 0);
});

test("handles revisions beyond Number's exact range", () => {
  assert.equal(compareResourceVersions("9007199254740993", "9007199254740992"), 1);
  assert.equal(compareResourceVersions("18446744073709551615", "18446744073709551614"), 1);
});

test("refuses to order anything that is not a plain decimal", () => {
  for (const [a, b] of [
    ["", "1"],
    ["1", ""],
    [undefined, "1"],
    ["1", null],
    ["-1", "2"],
    ["+1", "2"],
    ["1.0", "2"],
    [" 1", "2"],
    ["0x10", "2"],
    ["abc", "abd"],
    ["1e3", "2"],
  ] as const) {
    assert.equal(compareResourceVersions(a, b), undefined, `${String(a)} vs ${String(b)}`);
  }
});
