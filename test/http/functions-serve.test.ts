import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import {
  entryPath,
  FUNCTION_NAMES,
  isFunctionName,
  isServedName,
  SERVED_NAMES,
  unsupportedNode,
} from "../../functions/serve.ts";

const serveScript = fileURLToPath(new URL("../../functions/serve.ts", import.meta.url));

function serve(env: Record<string, string | undefined>) {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, PORT: "0" };
  delete childEnv.FUNCTION;
  Object.assign(childEnv, env);
  return spawnSync(process.execPath, [serveScript], { env: childEnv, encoding: "utf8", timeout: 20_000 });
}

test("the function names are the documented six", () => {
  assert.deepEqual(
    [...FUNCTION_NAMES],
    ["admission", "binder", "provisioner", "attacher", "attach-detach", "protection", "resizer"],
  );
  assert.ok(isFunctionName("attach-detach"));
  assert.ok(!isFunctionName("Binder"));
  assert.match(entryPath("binder"), /functions\/binder\/main\.ts$/);
});

test("FUNCTION may also name `controllers`, the host of several controller functions, which is no function of its own", () => {
  assert.deepEqual([...SERVED_NAMES], [...FUNCTION_NAMES, "controllers"]);
  assert.ok(isServedName("controllers"));
  assert.ok(!isFunctionName("controllers"));
  assert.ok(existsSync(entryPath("controllers")));
});

test("an unknown FUNCTION exits 2 and names the valid ones", () => {
  const result = serve({ FUNCTION: "nope" });
  assert.equal(result.status, 2);
  assert.match(
    result.stderr,
    /unknown FUNCTION "nope"; expected one of: admission, binder, provisioner, attacher, attach-detach/,
  );
  assert.equal(result.stdout, "");
});

test("a missing FUNCTION exits 2 with a usage hint", () => {
  const result = serve({});
  assert.equal(result.status, 2);
  assert.match(result.stderr, /FUNCTION is not set/);
  assert.equal(result.stdout, "");
});

test("every function has its entry", () => {
  for (const name of SERVED_NAMES) assert.ok(existsSync(entryPath(name)), `${name} has no main.ts`);
});

test("a function whose entry is missing exits 2 saying so", () => {
  // serve.ts (and the loader it imports) alone in a folder: every function's entry is missing there.
  const dir = mkdtempSync(join(tmpdir(), "ksf-serve-"));
  try {
    copyFileSync(serveScript, join(dir, "serve.ts"));
    copyFileSync(join(dirname(serveScript), "load-bundle.ts"), join(dir, "load-bundle.ts"));
    const childEnv: NodeJS.ProcessEnv = { ...process.env, PORT: "0", FUNCTION: "binder" };
    const result = spawnSync(process.execPath, [join(dir, "serve.ts")], {
      env: childEnv,
      encoding: "utf8",
      timeout: 20_000,
    });
    assert.equal(result.status, 2);
    assert.match(result.stderr, /function binder is not built yet/);
    assert.equal(result.stdout, "");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a Node older than 24 is refused with a message naming Node 24; 24 and later run", () => {
  for (const old of ["v20.20.2", "v22.19.0", "v23.11.1"])
    assert.match(unsupportedNode(old) ?? "", /Node\.js 24 or newer is required, this is v2\d/);
  for (const ok of ["v24.0.0", "v24.21.0", "v25.1.0"]) assert.equal(unsupportedNode(ok), undefined);
  assert.equal(unsupportedNode(process.version), undefined, "the project's own node");
});
