// The scenarios of a warm tier, and of its faults:
//
//   zipf-steady   L2 warmed for the catalog, L1 warmed by a short Zipf phase,
//                 then Zipf(1.0) measured: the steady state the targets speak of
//   redis-hang    the same, with redis-server frozen (SIGSTOP) for a window mid-run
//   origin-down   the same, with every origin service refusing connections for a window
//   redis-down    the same, with redis-server killed (SIGKILL) mid-run, restarted after
//   shards        3 redis-server + gateway pairs on the ring, one killed mid-run
//   hot-product   one product at 20 requests a second for longer than its
//                 inventory ttl, among Zipf noise: never stale, never waiting
//
// Fault scenarios measure one run in phases (before, during, after) and are
// compared in the report with `zipf-steady` of the same invocation.
import { productId } from "../dev/origin/catalog";
import { createRing, type Ring } from "../src/cache/ring";
import { parseConfig, type Config, type Env } from "../src/config";
import { isStale, parseCacheStatus, runLoad, Tally, type Outcome as Answer, type ProductTier } from "./load";
import { healthOf, knownIdsFilterLost, l2Calls, L2_COMMANDS, l2Emptied, Meter, onL2Emptied, pick, reset, result, round, seconds, setUp, SHUFFLE_SEED, ZIPF_SEED } from "./measure";
import type { Context, Scenario } from "./scenario";
import { cpuSnapshot, startShards, type CpuSnapshot, type Servers, type WorkerInstance } from "./stack";
import { warmL2, type WarmL2Result } from "./warm";
import { shuffledIndexes, ZipfSampler } from "./zipf";

/** Instances of the steady scenarios: two isolates sharing L2, as in a location. */
const INSTANCES = 2;

/**
 * Connections of the steady, fault and shards scenarios: a quarter of
 * --connections (8 by default, 4 per instance). These scenarios measure what
 * a cache does for a tier that keeps up with its traffic; at 16 requests in
 * flight per isolate, an L2 answer already in waits behind the others' work
 * past the 75 ms L2 budget, the breaker opens and the pages go to the origin:
 * that is the saturation `l2-hit` and `zipf` show, not the steady state.
 */
function steadyConnections(ctx: Context): number {
  return Math.max(INSTANCES, Math.round(ctx.settings.connections / 4));
}

const SERVICES = ["product", "inventory", "reviews", "recommendations"];

// ---------------------------------------------------------------- Zipf

/**
 * The Zipf(1.0) stream of a scenario: the same rank → id shuffle as `zipf`
 * (the same hot products), and draws seeded by the scenario's name, so that a
 * scenario reusing the L2 of the one before does not replay its sequence
 * (whose every product that one has just filled).
 */
function zipfStream(n: number, scenario = ""): { next: () => string; idOfRank: (rank: number) => string } {
  let seed = ZIPF_SEED;
  for (const char of scenario) seed = (Math.imul(seed, 31) + char.charCodeAt(0)) >>> 0;
  const sampler = new ZipfSampler({ n, s: 1.0, seed });
  const indexes = shuffledIndexes(n, SHUFFLE_SEED);
  const idOfRank = (rank: number) => productId(indexes[rank - 1]!);
  return { next: () => `/products/${idOfRank(sampler.next())}`, idOfRank };
}

/** The ids of Zipf ranks 1..count, most popular first. */
function topIds(n: number, count: number): string[] {
  const { idOfRank } = zipfStream(n);
  return Array.from({ length: Math.min(n, count) }, (_, i) => idOfRank(i + 1));
}

function idOfPath(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1).split("?")[0]!;
}

// ---------------------------------------------------------------- warm L2

/** The worker's configuration for these bindings, as parsed by the tier (policies, jitter, prefix, shards). */
function workerConfig(ctx: Context, bindings: Record<string, string> = {}): Config {
  return parseConfig({ ...ctx.servers.bindings, ...ctx.settings.vars, ...bindings } as Env);
}

/** Products warmed in L2 before a steady scenario: the whole catalog, or a part of it with --quick. */
function steadyProducts(ctx: Context): number {
  return ctx.settings.quick ? Math.min(ctx.settings.catalogSize, 5_000) : ctx.settings.catalogSize;
}

/**
 * What the last steady scenario left in L2. The next steady scenario of the
 * run reuses it, rewriting only inventory (fresh for 10 s, usable without
 * the origin for 40 s) instead of the whole catalog: the state is the same
 * but for product, reviews and recommendations entries a minute or two
 * older, still fresh (ttl ≥ 270 s). Anything that empties L2 forgets it.
 */
let steadyL2: { warmedAt: number; products: number } | null = null;
onL2Emptied(() => (steadyL2 = null));

