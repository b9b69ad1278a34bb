// Every decision module of every controller reaches no I/O: its static
// imports, followed transitively, never load a Kubernetes or CSI client, a
// watch, a socket, the file system or an HTTP framework. `import type` is
// erased before Node runs a file, so it does not count; every other import
// (also `import { type A }`, which Node may keep as a bare import) does.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** Listed by hand, so a new decision module is added on purpose (every one is pure today, none excepted). */
const decisionModules = [
  "shared/binder/sync-claim.ts",
  "shared/binder/sync-volume.ts",
  "shared/binder/find-best-match.ts",
  "shared/binder/explain.ts",
  "shared/binder/plan.ts",
  "shared/binder/phase-updates.ts",
  "shared/binder/provision-claim.ts",
  "shared/binder/volume-helpers.ts",
  "shared/attach-detach/reconcile-node.ts",
  "shared/attach-detach/detach-policy.ts",
  "shared/attach-detach/volumes-attached.ts",
  "shared/attach-detach/volume-attachment-name.ts",
  "shared/provisioner/capacity/segments.ts",
  "shared/provisioner/capacity/plan-capacity.ts",
  "shared/protection/decide-claim.ts",
  "shared/protection/decide-volume.ts",
  "shared/protection/finalizers.ts",
  "shared/protection/pod-usage.ts",
  "shared/protection/pod-from-event.ts",
  "shared/protection/runtime/protection-plan.ts",
  "shared/provisioner/decide-claim.ts",
  "shared/provisioner/decide-volume.ts",
  "shared/provisioner/build-persistent-volume.ts",
  "shared/provisioner/create-volume-request.ts",
  "shared/provisioner/topology.ts",
  "shared/provisioner/volume-name.ts",
  "shared/provisioner/class-parameters.ts",
  "shared/provisioner/data-source.ts",
  "shared/provisioner/secret-templates.ts",
  "shared/provisioner/volume-capabilities.ts",
  "shared/provisioner/steps.ts",
  "shared/provisioner/claim-state.ts",
  "shared/provisioner/plan-claim.ts",
  "shared/provisioner/plan-provision.ts",
  "shared/provisioner/plan-volume.ts",
  "shared/provisioner/plan-take-back.ts",
  "shared/provisioner/data-source-ref.ts",
  "shared/attacher/reconcile.ts",
  "shared/attacher/choose-handler.ts",
  "shared/attacher/handler.ts",
  "shared/attacher/csi-handler.ts",
  "shared/attacher/trivial-handler.ts",
  "shared/attacher/attachment-status.ts",
  "shared/attacher/patches.ts",
  "shared/attacher/publish-request.ts",
  "shared/attacher/backoff.ts",
  "shared/attacher/attachment-source.ts",
  "shared/attacher/node-id.ts",
  "shared/attacher/attacher-steps.ts",
  "shared/attacher/attachment-protocol.ts",
  "shared/attacher/volume-release.ts",
  "shared/resizer/expand.ts",
  "shared/resizer/modify.ts",
  "shared/resizer/claim-status.ts",
  "shared/resizer/bound-volume.ts",
  "shared/resizer/steps.ts",
  "shared/resizer/constants.ts",
  "shared/controller/plan.ts",
];

const ioModules = [
  "shared/kube/json-client.ts",
  "shared/kube/client.ts",
  "shared/kube/kind-watcher.ts",
  "shared/kube/watched-store.ts",
  "shared/csi/client.ts",
  "shared/csi/connect-driver.ts",
];
const ioPackages = [
  "node:http",
  "node:https",
  "node:http2",
  "node:net",
  "node:fs",
  "node:fs/promises",
  "http",
  "https",
  "net",
  "fs",
  "fs/promises",
  "@kubernetes/client-node",
  "@grpc/grpc-js",
  "undici",
  "express",
];

function isIoPackage(specifier: string): boolean {
  return ioPackages.some((p) => specifier === p || specifier.startsWith(`${p}/`));
}

/** Specifiers of the imports that run: static imports and re-exports (not `import type`), bare imports, import(). */
function runtimeSpecifiers(source: string): string[] {
  const code = source.replace(/\/\*[\s\S]*?\*\//g, "").replace(/^\s*\/\/.*$/gm, "");
  const found: string[] = [];
  for (const m of code.matchAll(/\b(import|export)\s+(type\s+)?([^;]*?)\bfrom\s*["']([^"']+)["']/g)) {
    if (m[2] === undefined) found.push(m[4] as string);
  }
  for (const m of code.matchAll(/\bimport\s*["']([^"']+)["']/g)) found.push(m[1] as string);
  for (const m of code.matchAll(/\bimport\s*\(\s*["']([^"']+)["']\s*\)/g)) found.push(m[1] as string);
  return found;
}

/** The I/O modules `file` reaches, each with the import chain that gets there. */
function ioReached(file: string): string[] {
  const reached: string[] = [];
  const seen = new Set<string>();
  const walk = (rel: string, chain: string[]): void => {
    if (seen.has(rel)) return;
    seen.add(rel);
    if (ioModules.includes(rel)) {
      reached.push([...chain, rel].join(" → "));
      return;
    }
    const source = readFileSync(path.join(root, rel), "utf8");
    for (const specifier of runtimeSpecifiers(source)) {
      if (specifier.startsWith(".")) {
        walk(path.posix.normalize(path.posix.join(path.posix.dirname(rel), specifier)), [...chain, rel]);
      } else if (isIoPackage(specifier)) {
        reached.push([...chain, rel, specifier].join(" → "));
      }
    }
  };
  walk(file, []);
  return reached;
}

test("the scanner counts imports that run and skips those erased", () => {
  const sample = [
    'import { a } from "./a.ts";',
    'import type { B } from "./b.ts";',
    "import {\n  type C,\n  d,\n} from './c.ts';",
    'export { e } from "./e.ts";',
    'export type { F } from "./f.ts";',
    'import "./side-effect.ts";',
    'const g = await import("./g.ts");',
    '// import { h } from "./commented.ts";',
    '/* import { i } from "./block.ts"; */',
  ].join("\n");
  assert.deepEqual(runtimeSpecifiers(sample).sort(), [
    "./a.ts",
    "./c.ts",
    "./e.ts",
    "./g.ts",
    "./side-effect.ts",
  ]);
});

test("the walk finds I/O where it is: a function's entry reaches the Kubernetes client", () => {
  const chains = ioReached("functions/binder/main.ts");
  assert.ok(
    chains.some((c) => c.endsWith("shared/kube/json-client.ts")),
    `expected json-client.ts among ${JSON.stringify(chains)}`,
  );
  assert.ok(ioReached("shared/csi/connect-driver.ts").length > 0);
});

for (const file of decisionModules) {
  test(`${file} reaches no I/O module`, () => {
    assert.deepEqual(ioReached(file), [], `${file} is a decision module: it must not reach I/O`);
  });
}
