import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { V1LabelSelector } from "@kubernetes/client-node";
import {
  claimSelectorMatches,
  type LabelSelectorLike,
  labelSelectorMatches,
  requirementMatches,
  validateLabelKey,
  validateLabelSelector,
  validateLabelValue,
} from "../../shared/kube/label-selector.ts";

const labels = { tier: "gold", zone: "a", "example.com/disk": "ssd" };

describe("labelSelectorMatches", () => {
  const cases: Array<{ name: string; selector: LabelSelectorLike | null | undefined; expected: boolean }> = [
    { name: "null selects nothing", selector: null, expected: false },
    { name: "undefined selects nothing", selector: undefined, expected: false },
    { name: "empty selects everything", selector: {}, expected: true },
    {
      name: "empty lists select everything",
      selector: { matchLabels: {}, matchExpressions: [] },
      expected: true,
    },
    {
      name: "null fields select everything",
      selector: { matchLabels: null, matchExpressions: null },
      expected: true,
    },
    { name: "matchLabels equal", selector: { matchLabels: { tier: "gold" } }, expected: true },
    {
      name: "matchLabels prefixed key",
      selector: { matchLabels: { "example.com/disk": "ssd" } },
      expected: true,
    },
    { name: "matchLabels different value", selector: { matchLabels: { tier: "silver" } }, expected: false },
    { name: "matchLabels missing key", selector: { matchLabels: { rack: "1" } }, expected: false },
    {
      name: "matchLabels all must hold",
      selector: { matchLabels: { tier: "gold", zone: "b" } },
      expected: false,
    },
    {
      name: "In matches one of the values",
      selector: { matchExpressions: [{ key: "zone", operator: "In", values: ["b", "a"] }] },
      expected: true,
    },
    {
      name: "In fails on other value",
      selector: { matchExpressions: [{ key: "zone", operator: "In", values: ["b"] }] },
      expected: false,
    },
    {
      name: "In fails on missing key",
      selector: { matchExpressions: [{ key: "rack", operator: "In", values: ["1"] }] },
      expected: false,
    },
    {
      name: "NotIn fails on listed value",
      selector: { matchExpressions: [{ key: "zone", operator: "NotIn", values: ["a"] }] },
      expected: false,
    },
    {
      name: "NotIn matches other value",
      selector: { matchExpressions: [{ key: "zone", operator: "NotIn", values: ["b"] }] },
      expected: true,
    },
    {
      name: "NotIn matches missing key",
      selector: { matchExpressions: [{ key: "rack", operator: "NotIn", values: ["1"] }] },
      expected: true,
    },
    {
      name: "Exists on present key",
      selector: { matchExpressions: [{ key: "tier", operator: "Exists" }] },
      expected: true,
    },
    {
      name: "Exists on missing key",
      selector: { matchExpressions: [{ key: "rack", operator: "Exists", values: [] }] },
      expected: false,
    },
    {
      name: "DoesNotExist on missing key",
      selector: { matchExpressions: [{ key: "rack", operator: "DoesNotExist" }] },
      expected: true,
    },
    {
      name: "DoesNotExist on present key",
      selector: { matchExpressions: [{ key: "tier", operator: "DoesNotExist", values: null }] },
      expected: false,
    },
    {
      name: "matchLabels and matchExpressions are ANDed",
      selector: {
        matchLabels: { tier: "gold" },
        matchExpressions: [{ key: "zone", operator: "In", values: ["b"] }],
      },
      expected: false,
    },
    {
      name: "unknown operator selects nothing",
      selector: { matchExpressions: [{ key: "tier", operator: "Equals", values: ["gold"] }] },
      expected: false,
    },
    {
      name: "operators are case sensitive",
      selector: { matchExpressions: [{ key: "tier", operator: "in", values: ["gold"] }] },
      expected: false,
    },
    {
      name: "In without values selects nothing",
      selector: { matchExpressions: [{ key: "tier", operator: "In", values: [] }] },
      expected: false,
    },
    {
      name: "NotIn without values selects nothing",
      selector: { matchExpressions: [{ key: "rack", operator: "NotIn" }] },
      expected: false,
    },
    {
      name: "Exists with values selects nothing",
      selector: { matchExpressions: [{ key: "tier", operator: "Exists", values: ["gold"] }] },
      expected: false,
    },
    {
      name: "invalid key selects nothing",
      selector: { matchExpressions: [{ key: "bad key", operator: "Exists" }] },
      expected: false,
    },
    {
      name: "invalid matchLabels value selects nothing",
      selector: { matchLabels: { tier: "-x" } },
      expected: false,
    },
  ];
  for (const { name, selector, expected } of cases) {
    it(name, () => {
      assert.equal(labelSelectorMatches(selector, labels), expected);
    });
  }

  it("treats missing labels as an empty set", () => {
    assert.equal(labelSelectorMatches({}, undefined), true);
    assert.equal(labelSelectorMatches({ matchLabels: { a: "b" } }, undefined), false);
    assert.equal(
      labelSelectorMatches({ matchExpressions: [{ key: "a", operator: "DoesNotExist" }] }, undefined),
      true,
    );
  });

  it("only looks at own label properties", () => {
    const selector = { matchExpressions: [{ key: "constructor", operator: "Exists" }] };
    assert.equal(labelSelectorMatches(selector, {}), false);
  });

  it("accepts a V1LabelSelector from @kubernetes/client-node", () => {
    const selector: V1LabelSelector = {
      matchLabels: { tier: "gold" },
      matchExpressions: [{ key: "zone", operator: "In", values: ["a"] }],
    };
    assert.equal(labelSelectorMatches(selector, labels), true);
    assert.equal(claimSelectorMatches(selector, labels), true);
  });
});

