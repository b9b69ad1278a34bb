// CPU seconds each process spent over one timed workload, read from /proc
// (Linux; elsewhere a workload reports none). On one machine the API server,
// etcd and the controllers share the cores, so a workload that keeps them all
// busy is bound by the CPU its stack makes everyone spend, not by its waits:
// these figures say which it was (busyPercent) and who spent it.
import { readdirSync, readFileSync } from "node:fs";
import { CLOCK_TICKS, parseMachineTicks, round } from "../support.ts";

/** A process of the stack under test, by the name the report gives it. */
export interface NamedProcess {
  name: string;
  pid: number | undefined;
}

export interface CpuSeconds {
  /** Busy seconds of the whole machine over the window (all cores). */
  machine: number;
  /** machine over (window × cores): near 100, the workload was bound by CPU. */
  busyPercent: number;
  /** The stack's processes by name, kube-apiserver and etcd by command, `bench` (this process), `other` (the rest). */
  byProcess: Record<string, number>;
}

interface ProcTicks {
  command: string;
  ticks: number;
}

type Snapshot = { at: number; machineTicks: number; procs: Map<number, ProcTicks> };

/** utime + stime of one /proc/<pid>/stat line; its command is the parenthesised second field. */
export function parseProcStat(stat: string): ProcTicks | undefined {
  const open = stat.indexOf("(");
  const close = stat.lastIndexOf(")");
  if (open < 0 || close < open) return undefined;
  // Fields after the command: state is the first, so utime (field 14) and stime (15) are the 12th and 13th.
  const after = stat
    .slice(close + 2)
    .trim()
    .split(/\s+/);
  const ticks = Number(after[11]) + Number(after[12]);
  return Number.isFinite(ticks) ? { command: stat.slice(open + 1, close), ticks } : undefined;
}

/** The control plane's own processes, recognised by command wherever they were started from. */
const BY_COMMAND = new Set(["kube-apiserver", "etcd"]);

/**
 * Seconds per process between two snapshots: the named processes (a process
 * that started within the window counts whole), the control plane by
 * command, this process as `bench`, and whatever else the machine did as
 * `other`. Pure.
 */
export function cpuBetween(
  before: Snapshot,
  after: Snapshot,
  named: readonly NamedProcess[],
  ownPid: number,
  cores: number,
): CpuSeconds {
  const names = new Map<number, string>();
  for (const p of named) if (p.pid !== undefined) names.set(p.pid, p.name);
  names.set(ownPid, "bench");
  const ticks = new Map<string, number>();
  let counted = 0;
  for (const [pid, now] of after.procs) {
    const name = names.get(pid) ?? (BY_COMMAND.has(now.command) ? now.command : undefined);
    if (name === undefined) continue;
    const spent = Math.max(0, now.ticks - (before.procs.get(pid)?.ticks ?? 0));
    ticks.set(name, (ticks.get(name) ?? 0) + spent);
    counted += spent;
  }
  const machineTicks = Math.max(0, after.machineTicks - before.machineTicks);
  ticks.set("other", Math.max(0, machineTicks - counted));
  const seconds = Math.max(1e-9, (after.at - before.at) / 1000);
  const byProcess = Object.fromEntries(
    [...ticks]
      .sort((a, b) => b[1] - a[1])
      .map(([name, t]): [string, number] => [name, round(t / CLOCK_TICKS, 2)]),
  );
  return {
    machine: round(machineTicks / CLOCK_TICKS, 2),
    busyPercent: round((100 * machineTicks) / CLOCK_TICKS / seconds / cores, 0),
    byProcess,
  };
}

function snapshot(): Snapshot | undefined {
  try {
    const machineTicks = parseMachineTicks(readFileSync("/proc/stat", "utf8"));
    const procs = new Map<number, ProcTicks>();
    for (const entry of readdirSync("/proc")) {
      const pid = Number(entry);
      if (!Number.isInteger(pid)) continue;
      try {
        const parsed = parseProcStat(readFileSync(`/proc/${pid}/stat`, "utf8"));
        if (parsed) procs.set(pid, parsed);
      } catch {
        // Gone between the listing and the read.
      }
    }
    return { at: performance.now(), machineTicks, procs };
  } catch {
    return undefined; // not Linux
  }
}

export interface CpuWindow {
  /** Ends the window; undefined where /proc cannot be read. */
  stop(): CpuSeconds | undefined;
}

/** Starts a window over every process; `named` is asked at the end (a stack may restart a process). */
export function startCpuWindow(named: () => readonly NamedProcess[], cores: number): CpuWindow {
  const before = snapshot();
  return {
    stop() {
      const after = snapshot();
      return before && after ? cpuBetween(before, after, named(), process.pid, cores) : undefined;
    },
  };
}
