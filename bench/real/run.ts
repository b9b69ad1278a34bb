// `npm run bench -- --kubeconfig PATH` (or KUBECONFIG set): the workloads of
// issue 20 against a real API server, with our functions as deployed
// (bench/real/ours.ts); with --compare, alternating rounds of upstream's
// kube-controller-manager and CSI sidecars (bench/real/upstream.ts) against
// the same server, and the ratio per figure. One JSON document on stdout,
// progress on stderr. Everything the bench creates is named ksf-bench-* and
// removed at the end (also what an interrupted run left).
//
//   bash ../shared/real-cluster/build.sh up
//   npm run bench -- --kubeconfig ~/.cache/kube-storage-functions/real-cluster/kubeconfig
//
// Options: --help (options.ts USAGE); the defaults are the table.

import { mkdtemp, rm } from "node:fs/promises";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { KubeConfigError } from "../../shared/kube/client.ts";
import { cpuLoopMs, cpuSnapshot, DRIVER_NAME, load, otherLoad, progress, round } from "../support.ts";
import { startCpuWindow } from "./cpu-meter.ts";
import { type Figures, medianFigures, type Ratio, ratios, realSummary, type SummaryLine } from "./figures.ts";
import { type RealBenchParams, RealBenchUsageError, realParamsFromArgs, USAGE } from "./options.ts";
import { type Stack, startOurStack } from "./ours.ts";
import { type ApiServer, connect } from "./server.ts";
import { startUpstreamStack } from "./upstream.ts";
import { watchCluster } from "./watch.ts";
import {
  attach,
  bindStatic,
  cleanCluster,
  deleteProvisioned,
  FAST_CLASS,
  flatFigures,
  isBenchObject,
  lateVolume,
  NODE,
  prepareCluster,
  provision,
  type RoundResult,
  WATCHED,
  warmUp,
} from "./workloads.ts";

export interface RealRound {
  stack: "ours" | "upstream";
  round: number;
  seconds: number;
  result: RoundResult;
  /** Peak RSS of each of our function processes over the round (VmHWM), MiB. */
  peakRssMiB?: Record<string, number>;
  error?: string;
}

export interface RealBenchReport {
  bench: "kube-storage-functions/real-api-server";
  node: string;
  startedAt: string;
  seconds: number;
  server: { url: string | undefined; version: string | undefined };
  machine: {
    cpus: number;
    loadAverage1mAtStart: number;
    cpuLoopMs: number;
    otherProcessesCpuPercent: number;
  };
  params: RealBenchParams;
  rounds: RealRound[];
  /** Median over rounds, per figure (lower is better). */
  ours: Figures;
  upstream?: Figures;
  /** Upstream's figure over ours: above 1 we are faster (or do less). */
  ratio?: Record<string, Ratio>;
  /** The targets that these figures can judge. */
  summary: SummaryLine[];
  allMet: boolean;
}

async function runRound(
  params: RealBenchParams,
  server: ApiServer,
  stackName: "ours" | "upstream",
  round: number,
): Promise<RealRound> {
  const started = performance.now();
  const dir = await mkdtemp(join(tmpdir(), `ksf-real-bench-${stackName}-`));
  const result: RoundResult = {};
  let stack: Stack | undefined;
  const watch = await watchCluster({
    kubeConfig: server.kubeConfig,
    json: server.kube,
    resources: WATCHED,
    mine: isBenchObject,
  });
  try {
    progress(`round ${round} (${stackName}): starting the control plane`);
    const stackOptions = {
      kubeconfig: server.kubeconfig,
      kube: server.kube,
      dir,
      driverName: DRIVER_NAME,
      nodeId: NODE,
      probeClass: FAST_CLASS,
      resyncSeconds: params.resyncSeconds,
      ...(params.forwarderConcurrency ? { forwarderConcurrency: params.forwarderConcurrency } : {}),
      ...(params.workers ? { workers: params.workers } : {}),
      ...(params.oneProcess ? { oneProcess: true } : {}),
      ...(params.cpuProfDir ? { cpuProfDir: params.cpuProfDir } : {}),
    };
    stack =
      stackName === "ours"
        ? await startOurStack(stackOptions)
        : await startUpstreamStack(stackOptions, params.upstream, params.upstreamDefaults);
    const running = stack;
    const ctx = {
      server,
      watch,
      stack,
      cpu: () => startCpuWindow(() => running.processes(), availableParallelism()),
      driverName: DRIVER_NAME,
      nodeId: NODE,
      timeoutMs: params.timeoutSeconds * 1000,
      resyncSeconds: params.resyncSeconds,
    };
    const w = new Set(params.workloads);
    if (params.warmup > 0) await warmUp(ctx, params.warmup, w);
    if (w.has("provision")) result.provision = await provision(ctx, params.claims);
    if (w.has("delete")) result.delete = await deleteProvisioned(ctx);
    if (w.has("bind")) {
      result.bind = [];
      for (const size of params.bindSizes) result.bind.push(await bindStatic(ctx, size));
    }
    if (w.has("attach")) result.attach = await attach(ctx, params.attachments);
    if (w.has("lateVolume")) result.lateVolume = await lateVolume(ctx, params.lateRuns);
    const rss = stack.peakRssMiB?.();
    return {
      stack: stackName,
      round,
      seconds: round2((performance.now() - started) / 1000),
      result,
      ...(rss ? { peakRssMiB: rss } : {}),
    };
  } catch (err) {
    const error = err instanceof Error ? err.message : String(err);
    progress(`round ${round} (${stackName}) failed: ${error}`);
    const diagnostics = stack?.diagnostics();
    if (diagnostics)
      for (const [name, text] of Object.entries(diagnostics))
        if (text.trim()) progress(`  ${name} said:\n${text.trim()}`);
    return { stack: stackName, round, seconds: round2((performance.now() - started) / 1000), result, error };
  } finally {
    await stack?.stop();
    await watch.close();
    // What a failed workload left must not reach the next round.
    await cleanCluster(server).catch((err: unknown) => progress(`cleanup: ${String(err)}`));
    await prepareCluster(server, DRIVER_NAME, NODE);
    await rm(dir, { recursive: true, force: true });
  }
}