describe("claimSelectorMatches", () => {
  const cases: Array<{ name: string; selector: LabelSelectorLike | null | undefined; expected: boolean }> = [
    { name: "absent selector matches every volume", selector: undefined, expected: true },
    { name: "null selector matches every volume", selector: null, expected: true },
    { name: "empty selector matches every volume", selector: {}, expected: true },
    { name: "matching selector", selector: { matchLabels: { tier: "gold" } }, expected: true },
    { name: "non-matching selector", selector: { matchLabels: { tier: "silver" } }, expected: false },
    {
      name: "invalid selector matches nothing",
      selector: { matchExpressions: [{ key: "tier", operator: "Bogus" }] },
      expected: false,
    },
  ];
  for (const { name, selector, expected } of cases) {
    it(name, () => {
      assert.equal(claimSelectorMatches(selector, labels), expected);
    });
  }
});

describe("validateLabelSelector", () => {
  const cases: Array<{ name: string; selector: unknown; errors: string[] }> = [
    { name: "null is valid", selector: null, errors: [] },
    { name: "empty is valid", selector: {}, errors: [] },
    {
      name: "valid selector",
      selector: {
        matchLabels: { "app.kubernetes.io/name": "db" },
        matchExpressions: [
          { key: "a", operator: "In", values: ["x", ""] },
          { key: "b", operator: "NotIn", values: ["y"] },
          { key: "c", operator: "Exists" },
          { key: "d", operator: "DoesNotExist", values: [] },
        ],
      },
      errors: [],
    },
    {
      name: "unknown operator",
      selector: { matchExpressions: [{ key: "a", operator: "Gt", values: ["1"] }] },
      errors: [
        'matchExpressions[0].operator: unsupported operator "Gt" (must be In, NotIn, Exists or DoesNotExist)',
      ],
    },
    {
      name: "In with empty values",
      selector: { matchExpressions: [{ key: "a", operator: "In", values: [] }] },
      errors: ["matchExpressions[0].values: must be non-empty when operator is In"],
    },
    {
      name: "NotIn with no values",
      selector: { matchExpressions: [{ key: "a", operator: "NotIn" }] },
      errors: ["matchExpressions[0].values: must be non-empty when operator is NotIn"],
    },
    {
      name: "Exists with values",
      selector: { matchExpressions: [{ key: "a", operator: "Exists", values: ["x"] }] },
      errors: ["matchExpressions[0].values: must be empty when operator is Exists"],
    },
    {
      name: "DoesNotExist with values",
      selector: { matchExpressions: [{ key: "a", operator: "DoesNotExist", values: ["x"] }] },
      errors: ["matchExpressions[0].values: must be empty when operator is DoesNotExist"],
    },
    {
      name: "bad shapes from raw JSON",
      selector: {
        matchLabels: { a: 1 },
        matchExpressions: [{ key: 2, operator: "In", values: "x" }, "oops"],
      },
      errors: [
        "matchLabels[a]: value must be a string",
        "matchExpressions[0].key: must be a string",
        "matchExpressions[0].values: must be a list of strings",
        "matchExpressions[0].values: must be non-empty when operator is In",
        "matchExpressions[1]: must be an object with key, operator and values",
      ],
    },
    {
      name: "reports every bad expression",
      selector: {
        matchExpressions: [
          { key: "ok", operator: "Exists" },
          { key: "a", operator: "In" },
          { key: "b", operator: "What" },
        ],
      },
      errors: [
        "matchExpressions[1].values: must be non-empty when operator is In",
        'matchExpressions[2].operator: unsupported operator "What" (must be In, NotIn, Exists or DoesNotExist)',
      ],
    },
  ];
  for (const { name, selector, errors } of cases) {
    it(name, () => {
      assert.deepEqual(validateLabelSelector(selector as LabelSelectorLike | null), errors);
    });
  }

  it("flags bad keys and values", () => {
    const errors = validateLabelSelector({
      matchLabels: { "Bad_Prefix/x": "ok", good: "not valid!" },
      matchExpressions: [{ key: "", operator: "Exists" }],
    });
    assert.equal(errors.length, 3);
    assert.match(errors[0] ?? "", /^matchLabels: invalid label key "Bad_Prefix\/x": prefix part/);
    assert.match(errors[1] ?? "", /^matchLabels\[good\]: invalid label value "not valid!"/);
    assert.match(
      errors[2] ?? "",
      /^matchExpressions\[0\]\.key: invalid label key "": name part must be non-empty/,
    );
  });
});

