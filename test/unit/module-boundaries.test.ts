// No controller imports another controller's module: what two controllers
// share lives in a neutral folder (shared/kube, shared/csi, ...). And the
// shared vocabulary has one home: no second rfc3339 or isRecord, no
// controller spelling a well-known annotation or finalizer itself.
import assert from "node:assert/strict";
import { type Dirent, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import * as wellKnown from "../../shared/kube/well-known.ts";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const controllers = [
  "admission",
  "binder",
  "provisioner",
  "attacher",
  "attach-detach",
  "protection",
] as const;

function sourceFiles(dir: string): string[] {
  let entries: Dirent[];
  try {
    entries = readdirSync(path.join(root, dir), { withFileTypes: true });
  } catch {
    return [];
  }
  return entries.flatMap((e) => {
    const rel = path.posix.join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(rel);
    return /\.(ts|js|mjs)$/.test(e.name) && !e.name.endsWith(".d.ts") ? [rel] : [];
  });
}

/** Every module specifier of static imports, re-exports, side-effect imports and dynamic import(). */
function moduleSpecifiers(source: string): string[] {
  const code = source.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
  const found: string[] = [];
  const patterns = [
    /\b(?:import|export)\s[^;]*?\bfrom\s*["']([^"']+)["']/g,
    /\bimport\s*["']([^"']+)["']/g,
    /\bimport\s*\(\s*["']([^"']+)["']\s*\)/g,
  ];
  for (const re of patterns) for (const m of code.matchAll(re)) found.push(m[1]!);
  return found;
}

/** The controller folder a relative import from `file` lands in (shared/<c> or functions/<c>), if any. */
function controllerOf(file: string, specifier: string): string | undefined {
  if (!specifier.startsWith(".")) return undefined;
  const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), specifier));
  const [top, folder] = target.split("/");
  if (top !== "shared" && top !== "functions") return undefined;
  return controllers.find((c) => c === folder);
}

function crossImports(file: string, own: string, source: string): string[] {
  return moduleSpecifiers(source).filter((s) => {
    const target = controllerOf(file, s);
    return target !== undefined && target !== own;
  });
}

test("the import scanner sees every form of import, and only real ones", () => {
  const sample = [
    'import { a } from "../binder/constants.ts";',
    "import type {\n  B,\n  C,\n} from '../provisioner/plan.ts';",
    'export { d } from "../attacher/x.ts";',
    'export * from "../protection/y.ts";',
    'import "../admission/side-effect.ts";',
    'const m = await import("../attach-detach/z.ts");',
    '// import { e } from "../binder/commented.ts";',
    '/* import { f } from "../binder/block.ts"; */',
    'const text = "no import here";',
  ].join("\n");
  assert.deepEqual(moduleSpecifiers(sample).sort(), [
    "../admission/side-effect.ts",
    "../attach-detach/z.ts",
    "../attacher/x.ts",
    "../binder/constants.ts",
    "../protection/y.ts",
    "../provisioner/plan.ts",
  ]);
  assert.deepEqual(crossImports("shared/binder/sync-claim.ts", "binder", sample).sort(), [
    "../admission/side-effect.ts",
    "../attach-detach/z.ts",
    "../attacher/x.ts",
    "../protection/y.ts",
    "../provisioner/plan.ts",
  ]);
  // Neutral folders and the controller's own files are fine; "attach-detach" is not "attacher".
  assert.deepEqual(
    crossImports(
      "shared/attacher/runtime/x.ts",
      "attacher",
      'import { a } from "../../kube/well-known.ts";\nimport { b } from "../handler.ts";\nimport { c } from "../../csi/types.ts";',
    ),
    [],
  );
  assert.deepEqual(
    crossImports("shared/attacher/x.ts", "attacher", 'import { a } from "../attach-detach/c.ts";'),
    ["../attach-detach/c.ts"],
  );
  assert.deepEqual(
    crossImports("functions/binder/main.ts", "binder", 'import { a } from "../../shared/provisioner/c.ts";'),
    ["../../shared/provisioner/c.ts"],
  );
});

test("no controller module imports another controller's folder", () => {
  const violations: string[] = [];
  let scanned = 0;
  for (const own of controllers) {
    assert.ok(sourceFiles(`shared/${own}`).length > 0, `shared/${own}/ has no modules`);
    for (const file of [...sourceFiles(`shared/${own}`), ...sourceFiles(`functions/${own}`)]) {
      scanned++;
      const source = readFileSync(path.join(root, file), "utf8");
      for (const s of crossImports(file, own, source)) violations.push(`${file} imports ${s}`);
    }
  }
  assert.ok(scanned > 50, `scanned only ${scanned} files`);
  assert.deepEqual(violations, []);
});

test("rfc3339 and isRecord are defined once", () => {
  const homes = { rfc3339: "shared/kube/time.ts", isRecord: "shared/is-record.ts" } as const;
  const files = ["shared", "functions", "sandbox", "scripts", "bench"].flatMap(sourceFiles);
  for (const [name, home] of Object.entries(homes)) {
    const definers = files.filter((f) =>
      new RegExp(`\\b(?:function\\s+${name}\\b|(?:const|let)\\s+${name}\\s*=)`).test(
        readFileSync(path.join(root, f), "utf8"),
      ),
    );
    assert.deepEqual(definers, [home], `${name} is defined in ${definers.join(", ")}`);
  }
  // A copy under another name (isObject, ...) is still a copy.
  const recordChecks = files.filter((f) =>
    /return typeof (\w+) === "object" && \1 !== null/.test(readFileSync(path.join(root, f), "utf8")),
  );
  assert.deepEqual(recordChecks, [homes.isRecord]);
  const timeFormats = files.filter((f) =>
    /toISOString\(\)\.replace\(/.test(readFileSync(path.join(root, f), "utf8")),
  );
  assert.deepEqual(timeFormats, [homes.rfc3339]);
});

test("controllers take well-known annotations and finalizers from shared/kube/well-known.ts", () => {
  const values = Object.values(wellKnown);
  assert.ok(values.length >= 10 && values.every((v) => typeof v === "string" && v.includes("/")));
  const spelled: string[] = [];
  for (const own of controllers) {
    for (const file of sourceFiles(`shared/${own}`)) {
      const source = readFileSync(path.join(root, file), "utf8");
      for (const v of values) if (source.includes(`"${v}"`)) spelled.push(`${file}: ${v}`);
    }
  }
  assert.deepEqual(spelled, []);
});
