// `npm run bench` must not rot: every bench module runs here with tiny
// parameters (seconds, not minutes) and the report keeps its shape: every
// figure a number next to a target string and a boolean `met`. The figures
// themselves are not checked (they depend on the machine).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { type BenchReport, DEFAULT_PARAMS, paramsFromArgs, runBench } from "../../bench/run.ts";
import { REPO } from "../../bench/support.ts";

let bundleDir = "";
before(async () => {
  bundleDir = await mkdtemp(join(tmpdir(), "ksf-bench-smoke-"));
});
after(async () => {
  await rm(bundleDir, { recursive: true, force: true });
});

function assertTarget(value: unknown, where: string): void {
  assert.ok(typeof value === "object" && value !== null, `${where} is an object`);
  const t = value as Record<string, unknown>;
  assert.equal(typeof t.value, "number", `${where}.value`);
  assert.equal(typeof t.target, "string", `${where}.target`);
  assert.equal(typeof t.met, "boolean", `${where}.met`);
}

test("paramsFromArgs reads the options and refuses unknown parts and functions", () => {
  const p = paramsFromArgs([
    "--claims",
    "7",
    "--bind-sizes",
    "1,2",
    "--skip",
    "coldStart",
    "--functions",
    "binder",
  ]);
  assert.equal(p.claims, 7);
  assert.deepEqual(p.bindSizes, [1, 2]);
  assert.deepEqual(p.skip, ["coldStart"]);
  assert.deepEqual(p.functions, ["binder"]);
  assert.deepEqual(paramsFromArgs([]), DEFAULT_PARAMS);
  assert.throws(() => paramsFromArgs(["--skip", "everything"]), /--skip/);
  assert.throws(() => paramsFromArgs(["--functions", "nope"]), /unknown function/);
  assert.throws(() => paramsFromArgs(["--claims", "many"]), /--claims/);
});

test("every bench module runs with tiny parameters and the report keeps its shape", async () => {
  const report: BenchReport = await runBench({
    claims: 4,
    coldRuns: 1,
    importRuns: 0,
    functions: ["binder"],
    rate: 100,
    admissionSeconds: 1,
    admissionWarmupSeconds: 0,
    bindSizes: [2, 6],
    bindRuns: 1,
    skip: [],
    bundleDir,
  });
  // One JSON document: survives a round trip unchanged.
  assert.deepEqual(JSON.parse(JSON.stringify(report)), report);
  assert.equal(typeof report.machine.otherProcessesCpuPercent, "number");
  assert.ok(report.machine.cpuLoopMs.atStart > 0 && report.machine.cpuLoopMs.atEnd > 0);

  const cold = report.coldStart?.result;
  assert.ok(cold, "coldStart");
  assert.equal(typeof cold.nodeBaselineMs, "number");
  for (const variant of ["typescript", "bundle", "bundleCodeCache"] as const) {
    const figure = cold.functions.binder?.[variant];
    assertTarget(figure, `coldStart.binder.${variant}`);
    assert.ok((figure?.value ?? 0) > 0);
  }
  assert.ok((cold.bundles.binder?.bytes ?? 0) > 0);
  assert.ok(cold.bundles.binder?.file.endsWith("binder/index.cjs"));

  const adm = report.admissionLatency?.result;
  assert.ok(adm, "admissionLatency");
  assertTarget(adm.autocannon.p99, "admissionLatency.autocannon.p99");
  assertTarget(adm.paced.p99, "admissionLatency.paced.p99");
  assert.ok(adm.autocannon.requests > 0 && adm.paced.requests > 0);
  assert.equal(adm.paced.non2xx + adm.autocannon.non2xx, 0);
  const floor = adm.autocannon.floor;
  assert.ok(
    floor.p50Ms >= 0 && floor.p99Ms >= floor.p50Ms && floor.maxMs >= floor.p99Ms,
    "autocannon's floor",
  );
  assert.equal(adm.met, adm.paced.p99.met, "judged on the paced figure");

  for (const key of ["withAdmission", "withoutAdmission"] as const) {
    const p = report.provisioning?.[key].result;
    assert.ok(p, `provisioning.${key}`);
    assert.equal(p.bound, 4, `${key}: every claim Bound`);
    assertTarget(p.throughput, `${key}.throughput`);
    assertTarget(p.writes.objectWritesPerClaim, `${key}.objectWritesPerClaim`);
    assertTarget(p.writes.eventWritesPerClaim, `${key}.eventWritesPerClaim`);
    assert.ok((p.writes.writesPerClaimByVerb["create persistentvolumes"] ?? 0) > 0, "PV creates counted");
    assert.equal(
      p.writes.writesPerClaimByVerb["create persistentvolumeclaims"],
      undefined,
      "own creates left out",
    );
    for (const fn of key === "withAdmission"
      ? ["admission", "binder", "provisioner"]
      : ["binder", "provisioner"])
      assertTarget(p.peakRssMiB[fn], `${key}.peakRssMiB.${fn}`);
  }

  const bind = report.bindLatency?.result;
  assert.ok(bind, "bindLatency");
  assert.deepEqual(Object.keys(bind.medianMs), ["2", "6"]);
  assertTarget(bind.growth, "bindLatency.growth");

  assert.ok(report.summary.length > 10);
  for (const line of report.summary) assertTarget(line, line.figure);
  const shownOnly = report.summary.filter((l) => l.judged === false);
  assert.deepEqual(
    shownOnly.map((l) => l.figure),
    [
      "coldStart.binder.typescript (ms)",
      "coldStart.binder.bundle (ms)",
      "admissionLatency.autocannon.p99 (ms)",
      "apiWrites.withoutAdmission.objectWritesPerClaim",
    ],
  );
  assert.match(shownOnly[2]?.note ?? "", /bare node:http server .* p99 [\d.]+ ms/);
  assert.match(shownOnly[3]?.note ?? "", /webhook/);
  assert.equal(
    report.allMet,
    report.summary.every((l) => l.met || l.judged === false),
  );
});

test("npm run bench prints exactly one JSON document on stdout, progress on stderr", async () => {
  const child = spawn(
    process.execPath,
    [
      "bench/run.ts",
      "--skip",
      "coldStart,admissionLatency,provisioning",
      "--bind-sizes",
      "1",
      "--bind-runs",
      "1",
    ],
    // A KUBECONFIG in the caller's environment would point the bench at that server (bench/real).
    { cwd: REPO, env: { ...process.env, KUBECONFIG: "" }, stdio: ["ignore", "pipe", "pipe"] },
  );
  let out = "";
  let err = "";
  child.stdout.on("data", (d: Buffer) => {
    out += d.toString();
  });
  child.stderr.on("data", (d: Buffer) => {
    err += d.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  assert.equal(code, 0, err);
  const report = JSON.parse(out) as BenchReport;
  assert.equal(report.bench, "kube-storage-functions");
  assert.ok(report.bindLatency);
  assert.match(err, /bind latency/);
});
