// The sandbox's field errors, table-tested against the text
// k8s.io/apimachinery's field.Error and ErrorList.ToAggregate print.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  aggregateMessage,
  duplicate,
  type FieldError,
  forbidden,
  formatFieldError,
  invalid,
  notFound,
  notSupported,
  required,
  tooLong,
} from "../../sandbox/apiserver/field-errors.ts";

describe("field errors", () => {
  const cases: Array<{ name: string; error: FieldError; type: string; text: string }> = [
    {
      name: "Required without detail",
      error: required("spec.x"),
      type: "FieldValueRequired",
      text: "spec.x: Required value",
    },
    {
      name: "Required with detail",
      error: required("spec.x", "must be set"),
      type: "FieldValueRequired",
      text: "spec.x: Required value: must be set",
    },
    {
      name: "Forbidden never shows a value",
      error: forbidden("spec", "is immutable"),
      type: "FieldValueForbidden",
      text: "spec: Forbidden: is immutable",
    },
    {
      name: "Invalid quotes a string",
      error: invalid("metadata.name", "A", "bad"),
      type: "FieldValueInvalid",
      text: 'metadata.name: Invalid value: "A": bad',
    },
    {
      name: "Invalid prints numbers and booleans bare",
      error: invalid("spec.n", 3, "too big"),
      type: "FieldValueInvalid",
      text: "spec.n: Invalid value: 3: too big",
    },
    {
      name: "Invalid of nothing says null",
      error: invalid("spec.mode", undefined, "field is immutable"),
      type: "FieldValueInvalid",
      text: "spec.mode: Invalid value: null: field is immutable",
    },
    {
      name: "NotSupported lists the supported values quoted",
      error: notSupported("spec.accessModes[0]", "Many", ["ReadWriteOnce", "ReadOnlyMany"]),
      type: "FieldValueNotSupported",
      text: 'spec.accessModes[0]: Unsupported value: "Many": supported values: "ReadWriteOnce", "ReadOnlyMany"',
    },
    {
      name: "Duplicate shows the value",
      error: duplicate("spec.accessModes[1]", "ReadWriteOnce"),
      type: "FieldValueDuplicate",
      text: 'spec.accessModes[1]: Duplicate value: "ReadWriteOnce"',
    },
    {
      name: "TooLong shows the limit, not the value",
      error: tooLong("metadata.annotations", 262144),
      type: "FieldValueTooLong",
      text: "metadata.annotations: Too long: may not be more than 262144 bytes",
    },
    {
      name: "TooLong of one byte is singular",
      error: tooLong("x", 1),
      type: "FieldValueTooLong",
      text: "x: Too long: may not be more than 1 byte",
    },
    {
      name: "NotFound shows the value",
      error: notFound("spec.storageClassName", "gold"),
      type: "FieldValueNotFound",
      text: 'spec.storageClassName: Not found: "gold"',
    },
  ];
  for (const c of cases) {
    it(c.name, () => {
      assert.equal(c.error.type, c.type);
      assert.equal(formatFieldError(c.error), c.text);
      assert.equal(`${c.error.field}: ${c.error.body}`, c.text);
    });
  }
});

describe("aggregateMessage (ErrorList.ToAggregate)", () => {
  const a = required("spec.a");
  const b = forbidden("spec.b", "no");
  const cases: Array<{ name: string; errors: FieldError[]; text: string }> = [
    { name: "one error stands bare", errors: [a], text: "spec.a: Required value" },
    {
      name: "several are bracketed in order",
      errors: [b, a],
      text: "[spec.b: Forbidden: no, spec.a: Required value]",
    },
    {
      name: "identical messages count once",
      errors: [a, b, required("spec.a")],
      text: "[spec.a: Required value, spec.b: Forbidden: no]",
    },
    { name: "duplicates only: bare again", errors: [a, required("spec.a")], text: "spec.a: Required value" },
  ];
  for (const c of cases) {
    it(c.name, () => assert.equal(aggregateMessage(c.errors), c.text));
  }
});
