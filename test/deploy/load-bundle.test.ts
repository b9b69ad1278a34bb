// functions/load-bundle.ts on small bundles of its format: a CommonJS module
// inside the function Node wraps modules in, with a V8 code cache beside it.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { codeCachePath, loadBundle } from "../../functions/load-bundle.ts";
import { BUNDLE_WRAPPER } from "../../scripts/build-lambda.ts";

const dir = mkdtempSync(join(tmpdir(), "ksf-load-bundle-"));
after(() => rmSync(dir, { recursive: true, force: true }));

function bundleOf(name: string, body: string): string {
  const file = join(dir, `${name}.cjs`);
  writeFileSync(file, BUNDLE_WRAPPER.start + body + BUNDLE_WRAPPER.end);
  return file;
}

test("runs the module with its own exports, module, require, __filename and __dirname", () => {
  const file = bundleOf(
    "plain",
    `"use strict";
    const { basename } = require("node:path");
    exports.early = 1;
    module.exports.where = [basename(__filename), __dirname];
    module.exports.strict = (function () { return this === undefined; })();`,
  );
  const loaded = loadBundle(file);
  assert.deepEqual(loaded.exports, { early: 1, where: ["plain.cjs", dir], strict: true });
  assert.equal(loaded.codeCache, "absent");
});

test("a written cache is taken by the next load of the same text, and a damaged one is refused", () => {
  const file = bundleOf("cached", "module.exports.answer = () => 42; module.exports.answer();");
  const first = loadBundle(file);
  assert.ok(first.writeCodeCache() > 0);
  assert.ok(existsSync(codeCachePath(file)));
  const second = loadBundle(file);
  assert.equal(second.codeCache, "accepted");
  assert.equal((second.exports.answer as () => number)(), 42);
  // Another text under the same name: V8 checks the source, the module still runs.
  const changed = bundleOf("cached", "module.exports.answer = () => 43;");
  const third = loadBundle(changed);
  assert.equal(third.codeCache, "rejected");
  assert.equal((third.exports.answer as () => number)(), 43);
  writeFileSync(codeCachePath(file), Buffer.from("not a code cache"));
  assert.equal(loadBundle(file).codeCache, "rejected");
});

test("a cache of another text of the same length is refused, so the old code never runs", () => {
  // V8 would take it: it checks a source by its length.
  const file = bundleOf("same-length", "module.exports.answer = () => 42;");
  loadBundle(file).writeCodeCache();
  assert.equal(loadBundle(file).codeCache, "accepted");
  bundleOf("same-length", "module.exports.answer = () => 43;");
  const changed = loadBundle(file);
  assert.equal(changed.codeCache, "rejected");
  assert.equal((changed.exports.answer as () => number)(), 43);
});

test("a file without the module wrapper is refused with what to do", () => {
  const file = join(dir, "unwrapped.cjs");
  writeFileSync(file, "module.exports = {};");
  // Run as a script, `module` is not defined there; a bare expression is no function either.
  assert.throws(() => loadBundle(file), /module is not defined/);
  writeFileSync(file, '"an expression";');
  assert.throws(
    () => loadBundle(file),
    /not a bundle of this build:functions \(no module wrapper\); rebuild it/,
  );
});
