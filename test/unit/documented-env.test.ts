// The README's configuration table and the code stay in step: every
// environment variable the code reads is documented, and every variable the
// table names is still read somewhere.
import assert from "node:assert/strict";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";

const root = join(import.meta.dirname, "..", "..");

function sources(dir: string): string[] {
  return readdirSync(join(root, dir)).flatMap((f) => {
    const rel = join(dir, f);
    if (statSync(join(root, rel)).isDirectory()) return sources(rel);
    return /\.(ts|mjs)$/.test(f) ? [rel] : [];
  });
}

const files = ["functions", "shared", "sandbox", "scripts"].flatMap(sources);
const text = new Map(files.map((f) => [f, readFileSync(join(root, f), "utf8")]));
const readme = readFileSync(join(root, "README.md"), "utf8");

/** Variables the code reads: env.X, env["X"], and a name handed to a parser next to the environment. */
function readInCode(): Map<string, string> {
  const member = /\b(?:process\.)?env(?:\.|\[\s*")([A-Z][A-Z0-9_]{2,})\b/g;
  const handed = /\b[a-z]\w*\(\s*(?:(?:process\.)?env\s*,\s*)?"([A-Z][A-Z0-9]*_[A-Z0-9_]+)"/g;
  const found = new Map<string, string>();
  for (const [file, t] of text) {
    for (const m of t.matchAll(member)) if (!found.has(m[1]!)) found.set(m[1]!, file);
    // Literal names count only where the file reads the environment (capability names do not).
    if (!/\bprocess\.env\b|\benv\b/.test(t)) continue;
    for (const m of t.matchAll(handed)) if (!found.has(m[1]!)) found.set(m[1]!, file);
  }
  return found;
}

test("every environment variable the code reads is in the README", () => {
  const documented = new Set([...readme.matchAll(/`([A-Z][A-Z0-9_]{2,})`/g)].map((m) => m[1]));
  const missing = [...readInCode()].filter(([name]) => !documented.has(name));
  assert.deepEqual(
    missing.map(([name, file]) => `${name} (${file})`),
    [],
    "document them in README's Configuration table",
  );
});

test("every variable of the README's Configuration table is still read by the code", () => {
  const start = readme.indexOf("## Configuration");
  const table = readme.slice(start, readme.indexOf("\n## ", start + 5));
  const names = [...table.matchAll(/^\| ([^|]+)\|/gm)].flatMap((m) =>
    [...(m[1] ?? "").matchAll(/`([A-Z][A-Z0-9_]{2,})`/g)].map((x) => x[1]!),
  );
  assert.ok(names.length > 40, `the table was found (${names.length} names)`);
  const code = [...text.values()].join("\n");
  assert.deepEqual(
    names.filter((n) => !code.includes(n)),
    [],
    "no code reads these any more",
  );
});

test("the scan sees each way the code reads a variable", () => {
  const found = readInCode();
  for (const name of ["KUBECONFIG", "AUTH_MODE", "FORWARDER_CONCURRENCY", "CSI_DIR", "PROVISIONER_DRIVERS"])
    assert.ok(found.has(name), name);
});