/** Reuse a warm L2 at most this long after it was written: its product entries (ttl 300 s ± 10%) must stay fresh through the scenario. */
const STEADY_REUSE_MS = 150_000;

interface WarmReport extends WarmL2Result {
  /** "whole" (every resource written) or "inventory" (the previous steady scenario's L2, inventory rewritten). */
  pass: "whole" | "inventory";
}

/** Gets L2 into the steady state: warmed for the top `products` Zipf ranks, inventory written last (so youngest). */
async function prepareSteadyL2(ctx: Context, products: number): Promise<WarmReport> {
  const config = workerConfig(ctx);
  const ids = topIds(ctx.settings.catalogSize, products);
  const common = { config, redisPorts: [ctx.servers.redisPort], ids, catalogSize: ctx.settings.catalogSize, originUrl: ctx.servers.originUrl, signal: ctx.signal };
  if (steadyL2 && steadyL2.products >= products && Date.now() - steadyL2.warmedAt < STEADY_REUSE_MS) {
    ctx.phase(`L2 still warm from the previous scenario: rewrite the inventory of ${products.toLocaleString("en-US")} products`);
    await ctx.servers.resetCounters();
    await ctx.servers.resetRedisStats();
    return { pass: "inventory", ...(await warmL2({ ...common, passes: [["inventory"]] })) };
  }
  await reset(ctx);
  ctx.phase(`warm L2: ${products.toLocaleString("en-US")} products (the top Zipf ranks), written into redis-server`);
  const warmed = await warmL2({ ...common, passes: [["product", "reviews", "recommendations"], ["inventory"]] });
  steadyL2 = { warmedAt: Date.now(), products };
  return { pass: "whole", ...warmed };
}

function warmSummary(warm: WarmReport): Record<string, unknown> {
  return {
    products: warm.products,
    entries: warm.entries,
    megabytes: round(warm.bytes / 1e6, 1),
    seconds: warm.seconds,
    pass: warm.pass,
    method: "entries built by the tier's code (entry deadlines, codec, keys) from the demo catalog, written with pipelined SETs; inventory last",
    validation: warm.validation,
  };
}

/** A short Zipf phase, discarded: each isolate's L1 holds the hot products before the measurement. */
async function warmL1(ctx: Context, targets: string[], next: () => string, ms: number): Promise<Record<string, unknown>> {
  ctx.phase(`warm L1: Zipf on ${targets.length} instances`, ms);
  const tally = await runLoad({ targets, connections: steadyConnections(ctx), next, durationMs: ms, signal: ctx.signal, live: ctx.live });
  const summary = tally.summary();
  return { seconds: ms / 1000, requests: summary.requests, noOriginShare: summary.noOriginShare === null ? null : round(summary.noOriginShare, 4), errors: summary.errors };
}

// ---------------------------------------------------------------- zipf-steady

const zipfSteadyScenario: Scenario = {
  name: "zipf-steady",
  description: `Zipf(s=1.0) over the catalog on ${INSTANCES} instances, L2 warmed for the whole catalog beforehand and L1 by a short Zipf phase: the steady state`,
  async run(ctx) {
    const n = ctx.settings.catalogSize;
    const warm = await prepareSteadyL2(ctx, steadyProducts(ctx));
    const workers = await ctx.startWorkers(INSTANCES);
    const targets = workers.map((worker) => worker.url);
    const stream = zipfStream(n, this.name);
    const l1WarmUp = await warmL1(ctx, targets, stream.next, seconds(ctx, 8, 1.5));
    const meter = new Meter(ctx.servers, workers);
    const measureMs = seconds(ctx, 15, 2.5);
    ctx.phase("measure", measureMs);
    const connections = steadyConnections(ctx);
    const tally = await meter.around(() => runLoad({ targets, connections, next: stream.next, durationMs: measureMs, signal: ctx.signal, live: ctx.live }));
    const load = tally.summary();
    const extra = {
      s: 1.0,
      products: n,
      instances: INSTANCES,
      warm: warmSummary(warm),
      l1WarmUp,
      measuredS: measureMs / 1000,
      resourceTiers: load.resourceTiers,
      l2CallsPerPage: load.pages ? round(l2Calls(meter.redis) / load.pages, 3) : null,
      redisCommandsPerPage: perPage(meter.redis, load.pages),
    };
    const notes = [
      "L2 calls per page: MGET + EVALSHA + EVAL reaching redis-server (INFO commandstats deltas over the measured phase), i.e. the worker's round trips to the gateway; commands run inside a script count once, as its EVALSHA. Background work counts: refreshes of stale entries (a lock claim and a write each), purge-log reads (one a second per isolate), hot-product reports",
      "inventory is fresh for 10 s and usable without the origin for 40 s: during the measurement it goes stale and is served at once while one background refresh per key runs (an origin fetch, counted in origin inventory, not waited for)",
    ];
    return result(this, { concurrency: `${connections} connections, ${INSTANCES} instances`, tally, meter, workers, extra, notes });
  },
};