const round2 = (n: number): number => round(n, 2);

export async function runRealBench(params: RealBenchParams): Promise<RealBenchReport> {
  const startedAt = new Date().toISOString();
  const cpu0 = cpuSnapshot();
  const machineLoad = load();
  const server = connect(params.kubeconfig);
  const report: RealBenchReport = {
    bench: "kube-storage-functions/real-api-server",
    node: process.version,
    startedAt,
    seconds: 0,
    server: { url: server.kubeConfig.getCurrentCluster()?.server, version: await server.version() },
    machine: {
      cpus: machineLoad.cpus,
      loadAverage1mAtStart: machineLoad.loadAverage1m,
      cpuLoopMs: cpuLoopMs(),
      otherProcessesCpuPercent: 0,
    },
    params,
    rounds: [],
    ours: {},
    summary: [],
    allMet: false,
  };
  try {
    await cleanCluster(server);
    await prepareCluster(server, DRIVER_NAME, NODE);
    for (let r = 1; r <= params.rounds; r++) {
      report.rounds.push(await runRound(params, server, "ours", r));
      if (params.compare) report.rounds.push(await runRound(params, server, "upstream", r));
    }
  } finally {
    await cleanCluster(server).catch(() => undefined);
    await server.close();
  }
  const figuresOf = (name: "ours" | "upstream"): Figures =>
    medianFigures(
      report.rounds.filter((r) => r.stack === name && !r.error).map((r) => flatFigures(r.result)),
    );
  report.ours = figuresOf("ours");
  if (params.compare) {
    report.upstream = figuresOf("upstream");
    report.ratio = ratios(report.ours, report.upstream);
  }
  report.summary = realSummary(report.ours, report.ratio);
  report.allMet = report.summary.length > 0 && report.summary.every((l) => l.met);
  const cpu1 = cpuSnapshot();
  report.seconds = round((cpu1.at - cpu0.at) / 1000, 1);
  report.machine.otherProcessesCpuPercent = otherLoad(cpu0, cpu1).otherProcessesCpuPercent;
  return report;
}

/** The entry `bench/run.ts` hands over to when a kubeconfig is given. */
export async function mainReal(args: readonly string[]): Promise<number> {
  if (args.includes("--help") || args.includes("-h")) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  let params: RealBenchParams;
  try {
    params = realParamsFromArgs(args, process.env);
  } catch (err) {
    if (err instanceof RealBenchUsageError) {
      process.stderr.write(`bench: ${err.message}\n${USAGE}\n`);
      return 2;
    }
    throw err;
  }
  try {
    const report = await runRealBench(params);
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
    return report.rounds.some((r) => r.error) ? 1 : 0;
  } catch (err) {
    if (err instanceof KubeConfigError) {
      process.stderr.write(`bench: ${err.message}\n`);
      return 2;
    }
    process.stderr.write(
      `bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    return 1;
  }
}

if (import.meta.main) {
  try {
    process.exit(await mainReal(process.argv.slice(2)));
  } catch (err) {
    process.stderr.write(
      `bench failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
    );
    process.exit(1);
  }
}