describe("label key and value validation", () => {
  const keys: Array<[string, boolean]> = [
    ["app", true],
    ["app.kubernetes.io/name", true],
    ["a-b_c.d", true],
    ["A1", true],
    ["x".repeat(63), true],
    ["x".repeat(64), false],
    [`${"a".repeat(253)}/x`, true],
    [`${"a".repeat(254)}/x`, false],
    ["", false],
    ["-app", false],
    ["app-", false],
    ["/app", false],
    ["example.com/", false],
    ["Example.com/app", false],
    ["a/b/c", false],
    ["has space", false],
  ];
  for (const [key, valid] of keys) {
    it(`key ${JSON.stringify(key.length > 20 ? `${key.slice(0, 20)}…` : key)} is ${valid ? "valid" : "invalid"}`, () => {
      assert.equal(validateLabelKey(key) === undefined, valid);
    });
  }

  const values: Array<[string, boolean]> = [
    ["", true],
    ["gold", true],
    ["v1.2_3-x", true],
    ["x".repeat(63), true],
    ["x".repeat(64), false],
    ["-x", false],
    ["x.", false],
    ["a/b", false],
  ];
  for (const [value, valid] of values) {
    it(`value ${JSON.stringify(value.length > 20 ? `${value.slice(0, 20)}…` : value)} is ${valid ? "valid" : "invalid"}`, () => {
      assert.equal(validateLabelValue(value) === undefined, valid);
    });
  }
});

describe("requirementMatches", () => {
  const cases: Array<{
    operator: "GreaterThan" | "LessThan";
    value: string;
    label?: string;
    expected: boolean;
  }> = [
    { operator: "GreaterThan", value: "3", label: "5", expected: true },
    { operator: "GreaterThan", value: "5", label: "5", expected: false },
    { operator: "LessThan", value: "5", label: "3", expected: true },
    { operator: "LessThan", value: "-1", label: "-2", expected: true },
    { operator: "GreaterThan", value: "3", label: "five", expected: false },
    { operator: "LessThan", value: "3", expected: false },
  ];
  for (const { operator, value, label, expected } of cases) {
    it(`${operator} ${value} against ${label ?? "no label"}`, () => {
      const labelSet: Record<string, string> = label === undefined ? {} : { n: label };
      assert.equal(requirementMatches({ key: "n", operator, values: [value] }, labelSet), expected);
    });
  }
});