/** The worker's round trips per page, by command (not the commands scripts run inside, which INFO also counts). */
function perPage(calls: Record<string, number>, pages: number): Record<string, number> {
  if (!pages) return {};
  return Object.fromEntries(L2_COMMANDS.map((name) => [name, round((calls[name] ?? 0) / pages, 3)]));
}

// ---------------------------------------------------------------- phases

interface Phase {
  name: string;
  startedAt: number;
  endedAt?: number;
  tally: Tally;
  originStart?: Record<string, number>;
  originEnd?: Record<string, number>;
  cpuStart?: CpuSnapshot;
  cpuEnd?: CpuSnapshot;
  /** The first few 5xx answers: which product, and what Cache-Status said. */
  failures: FailedAnswer[];
}

interface FailedAnswer {
  /** ms since the phase began (by the request's start). */
  atMs: number;
  path: string;
  status: number | string;
  cacheStatus: string;
}

const FAILURE_SAMPLES = 5;

interface PhaseSummary {
  name: string;
  seconds: number;
  requests: number;
  rps: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  errors: number;
  errorRate: number;
  /** Answers with a 5xx status. */
  http5xx: number;
  statuses: Record<string, number>;
  pages: number;
  noOriginShare: number | null;
  productTier: Record<ProductTier, number>;
  /** Requests each origin service received during the phase. */
  origin: Record<string, number>;
  originPerPage: number | null;
  originFailures: Record<string, number>;
  errorBodies: string[];
  /** Cores busy during the phase: all workerd instances, and processes that are not the benchmark's (a neighbour on a shared machine). */
  cores: { workerd: number; others: number };
  failureSamples: FailedAnswer[];
}

/**
 * One measured run cut into phases (before / during / after a fault): each
 * answer goes to the phase in which its request was sent, and the origin's
 * counters are read at each boundary.
 */
class Timeline {
  readonly all = new Tally();
  readonly phases: Phase[] = [];

  constructor(
    private readonly servers: Servers,
    private readonly moreServerPids: readonly number[] = [],
  ) {}

  /** Starts a phase now; the previous one ends. */
  async mark(name: string): Promise<void> {
    const at = performance.now();
    const cpu = cpuSnapshot(this.servers.pid, this.moreServerPids);
    const previous = this.phases.at(-1);
    const phase: Phase = { name, startedAt: at, tally: new Tally(), cpuStart: cpu, failures: [] };
    this.phases.push(phase);
    if (previous) {
      previous.endedAt = at;
      previous.cpuEnd = cpu;
    }
    const counters = (await this.servers.counters()).services;
    if (previous) previous.originEnd = counters;
    phase.originStart = counters;
  }

  async end(): Promise<void> {
    const last = this.phases.at(-1);
    if (!last) return;
    last.endedAt = performance.now();
    last.cpuEnd = cpuSnapshot(this.servers.pid, this.moreServerPids);
    last.originEnd = (await this.servers.counters()).services;
  }

  /** The phase a request sent at `at` belongs to. */
  phaseAt(at: number): Phase | undefined {
    let found = this.phases[0];
    for (const phase of this.phases) if (phase.startedAt <= at) found = phase;
    return found;
  }

  readonly onResponse = (path: string, answer: Answer, micros: number): void => {
    const sentAt = performance.now() - micros / 1000;
    const phase = this.phaseAt(sentAt);
    if (!phase) return;
    phase.tally.record(answer, micros);
    const status = answer.status ?? answer.error ?? "?";
    if ((answer.error !== undefined || (answer.status ?? 0) >= 500) && phase.failures.length < FAILURE_SAMPLES) {
      phase.failures.push({ atMs: Math.round(sentAt - phase.startedAt), path, status, cacheStatus: answer.cacheStatus ?? "" });
    }
  };

  summaries(): PhaseSummary[] {
    return this.phases.map((phase) => summarize(phase.name, [phase]));
  }

  /** One summary for the phases whose names pass `which` (a fault's sub-phases: its whole window). */
  merged(name: string, which: (phase: string) => boolean): PhaseSummary | null {
    const chosen = this.phases.filter((phase) => which(phase.name));
    return chosen.length ? summarize(name, chosen) : null;
  }
}

