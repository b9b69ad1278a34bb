// Runs before `npm start`, `npm test`, `npm run sandbox` and `npm run serve`
// under whatever Node the machine has (Node 20 here): plain JavaScript, no
// dependencies. Installs node_modules when it is missing or older than the
// lockfile, so both commands work as the first command on a fresh clone; the
// install brings the Node 24 binary (npm package `node`) that npm scripts then
// find first on PATH.
import { spawnSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const marker = join(root, "node_modules", ".package-lock.json");
const lock = join(root, "package-lock.json");
const nodeBin = join(root, "node_modules", ".bin", "node");

const stale =
  !existsSync(marker) ||
  !existsSync(nodeBin) ||
  (existsSync(lock) && statSync(lock).mtimeMs > statSync(marker).mtimeMs + 1000);

function npm(args) {
  const [cmd, ...pre] = process.env.npm_execpath ? [process.execPath, process.env.npm_execpath] : ["npm"];
  return spawnSync(cmd, [...pre, ...args, "--no-audit", "--no-fund"], {
    cwd: root,
    stdio: ["ignore", "inherit", "inherit"],
  }).status;
}

if (stale) {
  process.stderr.write("kube-storage-functions: installing dependencies...\n");
  // `npm ci` installs exactly the lockfile. Some npm 11 releases refuse a lockfile that
  // lists only this platform's optional binaries (biome, esbuild); `npm install` then
  // installs from the same lockfile without that check.
  let status = existsSync(lock) ? npm(["ci"]) : 1;
  if (status !== 0) status = npm(["install"]);
  if (status !== 0) {
    process.stderr.write("kube-storage-functions: dependency install failed\n");
    process.exit(status ?? 1);
  }
}

const major = Number(process.versions.node.split(".")[0]);
if (major < 24 && !existsSync(nodeBin)) {
  process.stderr.write(
    `kube-storage-functions needs Node >= 24 (found ${process.version}); node_modules/.bin/node is missing\n`,
  );
  process.exit(1);
}
