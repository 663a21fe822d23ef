// CPU seconds by process tree, from /proc (Linux; elsewhere every figure is
// 0): which part of a benchmark's stack used the machine, and how much went
// to other sessions' processes. Shared by every benchmark.
import { readFileSync, readdirSync } from "node:fs";
import { performance } from "node:perf_hooks";

const TICKS_PER_SECOND = 100;

/** CPU seconds so far, by role, and of the whole machine. */
export interface CpuSample {
  at: number;
  seconds: Record<string, number>;
  /** Machine-wide busy CPU seconds (all cores). */
  machine: number;
}

/** The workerd processes this process has started so far (Miniflare spawns them as its children). */
export function workerdPids(): Set<number> {
  const pids = new Set<number>();
  for (const [pid, info] of readProcesses()) if (info.ppid === process.pid && info.comm === "workerd") pids.add(pid);
  return pids;
}

/**
 * CPU seconds per role. `roots` maps a role to the root pids of its process
 * trees (the system's workerd processes, its cache server, its origin);
 * each process counts under the first root found walking up its parents,
 * redis-server as "redis" wherever it is. Below this process but under no
 * root: another system's workerd (idle, or answering a
 * background poll) "other workerd", the rest "harness" (this process: the
 * orchestration, the pollers, Miniflare's controller). wrk starts and
 * exits within a phase, so /proc never shows it at a sample: its CPU comes
 * from bench/lib/wrk.ts (bench:peers' measure). Other sessions' processes are
 * left to "others" (cpuBetween).
 */
export function cpuSample(roots: Record<string, number[]>): CpuSample {
  const seconds: Record<string, number> = { harness: 0, "other workerd": 0 };
  for (const role of Object.keys(roots)) seconds[role] = 0;
  let machine = 0;
  try {
    const procs = readProcesses();
    const rootRole = new Map<number, string>([[process.pid, "harness"]]);
    for (const [role, pids] of Object.entries(roots)) for (const pid of pids) rootRole.set(pid, role);
    for (const [pid, info] of procs) {
      let role: string | undefined;
      for (let p: number | undefined = pid, depth = 0; p && depth < 12 && !role; p = procs.get(p)?.ppid, depth++) role = rootRole.get(p);
      if (!role) continue;
      if (info.comm === "redis-server") role = "redis";
      else if (role === "harness" && info.comm === "workerd") role = "other workerd";
      seconds[role] = (seconds[role] ?? 0) + info.ticks / TICKS_PER_SECOND;
    }
    const fields = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
    machine = (fields.reduce((a, b) => a + b, 0) - (fields[3] ?? 0) - (fields[4] ?? 0)) / TICKS_PER_SECOND;
  } catch {
    // not Linux
  }
  return { at: performance.now(), seconds, machine };
}

/** CPU seconds used per role between two samples, plus "others" (the rest of the machine) and the wall time. */
export function cpuBetween(a: CpuSample, b: CpuSample): { wallS: number; seconds: Record<string, number> } {
  const out: Record<string, number> = {};
  let ours = 0;
  for (const role of Object.keys(b.seconds)) {
    const used = Math.max(0, (b.seconds[role] ?? 0) - (a.seconds[role] ?? 0));
    ours += used;
    out[role] = Math.round(used * 100) / 100;
  }
  out.others = Math.round(Math.max(0, b.machine - a.machine - ours) * 100) / 100;
  return { wallS: Math.round(b.at - a.at) / 1000, seconds: out };
}

/** The pid of the redis-server started (as a grandchild) by the servers process (dev/harness/stackChild.ts), found through /proc. */
export function findChildPid(parentPid: number, comm: string): number | null {
  for (const [pid, info] of readProcesses()) if (info.ppid === parentPid && info.comm === comm) return pid;
  return null;
}

/** Every process on the machine: parent, name and CPU ticks so far (from /proc). */
function readProcesses(): Map<number, { ppid: number; comm: string; ticks: number }> {
  const procs = new Map<number, { ppid: number; comm: string; ticks: number }>();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      // comm is in parentheses and may hold spaces: split after the last ')'.
      const close = stat.lastIndexOf(")");
      const comm = stat.slice(stat.indexOf("(") + 1, close);
      const rest = stat.slice(close + 2).split(" ");
      // rest[0] is field 3 (state): ppid is field 4, utime 14, stime 15.
      procs.set(Number(name), { ppid: Number(rest[1]), comm, ticks: Number(rest[11]) + Number(rest[12]) });
    } catch {
      // the process ended meanwhile
    }
  }
  return procs;
}