function summarize(name: string, phases: Phase[]): PhaseSummary {
  const tally = new Tally();
  const origin: Record<string, number> = Object.fromEntries(SERVICES.map((service) => [service, 0]));
  const cpu = { workerd: 0, others: 0, seconds: 0 };
  for (const phase of phases) {
    phase.tally.elapsedMs = (phase.endedAt ?? performance.now()) - phase.startedAt;
    tally.add(phase.tally);
    for (const service of SERVICES) origin[service]! += (phase.originEnd?.[service] ?? 0) - (phase.originStart?.[service] ?? 0);
    if (phase.cpuStart && phase.cpuEnd) {
      cpu.workerd += phase.cpuEnd.seconds.workerd - phase.cpuStart.seconds.workerd;
      cpu.others += phase.cpuEnd.seconds["other processes"] - phase.cpuStart.seconds["other processes"];
      cpu.seconds += (phase.cpuEnd.at - phase.cpuStart.at) / 1000;
    }
  }
  const s = tally.summary();
  const originTotal = Object.values(origin).reduce((a, b) => a + b, 0);
  return {
    name,
    seconds: s.seconds,
    requests: s.requests,
    rps: s.rps,
    p50: s.latencyMs.p50,
    p90: s.latencyMs.p90,
    p99: s.latencyMs.p99,
    max: s.latencyMs.max,
    errors: s.errors,
    errorRate: round(s.errorRate, 5),
    http5xx: Object.entries(s.statuses).filter(([status]) => status.startsWith("5")).reduce((sum, [, count]) => sum + count, 0),
    statuses: s.statuses,
    pages: s.pages,
    noOriginShare: s.noOriginShare === null ? null : round(s.noOriginShare, 4),
    productTier: s.productTier,
    origin,
    originPerPage: s.pages ? round(originTotal / s.pages, 4) : null,
    originFailures: s.originFailures,
    errorBodies: s.errorBodies,
    cores: {
      workerd: cpu.seconds > 0 ? round(Math.max(0, cpu.workerd) / cpu.seconds, 2) : 0,
      others: cpu.seconds > 0 ? round(Math.max(0, cpu.others) / cpu.seconds, 2) : 0,
    },
    failureSamples: phases.flatMap((phase) => phase.failures).slice(0, FAILURE_SAMPLES),
  };
}

/** Sleeps, or returns early when the run is interrupted. */
function wait(ms: number, signal: AbortSignal): Promise<void> {
  if (ms <= 0 || signal.aborted) return Promise.resolve();
  return new Promise((done) => {
    const timer = setTimeout(finish, ms);
    function finish() {
      clearTimeout(timer);
      signal.removeEventListener("abort", finish);
      done();
    }
    signal.addEventListener("abort", finish, { once: true });
  });
}

/**
 * Polls /healthz every 100 ms until `isOpen` holds for every instance (each
 * seen at least once), or `untilMs` passes; returns, per instance, how long
 * after `since` it was first seen open (null: never).
 */
async function watchBreakers(workers: WorkerInstance[], isOpen: (health: Awaited<ReturnType<typeof healthOf>>[number]) => boolean, since: number, untilMs: number, signal: AbortSignal): Promise<Array<number | null>> {
  const openedAfter: Array<number | null> = workers.map(() => null);
  while (performance.now() - since < untilMs && !signal.aborted) {
    const healths = await healthOf(workers);
    healths.forEach((health, i) => {
      if (openedAfter[i] === null && isOpen(health)) openedAfter[i] = Math.round(performance.now() - since);
    });
    if (openedAfter.every((at) => at !== null)) break;
    await wait(100, signal);
  }
  return openedAfter;
}

// ---------------------------------------------------------------- faults

interface Fault {
  name: string;
  description: string;
  /** Names the fault's phase ("redis-server frozen"). */
  during: string;
  /** Redis cannot be asked for its statistics during the fault. */
  breaksRedis: boolean;
  /** The L2 breaker should open: its opening splits the fault phase in two. */
  opensL2Breaker: boolean;
  start(ctx: Context): Promise<void>;
  /** Ends the fault (null: it lasts until the end of the measured run). */
  stop: ((ctx: Context) => Promise<void>) | null;
  /** Puts things back after the run, whatever happened (idempotent); says what it did. */
  restore(ctx: Context): Promise<Record<string, unknown>>;
}

/** Lengths of the fault scenarios' parts: L1 warm-up, before, during, after (s). */
function faultDurations(ctx: Context, lastsToEnd: boolean) {
  return {
    warmL1Ms: seconds(ctx, 5, 1),
    beforeMs: seconds(ctx, 3, 1),
    faultMs: lastsToEnd ? seconds(ctx, 10, 3) : seconds(ctx, 8, 2.5),
    afterMs: lastsToEnd ? 0 : seconds(ctx, 5, 1),
  };
}

