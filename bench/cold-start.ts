// Figure 1: cold start of each function entry, from process spawn to the
// first request answered: an AdmissionReview (PVC CREATE without a class, so
// the default-class lookup goes to the API) for admission, a watch event the
// function handles (it reads the object from the API) for the controllers.
// Against the sandbox, over plain HTTP on loopback, each run a new process.
//
// Variants: the TypeScript sources as `npm run serve` runs them
// (functions/serve.ts), the esbuild bundle of functions/<name>/main.ts
// (`npm run build:functions`) started by the bundled serve.mjs, and that
// bundle with its V8 code cache (written as the image writes it:
// scripts/prime-code-cache.ts), which is what the image runs. Every variant
// runs with the image's NODE_OPTIONS and MALLOC_* settings (functions/node-options.ts): its
// bounded young generation means more collections while the bundle loads, and the
// figure is meant to be the deployed one. For the same reason no HOST is set
// (the image listens on every interface). Next to them:
// `node -e 0` and a bare node:http server answering one request (the floor
// any Node function has), the bundle's biggest packages (esbuild metafile),
// and what importing each heavy package costs on its own.
import { spawn } from "node:child_process";
import { join, relative } from "node:path";
import { type Metafile, stop as stopEsbuild } from "esbuild";
import { FUNCTION_NODE_OPTIONS, FUNCTION_PROCESS_ENV } from "../functions/node-options.ts";
import { FUNCTION_NAMES, type FunctionName } from "../functions/serve.ts";
import { buildFunctions, DEFAULT_FUNCTIONS_OUT_DIR, SERVE_BUNDLE } from "../scripts/build-functions.ts";
import { primeCodeCache } from "../scripts/prime-code-cache.ts";
import { claimAdmissionReview } from "../shared/admission/claim-review.ts";
import type { KubeObject } from "../shared/kube/types.ts";
import {
  atMost,
  type BenchSandbox,
  DRIVER_NAME,
  median,
  peakRssMiB,
  progress,
  REPO,
  round,
  type SpawnedFunction,
  serveArgs,
  spawnFunction,
  startBenchSandbox,
  storageClass,
  type Target,
} from "./support.ts";

export const COLD_START_TARGET_MS = 150;

export type ColdStartVariant = "typescript" | "bundle" | "bundleCodeCache";
// In this order: the bundles have no code cache until the last variant writes them one.
export const COLD_START_VARIANTS: readonly ColdStartVariant[] = ["typescript", "bundle", "bundleCodeCache"];
const ALL_FUNCTIONS: readonly FunctionName[] = FUNCTION_NAMES;

/** Packages whose import cost is measured on its own (unbundled, from node_modules). */
const HEAVY_PACKAGES = [
  "@kubernetes/client-node",
  "undici",
  "express",
  "node-forge",
  "@grpc/grpc-js",
  "pino",
  "prom-client",
  "cloudevents",
] as const;

export interface ColdStartOptions {
  /** Measured runs per function and variant (median reported). Default 5. */
  runs?: number;
  functions?: readonly FunctionName[];
  variants?: readonly ColdStartVariant[];
  /** Where the bundles go. Default dist/functions (what `npm run build:functions` writes). */
  bundleDir?: string;
  /** Runs of each package import measurement; 0 skips them. Default 3. */
  importRuns?: number;
}

export interface VariantFigure extends Target {
  /** Median spawn -> ready line. */
  readyMs: number;
  /** Median ready line -> first answer (the first request's own cost: lazy init, first API call). */
  firstRequestMs: number;
  /** Every run's spawn -> answer, in order. */
  runsMs: number[];
  /** Median VmHWM after the first request: the memory floor of this way of running the function. */
  peakRssMiB: number;
}

export interface BundleFacts {
  file: string;
  bytes: number;
  /** Biggest contributors to the bundle, KiB, largest first. */
  topPackagesKiB: Record<string, number>;
}

export interface ColdStartResult {
  measured: string;
  unit: "ms";
  runs: number;
  nodeBaselineMs: number;
  nodeHttpHelloMs: number;
  functions: Record<string, Partial<Record<ColdStartVariant, VariantFigure>>>;
  bundles: Record<string, BundleFacts>;
  /** Median `node -e "await import(pkg)"` minus `node -e 0`, ms. */
  importCostMs: Record<string, number>;
  best: { variant: ColdStartVariant; worstFunctionMs: number; met: boolean } | null;
}

