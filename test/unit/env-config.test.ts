// shared/config.ts: the strict environment parsers every entry point uses.
import assert from "node:assert/strict";
import { test } from "node:test";
import { booleanFromEnv, integerFromEnv, positiveIntegerFromEnv } from "../../shared/config.ts";

test("unset or blank falls back; values are trimmed", () => {
  assert.equal(integerFromEnv({}, "N", 7), 7);
  assert.equal(integerFromEnv({ N: "  " }, "N", 7), 7);
  assert.equal(integerFromEnv({ N: " -3\n" }, "N", 7), -3);
  assert.equal(positiveIntegerFromEnv({ N: "" }, "N", 5), 5);
  assert.equal(positiveIntegerFromEnv({ N: "12\n" }, "N", 5), 12);
  assert.equal(booleanFromEnv({}, "B", true), true);
  assert.equal(booleanFromEnv({ B: " FALSE " }, "B", true), false);
  assert.equal(booleanFromEnv({ B: "1" }, "B", false), true);
  assert.equal(booleanFromEnv({ B: "0" }, "B", true), false);
});

test("integers: a range bounds the value and the message names it", () => {
  assert.equal(integerFromEnv({ N: "0" }, "N", 1, { min: 0, max: 10 }), 0);
  assert.equal(integerFromEnv({ N: "-0" }, "N", 1, { min: 0, max: 10 }), 0);
  assert.throws(() => integerFromEnv({ N: "11" }, "N", 1, { min: 0, max: 10 }), {
    message: 'N must be an integer from 0 to 10, got "11"',
  });
  assert.throws(() => integerFromEnv({ N: "-1" }, "N", 1, { min: 0, max: 10 }), /from 0 to 10/);
});

test("anything but the expected spelling is refused, naming the variable and the value", () => {
  for (const bad of ["1.5", "1e3", "0x10", "ten", "99999999999999999999"])
    assert.throws(() => integerFromEnv({ N: bad }, "N", 0), {
      message: `N must be an integer, got ${JSON.stringify(bad)}`,
    });
  for (const bad of ["0", "-1", "+1", "1.0", "fifteen"])
    assert.throws(() => positiveIntegerFromEnv({ T: bad }, "T", 1), {
      message: `T must be a positive integer, got ${JSON.stringify(bad)}`,
    });
  for (const bad of ["yes", "on", "2", "t"])
    assert.throws(() => booleanFromEnv({ B: bad }, "B", false), {
      message: `B must be true or false, got ${JSON.stringify(bad)}`,
    });
});