function faultScenario(fault: Fault): Scenario {
  return {
    name: fault.name,
    description: fault.description,
    async run(ctx) {
      const n = ctx.settings.catalogSize;
      const { warmL1Ms, beforeMs, faultMs, afterMs } = faultDurations(ctx, fault.stop === null);
      const warm = await prepareSteadyL2(ctx, steadyProducts(ctx));
      const workers = await ctx.startWorkers(INSTANCES);
      const targets = workers.map((worker) => worker.url);
      const stream = zipfStream(n, fault.name);
      const l1WarmUp = await warmL1(ctx, targets, stream.next, warmL1Ms);

      // While redis is frozen or dead, the harness cannot read its statistics: the last reading stands.
      let redisReadable = true;
      let lastRedis: Record<string, number> = {};
      const readRedis = async () => (redisReadable ? (lastRedis = await ctx.servers.redisCalls()) : lastRedis);
      const meter = new Meter(ctx.servers, workers, { redisCalls: readRedis });
      const timeline = new Timeline(ctx.servers);
      const connections = steadyConnections(ctx);
      let breakerOpenedAfterMs: Array<number | null> = [];
      let faultStartedAt = 0;
      let restored: Record<string, unknown> = {};
      try {
        await meter.around(async () => {
          await timeline.mark("before");
          ctx.phase("before the fault", beforeMs);
          const load = runLoad(
            { targets, connections, next: stream.next, durationMs: beforeMs + faultMs + afterMs, signal: ctx.signal, live: ctx.live, onResponse: timeline.onResponse },
            timeline.all,
          );
          const control = (async () => {
            await wait(beforeMs, ctx.signal);
            if (ctx.signal.aborted) return;
            if (fault.breaksRedis) {
              await readRedis();
              redisReadable = false;
            }
            // The phase starts as the fault is applied (a kill returns once the process is gone).
            faultStartedAt = performance.now();
            await timeline.mark(fault.during);
            await fault.start(ctx);
            ctx.phase(fault.during, faultMs);
            if (fault.opensL2Breaker) {
              breakerOpenedAfterMs = await watchBreakers(workers, (health) => health.l2 === "open" || health.l2 === "half-open", faultStartedAt, faultMs, ctx.signal);
              if (breakerOpenedAfterMs.every((at) => at !== null)) await timeline.mark(`${fault.during}, L2 breaker open`);
            }
            await wait(faultMs - (performance.now() - faultStartedAt), ctx.signal);
            if (fault.stop && !ctx.signal.aborted) {
              await fault.stop(ctx);
              redisReadable = true;
              await timeline.mark("after");
              ctx.phase("after the fault", afterMs);
            }
          })();
          await Promise.all([load, control]);
          await timeline.end();
          return timeline.all;
        });
      } finally {
        ctx.phase("put things back");
        restored = await fault.restore(ctx);
      }
      const phases = timeline.summaries();
      const faultWindow = timeline.merged(`${fault.during} (whole window)`, (name) => name.startsWith(fault.during));
      const res = await result(this, { concurrency: `${connections} connections, ${INSTANCES} instances`, tally: timeline.all, meter, workers });
      const before = phases[0];
      if (fault.breaksRedis && fault.stop === null && before) {
        // Redis' counts died with it: only the phase before the fault has them.
        res.l2CallsPerRequest = before.requests ? round(l2Calls(meter.redis) / before.requests, 3) : null;
        res.notes.push("L2 calls/req and redis calls: the phase before the kill only (redis-server's statistics die with it)");
      }
      res.extra = {
        warm: warmSummary(warm),
        l1WarmUp,
        durationsS: { before: beforeMs / 1000, fault: faultMs / 1000, after: afterMs / 1000 },
        ...(fault.opensL2Breaker ? { breakerOpenedAfterMs } : {}),
        phases,
        faultWindow,
        restored,
      };
      res.notes.push(
        "phases: each answer counts in the phase its request was sent in; origin: requests each service received in the phase (read from the demo origin's counters at each boundary)",
      );
      return res;
    },
  };
}

const redisHang = faultScenario({
  name: "redis-hang",
  description: "zipf-steady's state and load; mid-run redis-server is frozen (SIGSTOP) for a window, then thawed (SIGCONT): L2 calls time out, the breaker opens",
  during: "redis-server frozen",
  breaksRedis: true,
  opensL2Breaker: true,
  start: (ctx) => ctx.servers.redisControl("pause"),
  stop: (ctx) => ctx.servers.redisControl("resume"),
  restore: async (ctx) => {
    await ctx.servers.redisControl("resume");
    return { redis: "resumed" };
  },
});