/** The request each function answers first, and where it goes. */
function firstRequest(name: FunctionName): { path: string; body: object } {
  switch (name) {
    case "admission":
      return {
        path: "/mutate/persistentvolumeclaims",
        body: claimAdmissionReview({
          uid: "00000000-0000-4000-8000-000000000001",
          operation: "CREATE",
          name: "cold",
          namespace: "default",
          userInfo: { username: "bench", groups: ["system:authenticated"] },
          object: coldClaim(undefined),
        }),
      };
    case "attacher":
      return { path: "/", body: { type: "MODIFIED", object: coldVolume() } };
    default:
      return { path: "/", body: { type: "MODIFIED", object: coldClaim("cold-other") } };
  }
}

function coldClaim(storageClassName: string | undefined): KubeObject {
  return {
    apiVersion: "v1",
    kind: "PersistentVolumeClaim",
    metadata: { name: "cold", namespace: "default" },
    spec: {
      accessModes: ["ReadWriteOnce"],
      resources: { requests: { storage: "1Gi" } },
      volumeMode: "Filesystem",
      ...(storageClassName ? { storageClassName } : {}),
    },
  };
}

function coldVolume(): KubeObject {
  return {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: { name: "cold-pv" },
    spec: {
      capacity: { storage: "1Gi" },
      accessModes: ["ReadWriteOnce"],
      persistentVolumeReclaimPolicy: "Retain",
      storageClassName: "cold-other",
      csi: { driver: DRIVER_NAME, volumeHandle: "cold-volume" },
    },
  };
}

/** Milliseconds from spawn to exit of `node <args>`. */
function timeNode(args: readonly string[]): Promise<number> {
  const t0 = performance.now();
  const child = spawn(process.execPath, args, { stdio: "ignore", cwd: REPO });
  return new Promise((resolvePromise, reject) => {
    child.once("error", reject);
    child.once("exit", (code) =>
      code === 0
        ? resolvePromise(performance.now() - t0)
        : reject(new Error(`node ${args.join(" ")}: ${code}`)),
    );
  });
}

async function medianOf(runs: number, measure: () => Promise<number>): Promise<number> {
  const values: number[] = [];
  for (let i = 0; i < runs; i++) values.push(await measure());
  return median(values);
}

const HELLO_SERVER = `
const s = require("node:http").createServer((q, r) => r.end("ok"));
s.listen(0, () => process.stdout.write(JSON.stringify({ ready: true, url: "http://127.0.0.1:" + s.address().port }) + "\\n"));
process.on("SIGTERM", () => process.exit(0));
`;

/** One cold start: spawn, ready line, first request answered; the process is stopped afterwards. */
async function coldStartOnce(
  name: string,
  args: string[],
  env: Record<string, string>,
  request: { path: string; body: object } | undefined,
): Promise<{ totalMs: number; readyMs: number; peakRssMiB: number }> {
  let fn: SpawnedFunction | undefined;
  try {
    fn = await spawnFunction({ name, args, env });
    const res = await fetch(`${fn.url}${request?.path ?? "/"}`, {
      method: request ? "POST" : "GET",
      headers: { "content-type": "application/json" },
      ...(request ? { body: JSON.stringify(request.body) } : {}),
    });
    const text = await res.text();
    const totalMs = performance.now() - fn.spawnedAt;
    if (res.status !== 200)
      throw new Error(`${name}: first request answered ${res.status}: ${text.slice(0, 300)}`);
    return { totalMs, readyMs: fn.readyMs, peakRssMiB: peakRssMiB(fn.child.pid) };
  } finally {
    await fn?.stop(2000);
  }
}

function bundleFacts(file: string, metafile: Metafile): BundleFacts {
  const output = Object.values(metafile.outputs)[0];
  const byPackage = new Map<string, number>();
  for (const [path, input] of Object.entries(output?.inputs ?? {})) {
    const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path)?.[1] ?? `${path.split("/")[0]} (own code)`;
    byPackage.set(pkg, (byPackage.get(pkg) ?? 0) + input.bytesInOutput);
  }
  const top = [...byPackage].sort((a, b) => b[1] - a[1]).slice(0, 8);
  return {
    file: relative(REPO, file),
    bytes: output?.bytes ?? 0,
    topPackagesKiB: Object.fromEntries(top.map(([k, v]) => [k, round(v / 1024, 0)])),
  };
}

