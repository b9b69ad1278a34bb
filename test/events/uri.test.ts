// isUriReference remembers a few accepted "source" values; a remembered answer must be the pattern's answer.

import assert from "node:assert/strict";
import { test } from "node:test";
import { isUriReference } from "../../shared/events/uri.ts";

test("isUriReference answers the same the first time and every time after, past its memory's bound", () => {
  const accepted = Array.from({ length: 40 }, (_, i) => `https://10.96.0.${i}:443`);
  const refused = ["a b", "http://x/%zz", "https://api server:443"];
  for (let round = 0; round < 3; round++) {
    for (const value of accepted) assert.equal(isUriReference(value), true, value);
    for (const value of refused) assert.equal(isUriReference(value), false, value);
  }
  // A long value is checked each time, never remembered, and still judged by the pattern.
  const long = `https://example.com/${"a".repeat(2000)}`;
  assert.equal(isUriReference(long), true);
  assert.equal(isUriReference(`${long} `), false);
});