const redisDown = faultScenario({
  name: "redis-down",
  description: "zipf-steady's state and load; mid-run redis-server is killed (SIGKILL) and stays down to the end (the gateway answers 503); restarted empty afterwards",
  during: "redis-server killed",
  breaksRedis: true,
  opensL2Breaker: true,
  start: (ctx) => ctx.servers.redisControl("kill"),
  stop: null,
  restore: async (ctx) => {
    // An empty redis on the same port; the next scenario's reset rebuilds the known-ids filter, so that it runs as it would alone.
    await ctx.servers.redisControl("restart");
    l2Emptied();
    knownIdsFilterLost();
    return { redis: "restarted, empty", knownIdsFilter: "rebuilt by the next scenario's reset, if any" };
  },
});

const originDown = faultScenario({
  name: "origin-down",
  description: "zipf-steady's state and load; mid-run every origin service refuses connections (down: refuse) for a window, then comes back",
  during: "origin refusing",
  breaksRedis: false,
  opensL2Breaker: false,
  start: (ctx) => ctx.servers.setOriginFault({ service: "all", down: "refuse" }),
  stop: (ctx) => ctx.servers.setOriginFault(null),
  restore: async (ctx) => {
    await ctx.servers.setOriginFault(null);
    return { origin: "faults cleared" };
  },
});

// ---------------------------------------------------------------- shards

const SHARD_COUNT = 3;
/** Index of the shard killed mid-run. */
const DEAD_SHARD = 1;

interface ShardPages {
  pages: number;
  errors: number;
  l1: number;
  l2: number;
  origin: number;
}