export async function runColdStart(options: ColdStartOptions = {}): Promise<ColdStartResult> {
  const runs = Math.max(1, Math.min(options.runs ?? 5, 50));
  const names = options.functions ?? ALL_FUNCTIONS;
  const variants = options.variants ?? COLD_START_VARIANTS;
  const importRuns = Math.max(0, Math.min(options.importRuns ?? 3, 20));

  progress(`cold start: bundling ${names.join(", ")} (build:functions)`);
  const bundleDir = options.bundleDir ?? DEFAULT_FUNCTIONS_OUT_DIR;
  const built = await buildFunctions({ outDir: bundleDir, names });
  // esbuild's service process is a child of this one: ending it puts its CPU time on the bench's account.
  await stopEsbuild();
  const bundles: Record<string, BundleFacts> = {};
  for (const b of built) bundles[b.name] = bundleFacts(b.file, b.metafile);

  progress("cold start: node -e 0 and a bare http server");
  const nodeBaselineMs = await medianOf(runs, () => timeNode(["-e", "0"]));
  const nodeHttpHelloMs = await medianOf(
    runs,
    async () => (await coldStartOnce("hello", ["-e", HELLO_SERVER], {}, undefined)).totalMs,
  );

  const importCostMs: Record<string, number> = {};
  if (importRuns > 0) {
    progress(`cold start: import cost of ${HEAVY_PACKAGES.length} packages on their own`);
    for (const pkg of HEAVY_PACKAGES) {
      const ms = await medianOf(importRuns, () =>
        timeNode(["--input-type=module", "-e", `await import(${JSON.stringify(pkg)})`]),
      );
      importCostMs[pkg] = round(Math.max(0, ms - nodeBaselineMs), 0);
    }
  }

  const bs: BenchSandbox = await startBenchSandbox();
  const functions: ColdStartResult["functions"] = {};
  try {
    const registry = bs.sandbox.apiServer.registry;
    registry.seed(storageClass("standard"));
    registry.seed(storageClass("cold-other", { isDefault: false, provisioner: "example.com/not-ours" }));
    registry.seed(coldClaim("cold-other"));
    registry.seed(coldVolume());

    // Run i of every function, then run i + 1: a slow stretch of the machine
    // (they last seconds to minutes here) then weighs on every function alike
    // instead of on whichever one it happened to fall on.
    for (const variant of variants) {
      const plans = names.map((name) => {
        const bundle = built.find((b) => b.name === name)?.file;
        if (variant !== "typescript" && !bundle) throw new Error(`cold start: no bundle of ${name}`);
        const env: Record<string, string> = {
          ...bs.env,
          FUNCTION: name,
          PROVISIONER_DRIVERS: DRIVER_NAME,
          ...FUNCTION_PROCESS_ENV,
          // No HOST, as in the image: listen on every interface. The other benches
          // bind 127.0.0.1, and any HOST makes node:net resolve it before listening
          // (node:dns loaded, the IPv6 address pattern compiled), 3-5 ms that a
          // deployed function's cold start does not spend.
          HOST: "",
        };
        const args = variant === "typescript" ? serveArgs() : [join(bundleDir, SERVE_BUNDLE)];
        return {
          name,
          args,
          env,
          request: firstRequest(name),
          totals: [] as number[],
          readies: [] as number[],
          rss: [] as number[],
        };
      });
      if (variant === "bundleCodeCache") await primeCodeCache(bundleDir);
      for (let i = 0; i < runs; i++) {
        for (const plan of plans) {
          const r = await coldStartOnce(plan.name, plan.args, plan.env, plan.request);
          plan.totals.push(r.totalMs);
          plan.readies.push(r.readyMs);
          plan.rss.push(r.peakRssMiB);
        }
      }
      for (const { name, totals, readies, rss } of plans) {
        const ms = round(median(totals), 0);
        const readyMs = round(median(readies), 0);
        functions[name] ??= {};
        functions[name][variant] = {
          ...atMost(ms, COLD_START_TARGET_MS, "ms"),
          readyMs,
          firstRequestMs: round(median(totals.map((t, i) => t - (readies[i] ?? 0))), 0),
          runsMs: totals.map((t) => round(t, 0)),
          peakRssMiB: round(median(rss), 0),
        };
        progress(`cold start: ${name} ${variant}: ${ms} ms (ready ${readyMs} ms)`);
      }
    }
  } finally {
    await bs.close();
  }

  let best: ColdStartResult["best"] = null;
  for (const variant of variants) {
    const worst = Math.max(...names.map((n) => functions[n]?.[variant]?.value ?? Number.POSITIVE_INFINITY));
    if (!best || worst < best.worstFunctionMs)
      best = { variant, worstFunctionMs: worst, met: worst <= COLD_START_TARGET_MS };
  }

  return {
    measured: `process spawn -> first request answered (HTTP 200), median of runs; each run a fresh process with NODE_OPTIONS="${FUNCTION_NODE_OPTIONS}" and the MALLOC_* settings of functions/node-options.ts`,
    unit: "ms",
    runs,
    nodeBaselineMs: round(nodeBaselineMs, 0),
    nodeHttpHelloMs: round(nodeHttpHelloMs, 0),
    functions,
    bundles,
    importCostMs,
    best,
  };
}
