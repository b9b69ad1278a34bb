// The real-server bench's CPU figures (bench/real/cpu-meter.ts): parsing
// /proc, naming the processes, and a live window over this very process.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { test } from "node:test";
import { cpuBetween, parseProcStat, startCpuWindow } from "../../bench/real/cpu-meter.ts";
import { flatFigures } from "../../bench/real/workloads.ts";
import { parseMachineTicks } from "../../bench/support.ts";

/** A /proc/<pid>/stat line with the given command, utime and stime (the other fields as Linux writes them). */
function statLine(pid: number, command: string, utime: number, stime: number): string {
  return `${pid} (${command}) S 1 ${pid} ${pid} 0 -1 4194560 100 0 0 0 ${utime} ${stime} 0 0 20 0 8 0 123 456 789`;
}

test("parseProcStat: utime + stime, and the command even with spaces and parentheses in it", () => {
  assert.deepEqual(parseProcStat(statLine(7, "kube-apiserver", 300, 45)), {
    command: "kube-apiserver",
    ticks: 345,
  });
  assert.deepEqual(parseProcStat(statLine(8, "node (x) y", 2, 3)), { command: "node (x) y", ticks: 5 });
  assert.equal(parseProcStat("garbage"), undefined);
  assert.equal(parseProcStat("1 (short) S 1"), undefined);
});

test("parseMachineTicks: user, nice, system, irq and softirq; not idle, iowait, steal or guest", () => {
  assert.equal(parseMachineTicks("cpu  100 5 50 9000 70 3 2 400 30 1\ncpu0 1 2 3 4"), 160);
  assert.equal(parseMachineTicks(""), 0);
});

test("cpuBetween: the stack's processes by name, the control plane by command, the bench, and the rest", () => {
  const procs = (entries: [number, string, number][]) =>
    new Map(entries.map(([pid, command, ticks]) => [pid, { command, ticks }]));
  const before = {
    at: 0,
    machineTicks: 1000,
    procs: procs([
      [10, "kube-apiserver", 500],
      [11, "etcd", 100],
      [20, "node", 50],
      [21, "node", 40],
      [30, "node", 10],
      [40, "sshd", 5],
    ]),
  };
  const after = {
    at: 2000,
    machineTicks: 1400, // 4 CPU-seconds over 2 s on 2 cores: all busy
    procs: procs([
      [10, "kube-apiserver", 620],
      [11, "etcd", 140],
      [20, "node", 150],
      [21, "node", 70],
      [22, "node", 25], // started within the window: counted whole
      [30, "node", 30],
      [40, "sshd", 6],
    ]),
  };
  const named = [
    { name: "provisioner", pid: 20 },
    { name: "binder", pid: 21 },
    { name: "binder", pid: 22 },
    { name: "gone", pid: undefined },
  ];
  const cpu = cpuBetween(before, after, named, 30, 2);
  assert.equal(cpu.machine, 4);
  assert.equal(cpu.busyPercent, 100);
  assert.deepEqual(cpu.byProcess, {
    "kube-apiserver": 1.2,
    provisioner: 1,
    binder: 0.55,
    etcd: 0.4,
    other: 0.65, // 400 machine ticks less the 335 counted (sshd among them)
    bench: 0.2,
  });
});

test("a live window sees this process's own work (on Linux; elsewhere it reports nothing)", () => {
  const window = startCpuWindow(() => [], 1);
  const until = performance.now() + 150;
  let x = 0;
  while (performance.now() < until) x += Math.sqrt(x + 1);
  assert.ok(x > 0);
  const cpu = window.stop();
  if (!existsSync("/proc/stat")) {
    assert.equal(cpu, undefined);
    return;
  }
  assert.ok(cpu, "a window on Linux reports");
  assert.ok((cpu.byProcess.bench ?? 0) >= 0.05, JSON.stringify(cpu));
  assert.ok(cpu.machine >= (cpu.byProcess.bench ?? 0), JSON.stringify(cpu));
});

test("flat figures carry each timed workload's machine CPU seconds", () => {
  const cpu = (machine: number) => ({ machine, busyPercent: 90, byProcess: { other: machine } });
  const f = flatFigures({
    delete: {
      claims: 1,
      seconds: 1,
      secondsUntilVolumesGoneFromApi: 1,
      backingVolumesChecked: false,
      changesPerClaim: {},
      cpuSeconds: cpu(3),
    },
    bind: [
      { pairs: 100, seconds: 2, cpuSeconds: cpu(4) },
      { pairs: 1000, seconds: 9 },
    ],
    attach: { attachments: 5, seconds: 1, cpuSeconds: cpu(1.5) },
  });
  assert.equal(f["delete.machineCpuSeconds"], 3);
  assert.equal(f["bind.100.machineCpuSeconds"], 4);
  assert.equal(f["bind.1000.machineCpuSeconds"], undefined);
  assert.equal(f["attach.machineCpuSeconds"], 1.5);
});