const shardsScenario: Scenario = {
  name: "shards",
  description: `${SHARD_COUNT} redis-server + gateway pairs on the consistent-hash ring (UPSTASH_REDIS_SHARDS), L2 warmed, Zipf on ${INSTANCES} instances; one shard killed mid-run`,
  async run(ctx) {
    const n = ctx.settings.catalogSize;
    await reset(ctx);
    ctx.phase(`start ${SHARD_COUNT} redis-server + gateway pairs`);
    const shardSet = await startShards(SHARD_COUNT, { catalogSize: n, latencyMs: ctx.settings.originLatencyMs, jitterMs: ctx.settings.originJitterMs });
    try {
      // The known-ids filter would live on the first shard, which the run does not build it in: off, rather than failing open all the time.
      const bindings = { ...shardSet.bindings, KNOWN_IDS: "off" };
      const config = workerConfig(ctx, bindings);
      const ring: Ring = createRing(config.l2!.shards);
      const products = ctx.settings.quick ? 2_000 : 20_000;
      ctx.phase(`warm L2: ${products.toLocaleString("en-US")} products (the top Zipf ranks) on ${SHARD_COUNT} shards`);
      const warm = await warmL2({
        config,
        redisPorts: shardSet.shards.map((shard) => shard.redisPort),
        ids: topIds(n, products),
        passes: [["product", "reviews", "recommendations"], ["inventory"]],
        catalogSize: n,
        originUrl: ctx.servers.originUrl,
        signal: ctx.signal,
      });
      const workers = await ctx.startWorkers(INSTANCES, bindings);
      const targets = workers.map((worker) => worker.url);
      const stream = zipfStream(n, this.name);
      const l1WarmUp = await warmL1(ctx, targets, stream.next, seconds(ctx, 5, 1));

      const alive = shardSet.shards.map(() => true);
      const lastCalls: Array<Record<string, number>> = shardSet.shards.map(() => ({}));
      const readRedis = async () => {
        const sum: Record<string, number> = {};
        for (const [i] of shardSet.shards.entries()) {
          if (alive[i]) lastCalls[i] = await shardSet.redisCalls(i);
          for (const [name, count] of Object.entries(lastCalls[i]!)) sum[name] = (sum[name] ?? 0) + count;
        }
        return sum;
      };
      await shardSet.resetRedisStats();
      const meter = new Meter(ctx.servers, workers, { redisCalls: readRedis, moreServerPids: [shardSet.pid] });
      const timeline = new Timeline(ctx.servers, [shardSet.pid]);
      const byShard = new Map<string, ShardPages[]>();
      const onResponse = (path: string, answer: Answer, micros: number) => {
        timeline.onResponse(path, answer, micros);
        const phase = timeline.phaseAt(performance.now() - micros / 1000);
        if (!phase) return;
        let shards = byShard.get(phase.name);
        if (!shards) byShard.set(phase.name, (shards = shardSet.shards.map(() => ({ pages: 0, errors: 0, l1: 0, l2: 0, origin: 0 }))));
        const counts = shards[ring.ownerOf(idOfPath(path))]!;
        counts.pages++;
        if (answer.error !== undefined || (answer.status ?? 0) >= 400) counts.errors++;
        const tier = answer.cacheStatus ? parseCacheStatus(answer.cacheStatus).find((member) => member.resource === "product")?.tier : undefined;
        if (tier === "l1" || tier === "l2" || tier === "origin") counts[tier]++;
      };
      const beforeMs = seconds(ctx, 5, 1);
      const afterMs = seconds(ctx, 8, 2.5);
      const dead = shardSet.shards[DEAD_SHARD]!.name;
      let openedAfterMs: Array<number | null> = [];
      const statePolls: Record<string, Record<string, number>> = {};
      const connections = steadyConnections(ctx);
      await meter.around(async () => {
        await timeline.mark("before");
        ctx.phase(`all ${SHARD_COUNT} shards up`, beforeMs);
        const load = runLoad({ targets, connections, next: stream.next, durationMs: beforeMs + afterMs, signal: ctx.signal, live: ctx.live, onResponse }, timeline.all);
        const control = (async () => {
          await wait(beforeMs, ctx.signal);
          if (ctx.signal.aborted) return;
          await readRedis();
          alive[DEAD_SHARD] = false;
          const killedAt = performance.now();
          await timeline.mark(`${dead} killed`);
          await shardSet.control(DEAD_SHARD, "kill");
          ctx.phase(`${dead} killed`, afterMs);
          const shardOpen = (health: Awaited<ReturnType<typeof healthOf>>[number]) => {
            const state = health.l2Shards?.find((shard) => shard.name === dead)?.state;
            return state === "open" || state === "half-open";
          };
          openedAfterMs = await watchBreakers(workers, shardOpen, killedAt, afterMs, ctx.signal);
          if (openedAfterMs.every((at) => at !== null)) await timeline.mark(`${dead} killed, its breaker open`);
          // Each shard's breaker, as /healthz says, until the end.
          while (performance.now() - killedAt < afterMs && !ctx.signal.aborted) {
            for (const health of await healthOf(workers)) {
              for (const shard of health.l2Shards ?? []) {
                const polls = (statePolls[shard.name] ??= {});
                polls[shard.state] = (polls[shard.state] ?? 0) + 1;
              }
            }
            await wait(250, ctx.signal);
          }
        })();
        await Promise.all([load, control]);
        await timeline.end();
      });
      const phases = timeline.summaries();
      const afterKill = timeline.merged(`${dead} killed (whole window)`, (name) => name.startsWith(`${dead} killed`));
      const finalStates = (await healthOf(workers)).map((health) => Object.fromEntries((health.l2Shards ?? []).map((shard) => [shard.name, shard.state])));
      // Share of the catalog's ids each shard owns on the ring.
      const owned = shardSet.shards.map(() => 0);
      for (let index = 1; index <= n; index++) owned[ring.ownerOf(productId(index))]!++;
      const res = await result(this, { concurrency: `${connections} connections, ${INSTANCES} instances`, tally: timeline.all, meter, workers });
      res.extra = {
        shards: shardSet.shards.map((shard, i) => ({ name: shard.name, idShare: round(owned[i]! / n, 4) })),
        killed: dead,
        warm: { products: warm.products, entries: warm.entries, seconds: warm.seconds },
        l1WarmUp,
        durationsS: { before: beforeMs / 1000, afterKill: afterMs / 1000 },
        breakerOpenedAfterMs: openedAfterMs,
        breakerPollsAfterKill: statePolls,
        breakerStatesAtEnd: finalStates,
        phases,
        afterKill,
        pagesByShard: Object.fromEntries([...byShard].map(([phase, shards]) => [phase, Object.fromEntries(shards.map((counts, i) => [shardSet.shards[i]!.name, counts]))])),
      };
      res.notes.push(
        "known-ids filter off for this scenario (KNOWN_IDS=off): it would live on the first shard, where this run does not build it",
        "pagesByShard: pages per phase by the shard that holds their product (src/cache/ring.ts), with the tier that served the product resource",
      );
      return res;
    } finally {
      await shardSet.close();
    }
  },
};

// ---------------------------------------------------------------- hot-product

/** The hot product: the Zipf rank-20,000 product, which the noise itself almost never asks for. */
const HOT_RANK = 20_000;
/** Each instance gets the hot product every 100 ms: 20 requests a second in all. */
const HOT_INTERVAL_MS = 100;
const NOISE_CONNECTIONS = 8;

interface HotAnswer {
  /** ms since the start. */
  at: number;
  instance: number;
  stale: boolean;
  forwarded: boolean;
  status: number;
  cacheStatus: string;
}

