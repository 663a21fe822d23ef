// How bench:peers measures one phase of one system: the origin's counters
// reset before it and read after it, CPU per process around it, Redis's own
// count for the tiers; the Row made of it; the wrk Zipf phase; and the walk
// that brings every system to the same warm state first.
import { performance } from "node:perf_hooks";
import { PAGE_RESOURCES } from "../../src/origin/resources";
import { cpuBetween, cpuSample } from "../lib/cpu";
import { percentile, type herd } from "../lib/probe";
import { usageBetween, type RedisSnapshot, type RedisUsage } from "../../dev/harness/redisProbe";
import { sleep } from "../lib/sleep";
import { wrkPhase, type Phase } from "../lib/wrk";
import type { Context, Row, ScenarioName } from "./plan";
import type { System, Tier } from "./systems";

interface Measured<T> {
  value: T;
  origin: Record<string, number>;
  originTotal: number;
  cpu: Row["cpu"];
  redis?: RedisUsage;
}

/** Resets the origin's counters, runs `work`, waits `settleMs` (background fills), reads the counters; CPU and Redis around `work`. */
export async function measure<T>(system: System, work: () => Promise<T>, settleMs = 0): Promise<Measured<T>> {
  const redis = isTier(system) ? system.redis : null;
  const snap = async (): Promise<RedisSnapshot | null> => (redis ? redis.snapshot().catch(() => null) : null);
  await system.origin.resetCounters();
  const r0 = await snap();
  const cpu0 = cpuSample(system.cpuRoots);
  const value = await work();
  const cpu1 = cpuSample(system.cpuRoots);
  const r1 = r0 ? await snap() : null;
  if (settleMs) await sleep(settleMs);
  const counters = await system.origin.counters();
  const origin = Object.fromEntries(PAGE_RESOURCES.map((s) => [s, counters.services[s] ?? 0]));
  const cpu = cpuBetween(cpu0, cpu1);
  // wrk ran and exited between the samples: its CPU is in "others" (the machine's busy time), told apart here.
  const wrkCpuS = (value as Partial<Phase>)?.wrkCpuS;
  if (typeof wrkCpuS === "number") {
    cpu.seconds.wrk = Math.round(wrkCpuS * 100) / 100;
    cpu.seconds.others = Math.round(Math.max(0, (cpu.seconds.others ?? 0) - wrkCpuS) * 100) / 100;
  }
  return {
    value,
    origin,
    originTotal: PAGE_RESOURCES.reduce((sum, s) => sum + (counters.services[s] ?? 0), 0),
    cpu,
    ...(r0 && r1 ? { redis: usageBetween(r0, r1) } : {}),
  };
}

export function row(system: System, scenario: ScenarioName, m: Measured<Phase>, extra: Record<string, unknown> = {}, notes: string[] = []): Row {
  const { value: load, origin, originTotal, cpu, redis } = m;
  if (load.askedRate && load.late > 0) {
    notes = [
      ...notes,
      `${load.late.toLocaleString("en-US")} sends went out late (no connection free; the latest by ${load.lateMaxMs} ms): their latency leaves out that wait`,
    ];
  }
  if (load.unanswered > 0)
    notes = [
      ...notes,
      `${load.unanswered.toLocaleString("en-US")} requests still unanswered when wrk stopped (3 s after the schedule's end): not in the figures`,
    ];
  return { system: system.name, scenario, load, origin, originTotal, cpu, ...(redis ? { redis } : {}), extra, notes };
}

export function isTier(system: System): system is Tier {
  return system.name === "tier" || system.name === "tier-300s" || system.name === "tier-location";
}

/** The herd's answers in the shape of a wrk phase. */
export function phaseOfHerd({ answers, seconds }: Awaited<ReturnType<typeof herd>>): Phase {
  const ms = answers.map((a) => a.ms).sort((a, b) => a - b);
  const errorKinds: Record<string, number> = {};
  for (const a of answers)
    if (a.status === 0 || a.status >= 400)
      errorKinds[a.status ? `HTTP ${a.status}` : "no answer"] = (errorKinds[a.status ? `HTTP ${a.status}` : "no answer"] ?? 0) + 1;
  return {
    seconds: Math.round(seconds * 100) / 100,
    connections: answers.length,
    askedRate: null,
    requests: answers.length,
    rps: Math.round(answers.length / seconds),
    p50Ms: percentile(ms, 50),
    p99Ms: percentile(ms, 99),
    maxMs: ms.at(-1) ?? 0,
    errors: Object.values(errorKinds).reduce((a, b) => a + b, 0),
    errorKinds,
    late: 0,
    lateMaxMs: 0,
    unanswered: 0,
    bytes: 0,
    wrkCpuS: null,
  };
}

export function zipf(ctx: Context, system: System, seconds: number, seed: number, paced: boolean, paths = ctx.workload.zipfFile): Promise<Phase> {
  const s = ctx.settings;
  return wrkPhase({
    targets: system.targets,
    connections: paced ? s.pacedConnections : s.connections,
    seconds,
    ...(paced ? { rate: ctx.rate } : {}),
    paths,
    seed,
    signal: ctx.signal,
  });
}

/**
 * The top `walkRanks` products asked for once each through the system
 * (connection i to target i mod n: each of the tier's instances gets half,
 * L2 all), 64 at a time: the same warm state for every system, whatever its
 * speed. Orchestration, not measured: Node's fetch is fast enough here
 * (every request is a miss, rendered upstream).
 */
export async function walk(ctx: Omit<Context, "rate">, system: System): Promise<{ pages: number; seconds: number; errors: number }> {
  const paths = ctx.workload.walkPaths();
  ctx.phase(`${system.name} · walk: the top ${paths.length.toLocaleString("en-US")} Zipf ranks once each (not measured)`);
  const started = performance.now();
  let next = 0;
  let errors = 0;
  await Promise.all(
    Array.from({ length: 64 }, async (_, c) => {
      for (let k = next++; k < paths.length && !ctx.signal.aborted; k = next++) {
        const answer = await fetch(`${system.targets[c % system.targets.length]}${paths[k]}`).catch(() => null);
        if (!answer?.ok) errors++;
        await answer?.arrayBuffer().catch(() => undefined);
      }
    }),
  );
  return { pages: Math.min(next, paths.length), seconds: Math.round(performance.now() - started) / 1000, errors };
}
