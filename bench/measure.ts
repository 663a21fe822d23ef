// What every scenario measures around its phases, and how a scenario's
// result is put together: shared by scenarios.ts (the first six scenarios)
// and steady.ts (steady state, faults, shards, hot product).
import { Tally } from "./load";
import type { Context, Scenario, ScenarioResult } from "./scenario";
import { buildKnownIdsFilter, cpuSnapshot, type CpuRole, type CpuSnapshot, type Servers, type WorkerInstance } from "./stack";

export interface MeterOptions {
  /** Where Redis command counts come from (default: the servers' redis); a scenario whose redis goes down supplies its own. */
  redisCalls?: () => Promise<Record<string, number>>;
  /** Other servers processes whose CPU counts as origin + gateway and redis (the shards'). */
  moreServerPids?: readonly number[];
}

/**
 * What happens around the measured phases, summed over them: origin requests
 * per service, Redis commands, CPU by role, and the L2 circuit breaker of
 * each instance, polled on /healthz (it can open and close again within a
 * phase, which its state at the end would not show).
 */
export class Meter {
  readonly origin: Record<string, number> = {};
  readonly redis: Record<string, number> = {};
  readonly cpuSeconds: Record<string, number> = {};
  readonly breaker: Record<string, number> = {};
  private measuredMs = 0;

  constructor(
    private readonly servers: Servers,
    private readonly workers: WorkerInstance[],
    private readonly options: MeterOptions = {},
  ) {}

  async around<T>(work: () => Promise<T>): Promise<T> {
    const redisCalls = this.options.redisCalls ?? (() => this.servers.redisCalls());
    const [origin0, redis0] = await Promise.all([this.servers.counters(), redisCalls()]);
    const cpu0 = cpuSnapshot(this.servers.pid, this.options.moreServerPids);
    const stopPolling = this.pollBreakers();
    let result: T;
    let cpu1: CpuSnapshot;
    try {
      result = await work();
    } finally {
      // Before waiting for the poller: its last sleep is not part of the measurement.
      cpu1 = cpuSnapshot(this.servers.pid, this.options.moreServerPids);
      await stopPolling();
    }
    const [origin1, redis1] = await Promise.all([this.servers.counters(), redisCalls()]);
    addDelta(this.origin, origin0.services, origin1.services);
    addDelta(this.redis, redis0, redis1);
    for (const role of Object.keys(cpu1.seconds) as CpuRole[]) {
      this.cpuSeconds[role] = (this.cpuSeconds[role] ?? 0) + cpu1.seconds[role] - cpu0.seconds[role];
    }
    this.measuredMs += cpu1.at - cpu0.at;
    return result;
  }

  /** Cores busy per role over the measured phases. */
  cores(): Record<string, number> {
    const seconds = this.measuredMs / 1000;
    return Object.fromEntries(Object.entries(this.cpuSeconds).map(([role, cpu]) => [role, seconds > 0 ? round(Math.max(0, cpu) / seconds, 2) : 0]));
  }

  private pollBreakers(): () => Promise<void> {
    let stopped = false;
    const loop = (async () => {
      while (!stopped) {
        for (const state of await breakerStates(this.workers)) this.breaker[state] = (this.breaker[state] ?? 0) + 1;
        await sleep(BREAKER_POLL_MS);
      }
    })();
    return async () => {
      stopped = true;
      await loop;
    };
  }
}

const BREAKER_POLL_MS = 250;

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function addDelta(sum: Record<string, number>, before: Record<string, number>, after: Record<string, number>): void {
  for (const [key, value] of Object.entries(after)) {
    const delta = value - (before[key] ?? 0);
    if (delta !== 0 || key in sum) sum[key] = (sum[key] ?? 0) + delta;
  }
}

/** Every scenario starts from an empty L2 (but for the known-ids filter) and zeroed counters. */
export async function reset(ctx: Context): Promise<void> {
  ctx.phase("reset");
  l2Emptied();
  if (filterLost) {
    ctx.phase("rebuild the known-ids filter (redis-server was restarted empty)");
    const filter = await buildKnownIdsFilter(ctx.servers);
    if (!filter.built) throw new Error(`the known-ids filter could not be rebuilt after a redis restart: ${filter.detail}`);
    filterLost = false;
  }
  await ctx.servers.resetL2();
  await ctx.servers.resetCounters();
  await ctx.servers.resetRedisStats();
}