const hotProductScenario: Scenario = {
  name: "hot-product",
  description: `one product at ${(1000 / HOT_INTERVAL_MS) * INSTANCES} requests/s (${1000 / HOT_INTERVAL_MS}/s on each of ${INSTANCES} instances) for longer than its inventory ttl, among Zipf noise (${NOISE_CONNECTIONS} connections); cold start`,
  async run(ctx) {
    const n = ctx.settings.catalogSize;
    const { workers, meter } = await setUp(ctx, INSTANCES);
    const stream = zipfStream(n, this.name);
    const hotId = stream.idOfRank(Math.min(HOT_RANK, n));
    const hotPath = `/products/${hotId}`;
    // Longer than the inventory ttl (10 s ± 10%) plus a margin: three ttls in a full run, one and a bit with --quick.
    const durationMs = seconds(ctx, 30, 11.5);
    const answers: HotAnswer[] = [];
    const hot = new Tally();
    const noise = new Tally();
    const started = performance.now();
    ctx.phase(`${hotId} at ${(1000 / HOT_INTERVAL_MS) * INSTANCES}/s + Zipf noise`, durationMs);
    await meter.around(() =>
      Promise.all([
        // One paced stream per instance, so that each answer is known by the isolate that gave it.
        ...workers.map((worker, instance) =>
          runLoad(
            {
              targets: [worker.url],
              connections: 1,
              intervalMs: HOT_INTERVAL_MS,
              next: () => hotPath,
              durationMs,
              signal: ctx.signal,
              live: ctx.live,
              onResponse: (_path, answer) => {
                const members = parseCacheStatus(answer.cacheStatus ?? "");
                answers.push({
                  at: Math.round(performance.now() - started),
                  instance,
                  stale: members.some(isStale),
                  forwarded: members.some((member) => member.params.some((param) => param.startsWith("fwd="))),
                  status: answer.status ?? 0,
                  cacheStatus: answer.cacheStatus ?? answer.error ?? "",
                });
              },
            },
            hot,
          ),
        ),
        runLoad({ targets: workers.map((worker) => worker.url), connections: NOISE_CONNECTIONS, next: stream.next, durationMs, signal: ctx.signal, live: ctx.live }, noise),
      ]),
    );
    const all = new Tally();
    all.add(hot);
    all.add(noise);
    const originForHot = pick(await ctx.servers.originCountsOf(hotId), SERVICES);
    // Each instance's first answer may wait for the origin (or for the other isolate's fill): the target is about the others.
    const firsts = new Set(workers.map((_, instance) => answers.findIndex((answer) => answer.instance === instance)));
    const later = answers.filter((_, i) => !firsts.has(i));
    const staleLater = later.filter((answer) => answer.stale);
    const forwardedLater = later.filter((answer) => answer.forwarded);
    const hotSummary = hot.summary();
    const inventoryTtl = workerConfig(ctx).policies.inventory.ttl;
    const res = await result(this, { concurrency: `${(1000 / HOT_INTERVAL_MS) * INSTANCES}/s hot + ${NOISE_CONNECTIONS} connections Zipf, ${INSTANCES} instances`, tally: all, meter, workers });
    res.extra = {
      hotId,
      hotRank: HOT_RANK,
      seconds: durationMs / 1000,
      inventoryTtlS: inventoryTtl,
      hot: {
        answers: answers.length,
        p50: hotSummary.latencyMs.p50,
        p99: hotSummary.latencyMs.p99,
        max: hotSummary.latencyMs.max,
        errors: hotSummary.errors,
        staleAfterFirst: staleLater.length,
        forwardedAfterFirst: forwardedLater.length,
        firstAnswers: [...firsts].map((i) => answers[i]?.cacheStatus),
        // What the exceptions said, for diagnosis.
        samples: [...staleLater, ...forwardedLater].slice(0, 5).map((answer) => ({ atMs: answer.at, instance: answer.instance, cacheStatus: answer.cacheStatus })),
      },
      originFetchesForHot: originForHot,
      // One inventory fetch when it is first asked, then about one per ttl (refreshed ahead of expiry, once for both isolates).
      expectedInventoryFetches: 1 + Math.floor(durationMs / 1000 / inventoryTtl),
      noise: { requests: noise.requests, rps: noise.summary().rps },
    };
    res.notes.push(
      "the table's row counts every request (hot product and noise); the hot product's own figures are in the key figures and here",
      "stale: a Cache-Status member saying stale (detail \"… stale\" or \"stale-if-error\", or fwd=stale); forwarded: a member with fwd= (the answer waited for the origin, or for another fill)",
    );
    return res;
  },
};

/**
 * In this order in a full run: shards and hot-product first (they empty L2),
 * then zipf-steady warms it for the catalog and the fault scenarios reuse that
 * state (rewriting inventory only); redis-down last, as it leaves an empty
 * redis-server (a scenario after it would first rebuild the known-ids filter).
 */
export const STEADY_SCENARIOS: readonly Scenario[] = [shardsScenario, hotProductScenario, zipfSteadyScenario, redisHang, originDown, redisDown];
