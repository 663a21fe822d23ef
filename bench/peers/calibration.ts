// What bench:peers measures before the systems' runs: the tier's saturation
// rate on a fresh stack (half of it is the fixed offered load), the Redis
// commands of an idle tier, and the generator's own ceiling.
import { performance } from "node:perf_hooks";
import { usageBetween, type RedisUsage } from "../../dev/harness/redisProbe";
import { sleep } from "../lib/sleep";
import { wrkPhase, type Phase } from "../lib/wrk";
import { walk } from "./measure";
import { SEEDS, type Context, type Durations } from "./plan";
import type { System, Tier } from "./systems";

export interface Calibration {
  /** A short closed-loop probe right after the walk: half of it paces the next two phases. */
  probe: Phase;
  provisionalRate: number;
  /** Saturation after the same walk, paced warm-up and paced phase as the systems' own runs: half of it is the fixed offered load. */
  saturation: Phase;
}

/**
 * The tier's saturation rate on a fresh stack of its own, in the state the
 * systems' runs measure theirs: the walk, a short closed-loop probe (its
 * half paces the next phases), the warm-up and fixed-load phases (same
 * seeds and lengths), then the saturation. Half of that is the rate of
 * every paced phase of every system.
 */
export async function calibrate(ctx: Omit<Context, "rate">, tier: Tier, d: Durations): Promise<Calibration> {
  await walk(ctx, tier);
  const s = ctx.settings;
  const closed = (seconds: number, seed: number) =>
    wrkPhase({ targets: tier.targets, connections: s.connections, seconds, paths: ctx.workload.zipfFile, seed, signal: ctx.signal });
  ctx.phase(`calibration (${tier.name}) · probe: closed loop, ${d.probeS} s`, d.probeS * 1000);
  const probe = await closed(d.probeS, SEEDS.calibrationProbe);
  const provisionalRate = Math.max(2, Math.round(probe.rps / 2));
  const paced = (seconds: number, seed: number) =>
    wrkPhase({
      targets: tier.targets,
      connections: s.pacedConnections,
      seconds,
      rate: provisionalRate,
      paths: ctx.workload.zipfFile,
      seed,
      signal: ctx.signal,
    });
  ctx.phase(`calibration (${tier.name}) · paced at ${provisionalRate} req/s: ${d.warmUpS} s + ${d.fixedS} s`, (d.warmUpS + d.fixedS) * 1000);
  await paced(d.warmUpS, SEEDS.warmUp);
  await paced(d.fixedS, SEEDS.fixed);
  ctx.phase(`calibration (${tier.name}) · saturation`, d.saturationS * 1000);
  const saturation = await closed(d.saturationS, SEEDS.saturation);
  return { probe, provisionalRate, saturation };
}

export interface IdleCost {
  seconds: number;
  instances: number;
  usage: RedisUsage;
  perIsolateHour: number;
}

/** Redis commands of a tier with its instances up and no traffic for `seconds`. */
export async function idleCost(tier: Tier, seconds: number, signal: AbortSignal): Promise<IdleCost> {
  const before = await tier.redis.snapshot();
  const started = performance.now();
  await sleep(seconds * 1000, signal);
  const after = await tier.redis.snapshot();
  const wallS = (performance.now() - started) / 1000;
  const usage = usageBetween(before, after);
  return {
    seconds: Math.round(wallS * 10) / 10,
    instances: tier.targets.length,
    usage,
    perIsolateHour: Math.round((usage.total / tier.targets.length / wallS) * 3600),
  };
}

export interface Ceiling {
  path: string;
  seconds: number;
  connections: number;
  /** wrk, closed loop, zipf.lua, on one cached page. */
  closed: Phase;
  /** The paced mode asked for far more than it can send: its own maximum. */
  paced: Phase;
}

/** What the generator can measure at all: one page Nginx has cached, closed loop then paced at an unreachable rate. */
export async function generatorCeiling(ctx: Context, nginx: System, d: Durations): Promise<Ceiling> {
  const path = "/products/p-000002"; // cached by the start-up check (systems.ts samePage)
  const paths = ctx.workload.single(path);
  ctx.phase("generator ceiling: wrk on one page nginx has cached, closed loop", d.ceilingS * 1000);
  const closed = await wrkPhase({ targets: nginx.targets, connections: ctx.settings.connections, seconds: d.ceilingS, paths, seed: 1, signal: ctx.signal });
  ctx.phase("generator ceiling: the paced mode asked for 1,000,000 req/s", d.ceilingS * 1000);
  const paced = await wrkPhase({
    targets: nginx.targets,
    connections: ctx.settings.pacedConnections,
    seconds: d.ceilingS,
    rate: 1_000_000,
    paths,
    seed: 1,
    signal: ctx.signal,
  });
  return { path, seconds: d.ceilingS, connections: ctx.settings.connections, closed, paced };
}