/** redis-server was restarted empty (redis-down): the known-ids filter built at the start of the run is gone. */
let filterLost = false;

/** Says that the known-ids filter is gone from L2: the next reset rebuilds it, as run.ts did at the start. */
export function knownIdsFilterLost(): void {
  filterLost = true;
}

/** Listeners told when L2 is emptied (steady.ts keeps track of what it warmed). */
const emptiedListeners: Array<() => void> = [];

export function onL2Emptied(listener: () => void): void {
  emptiedListeners.push(listener);
}

export function l2Emptied(): void {
  for (const listener of emptiedListeners) listener();
}

/** /healthz of each instance: the L2 breaker's state as one word ("closed", "open", "half-open", "partial", "off"). */
async function breakerStates(workers: WorkerInstance[]): Promise<string[]> {
  return (await healthOf(workers)).map((health) => health.l2);
}

export interface Health {
  l2: string;
  /** With several L2 shards: each one's breaker. */
  l2Shards?: Array<{ name: string; state: string }>;
}

export async function healthOf(workers: WorkerInstance[]): Promise<Health[]> {
  return Promise.all(
    workers.map(async (worker) => {
      try {
        const response = await fetch(`${worker.url}/healthz`, { signal: AbortSignal.timeout(2000) });
        const body = (await response.json()) as { l2?: string; l2Shards?: Health["l2Shards"] };
        return { l2: body.l2 ?? "?", ...(body.l2Shards ? { l2Shards: body.l2Shards } : {}) };
      } catch {
        return { l2: "unreachable" };
      }
    }),
  );
}

/** The worker's L2 round trips: one call each, whatever a script does inside (INFO counts those commands too). */
export const L2_COMMANDS = ["mget", "evalsha", "eval"];

export function l2Calls(redis: Record<string, number>): number {
  return L2_COMMANDS.reduce((sum, name) => sum + (redis[name] ?? 0), 0);
}

export interface Outcome {
  concurrency: string;
  tally: Tally;
  meter: Meter;
  workers: WorkerInstance[];
  unloaded?: Tally;
  extra?: Record<string, unknown>;
  notes?: string[];
}

export async function result(scenario: Pick<Scenario, "name" | "description">, outcome: Outcome): Promise<ScenarioResult> {
  const { tally, meter } = outcome;
  const load = tally.summary();
  const unloaded = outcome.unloaded?.summary();
  return {
    name: scenario.name,
    description: scenario.description,
    concurrency: outcome.concurrency,
    load,
    unloaded: unloaded ? { requests: unloaded.requests, rps: unloaded.rps, p50: unloaded.latencyMs.p50, p99: unloaded.latencyMs.p99, productTier: unloaded.productTier } : null,
    origin: pick(meter.origin, ["product", "inventory", "reviews", "recommendations"]),
    redis: meter.redis,
    l2CallsPerRequest: load.requests ? round(l2Calls(meter.redis) / load.requests, 3) : null,
    l2Breaker: await breakerStates(outcome.workers),
    l2BreakerPolls: { ...meter.breaker },
    cores: meter.cores(),
    extra: outcome.extra ?? {},
    notes: outcome.notes ?? [],
  };
}

export function pick(source: Record<string, number>, keys: string[]): Record<string, number> {
  return Object.fromEntries(keys.map((key) => [key, source[key] ?? 0]));
}

export function round(value: number, digits: number): number {
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}

/** Seeds of the Zipf draws and of the rank → id shuffle: every Zipf scenario sends the same ids in the same order. */
export const ZIPF_SEED = 20_260_426;
export const SHUFFLE_SEED = 42;

/** Background writes (ctx.waitUntil) finish shortly after the last answer: give them this long. */
export const SETTLE_MS = 1000;

/** A phase's length: `full` seconds, or `quick` with --quick; in ms. */
export function seconds(ctx: Context, full: number, quick: number): number {
  return (ctx.settings.quick ? quick : full) * 1000;
}

/** Resets, starts `count` fresh instances and a Meter watching them. */
export async function setUp(ctx: Context, count: number): Promise<{ workers: WorkerInstance[]; meter: Meter }> {
  await reset(ctx);
  const workers = await ctx.startWorkers(count);
  return { workers, meter: new Meter(ctx.servers, workers) };
}
