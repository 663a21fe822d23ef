// The scenarios of `npm run bench:peers`, run in this order against each system
// (one system at a time, each with its own demo origin). Every throughput and
// latency figure comes from wrk (load.ts); the same seeded Zipf(1.0) draws in
// each phase for every system.
//
//   walk          (not measured) the top Zipf ranks asked for once each, so that
//                 every cache starts from the same warm state (Node fetch, 64 at a time)
//   warm-up       paced at the fixed rate (not compared)
//   fixed         paced at the fixed rate: latency at a constant offered load,
//                 and origin requests per page over identical requests
//   saturation    closed loop at 64 connections: req/s, latency, CPU per page,
//                 Redis commands per page
//   cached        the same saturation, Zipf over the walked ranks only: every
//                 page cached, what a hit costs
//   healthz       (the tier) /healthz, closed loop, same instances and
//                 connections: the floor of a worker request; then paced at
//                 the fixed load (healthz-fixed): the floor's latency
//   census        (the tiers) a short saturation with Redis MONITOR on: the
//                 commands the gateway sent vs those run inside scripts
//   herd          1,000 simultaneous requests for one product nobody asked for (bench/lib/probe.ts herd)
//   origin-slow   +500 ms on every origin service, paced
//   origin-down   every origin service refuses connections, paced (caches warm)
//   price-change  a hot product's price changes under paced load; time until
//                 every answer through the system shows the new price
//   redis-down    (the tier only) redis-server killed, paced
//
// tier-300s runs the walk, warm-up, fixed, saturation, cached and census only. Origin counters
// are reset before each scenario and read after it.
import { performance } from "node:perf_hooks";
import { herd, percentile } from "../lib/probe";
import { wrkPhase, type Phase, type Workload } from "../lib/wrk";
import { cpuBetween, cpuSample, findChildPid } from "../lib/cpu";
import { usageBetween, type Census, type RedisSnapshot, type RedisUsage } from "../lib/redis";
import { getPage, PRODUCT_POLICY, priceNow, type Settings, type System, type SystemName, type Tier } from "./systems";

export type ScenarioName =
  | "warm-up"
  | "fixed"
  | "saturation"
  | "cached"
  | "healthz"
  | "healthz-fixed"
  | "herd"
  | "origin-slow"
  | "origin-down"
  | "price-change"
  | "redis-down";

export const SCENARIO_LABELS: Record<ScenarioName, string> = {
  "warm-up": "warm-up",
  fixed: "fixed offered load",
  saturation: "saturation",
  cached: "saturation, cached set",
  healthz: "/healthz floor",
  "healthz-fixed": "/healthz floor, fixed offered load",
  herd: "cold herd ×1000",
  "origin-slow": "origin +500 ms",
  "origin-down": "origin down",
  "price-change": "price change",
  "redis-down": "Redis down",
};

/** Every phase has its own seed, so that every system gets the same draws in it. */
const SEEDS = { cached: 10, warmUp: 1, fixed: 2, saturation: 3, census: 4, slow: 5, recover: 6, down: 7, price: 8, redisDown: 9, calibrationProbe: 11 };

interface Staleness {
  id: string;
  oldPrice: string | null;
  newPrice: string;
  /** What was done right after the change (PURGE, POST /__purge, nothing). */
  purge: string;
  /** ms the purge call took. */
  purgeMs: number | null;
  /** Seconds from the committed change until every response (every target) showed the new price; null: not within capS. */
  seconds: number | null;
  capS: number;
  /** Poll answers (every 50 ms, per target) that still showed the old price after the change. */
  oldAnswers: number;
  polls: number;
  pollErrors: number;
  /** Seconds between the system's first Zipf request (rank 1 comes within the first few) and the change: its cache entry's age at most. */
  entryAgeS: number;
  /** True while the poll goes on after the measured load ended (Nginx: until expiry). */
  pending: boolean;
}

export interface Row {
  system: SystemName;
  scenario: ScenarioName;
  load: Phase;
  /** Requests the system's demo origin received during the scenario, per service. */
  origin: Record<string, number>;
  originTotal: number;
  /** CPU seconds per role during the phase (see procs.ts cpuSample), and its wall time. */
  cpu: { wallS: number; seconds: Record<string, number> };
  /** The tiers: Redis's own count during the phase. */
  redis?: RedisUsage;
  staleness?: Staleness;
  extra: Record<string, unknown>;
  notes: string[];
}

export interface Context {
  settings: Settings;
  signal: AbortSignal;
  workload: Workload;
  /** Requests a second of the paced phases. */
  rate: number;
  phase(label: string, ms?: number): void;
  note(text: string): void;
}

/** The phases, full and --quick, in seconds. */
export function durations(quick: boolean) {
  const q = <T>(full: T, quickValue: T) => (quick ? quickValue : full);
  return {
    /** The top Zipf ranks each asked for once, before anything is measured (71% of the draws go to the top 3,000). */
    walkRanks: q(3000, 500),
    /** The calibration's closed-loop probe, right after its walk. */
    probeS: q(5, 2),
    warmUpS: q(10, 3),
    fixedS: q(15, 5),
    saturationS: q(15, 5),
    cachedS: q(6, 3),
    healthzS: q(8, 3),
    censusS: q(4, 3),
    /** The calibration tier, idle with its two isolates up, for the Redis idle cost. */
    idleS: q(60, 10),
    ceilingS: q(4, 3),
    faultS: q(6, 4),
    /** Idle after a fault is cleared (longer than the origin breaker's 2-s cool-down), then paced load, not measured. */
    pauseS: 3,
    recoverS: 2,
    /** The paced load around the price change; the change comes after the lead. */
    priceLoadS: q(8, 5),
    priceLeadS: 1,
    /** Cap on the price poll: the product ttl + 30 s (full); quick runs stop after 20 s. */
    priceCapS: quick ? 20 : PRODUCT_POLICY.ttlS + 30,
  };
}
export type Durations = ReturnType<typeof durations>;

const HERD_REQUESTS = 1000;
const POLL_MS = 50;
/** Every target must show the new price this long before the change counts as complete. */
const CONFIRM_MS = 1000;
const SETTLE_MS = 1000;
/** $123.45: no demo-origin price ends in 45 (they all end in 99). */
const NEW_PRICE_MINOR = 12_345;
const SERVICES = ["product", "inventory", "reviews", "recommendations"];

// ---------------------------------------------------------------- measuring

interface Measured<T> {
  value: T;
  origin: Record<string, number>;
  originTotal: number;
  cpu: Row["cpu"];
  redis?: RedisUsage;
}

/** Resets the origin's counters, runs `work`, waits `settleMs` (background fills), reads the counters; CPU and Redis around `work`. */
async function measure<T>(system: System, work: () => Promise<T>, settleMs = 0): Promise<Measured<T>> {
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
  const origin = Object.fromEntries(SERVICES.map((s) => [s, counters.services[s] ?? 0]));
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
    originTotal: SERVICES.reduce((sum, s) => sum + (counters.services[s] ?? 0), 0),
    cpu,
    ...(r0 && r1 ? { redis: usageBetween(r0, r1) } : {}),
  };
}

function row(system: System, scenario: ScenarioName, m: Measured<Phase>, extra: Record<string, unknown> = {}, notes: string[] = []): Row {
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

function isTier(system: System): system is Tier {
  return system.name === "tier" || system.name === "tier-300s";
}

/** The herd's answers in the shape of a wrk phase. */
function phaseOfHerd({ answers, seconds }: Awaited<ReturnType<typeof herd>>): Phase {
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

// ---------------------------------------------------------------- phases

function zipf(ctx: Context, system: System, seconds: number, seed: number, paced: boolean, paths = ctx.workload.zipfFile): Promise<Phase> {
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
async function walk(ctx: Omit<Context, "rate">, system: System): Promise<{ pages: number; seconds: number; errors: number }> {
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

// ---------------------------------------------------------------- the scenarios

export interface SystemRun {
  rows: Row[];
  /** The tiers: MONITOR census during a short saturation. */
  census?: Census & { pages: number };
  /** Polls still going (price change not yet seen through the system): awaited before the report. */
  pending: Promise<void>[];
}

/**
 * Runs every scenario of one system, in order. `onRow` sees each row as it
 * is done (progress lines).
 */
export async function runScenarios(ctx: Context, system: System, onRow: (row: Row) => void): Promise<SystemRun> {
  const d = durations(ctx.settings.quick);
  const out: SystemRun = { rows: [], pending: [] };
  const add = (r: Row) => {
    out.rows.push(r);
    onRow(r);
  };
  const stopped = () => ctx.signal.aborted;
  const tag = (label: string) => `${system.name} · ${label}`;
  const paced = `paced ${ctx.rate.toLocaleString("en-US")} req/s`;

  // 1. walk and warm-up, 2. fixed offered load, 3. saturation
  const startedAt = performance.now();
  const walked = await walk(ctx, system);
  ctx.note(`${system.name} · walk: ${walked.pages.toLocaleString("en-US")} pages in ${walked.seconds} s, ${walked.errors} errors`);
  if (stopped()) return out;
  ctx.phase(tag(`warm-up: ${paced}, ${d.warmUpS} s`), d.warmUpS * 1000);
  add(row(system, "warm-up", await measure(system, () => zipf(ctx, system, d.warmUpS, SEEDS.warmUp, true)), { walk: walked }));
  if (stopped()) return out;
  ctx.phase(tag(`fixed offered load: ${paced}, ${d.fixedS} s`), d.fixedS * 1000);
  add(row(system, "fixed", await measure(system, () => zipf(ctx, system, d.fixedS, SEEDS.fixed, true))));
  if (stopped()) return out;
  ctx.phase(tag(`saturation: closed loop, ${ctx.settings.connections} connections, ${d.saturationS} s`), d.saturationS * 1000);
  add(row(system, "saturation", await measure(system, () => zipf(ctx, system, d.saturationS, SEEDS.saturation, false))));
  if (stopped()) return out;
  ctx.phase(tag(`saturation, cached set: Zipf over the ${ctx.workload.walkRanks.toLocaleString("en-US")} walked ranks, ${d.cachedS} s`), d.cachedS * 1000);
  add(row(system, "cached", await measure(system, () => zipf(ctx, system, d.cachedS, SEEDS.cached, false, ctx.workload.cachedFile))));
  if (stopped()) return out;

  if (isTier(system)) {
    // 4. the floor: /healthz on the same instances and connections
    if (system.name === "tier") {
      ctx.phase(tag(`/healthz floor: closed loop, ${d.healthzS} s`), d.healthzS * 1000);
      const paths = ctx.workload.single("/healthz");
      const m = await measure(system, () =>
        wrkPhase({ targets: system.targets, connections: ctx.settings.connections, seconds: d.healthzS, paths, seed: 1, signal: ctx.signal }),
      );
      add(row(system, "healthz", m));
      if (stopped()) return out;
      // The floor's latency at the fixed load: what a static string costs, paced as the pages were.
      ctx.phase(tag(`/healthz floor: ${paced}, ${d.healthzS} s`), d.healthzS * 1000);
      const atRate = await measure(system, () =>
        wrkPhase({
          targets: system.targets,
          connections: ctx.settings.pacedConnections,
          seconds: d.healthzS,
          rate: ctx.rate,
          paths,
          seed: 1,
          signal: ctx.signal,
        }),
      );
      add(row(system, "healthz-fixed", atRate));
      if (stopped()) return out;
    }
    // 5. the census: what the gateway sent vs what ran inside scripts
    ctx.phase(tag(`Redis census: closed loop with MONITOR on, ${d.censusS} s (not measured)`), d.censusS * 1000);
    let pages = 0;
    const census = await system.redis.census(async () => {
      pages = (await zipf(ctx, system, d.censusS, SEEDS.census, false)).requests;
    });
    out.census = { ...census, pages };
    if (stopped()) return out;
  }
  if (system.name === "tier-300s") return out;

  // 6. cold herd
  {
    const id = ctx.workload.coldId();
    const perTarget = Math.ceil(HERD_REQUESTS / system.targets.length);
    ctx.phase(tag(`herd: ${perTarget * system.targets.length} requests at once for ${id}`));
    const m = await measure(system, () => herd(system.targets, `/products/${id}`, perTarget * system.targets.length), SETTLE_MS);
    const concurrency = system.targets.length > 1 ? `${system.targets.length} × ${perTarget} at once` : `${perTarget} at once`;
    const herdFetches = await system.origin.countsOf(id);
    add(
      row(system, "herd", { ...m, value: phaseOfHerd(m.value) }, { id, concurrency, herdFetches }, [
        `origin counted until 1 s after the burst; for ${id} itself: ${
          Object.entries(herdFetches)
            .map(([k, n]) => `${k} ${n}`)
            .join(", ") || "none"
        }`,
      ]),
    );
  }
  if (stopped()) return out;

  // 7. origin slow, 8. origin down: paced, each followed by a pause and unmeasured paced load
  const recover = async () => {
    ctx.phase(tag(`pause ${d.pauseS} s, then recover: ${paced}, ${d.recoverS} s`));
    await sleep(d.pauseS * 1000, ctx.signal);
    await zipf(ctx, system, d.recoverS, SEEDS.recover, true);
  };
  for (const [scenario, fault, seed] of [
    ["origin-slow", { latencyMs: 500 }, SEEDS.slow],
    ["origin-down", { down: "refuse" as const }, SEEDS.down],
  ] as const) {
    await system.origin.setFaults(fault);
    ctx.phase(tag(`${SCENARIO_LABELS[scenario]}: ${paced}, ${d.faultS} s`), d.faultS * 1000);
    try {
      const notes = scenario === "origin-down" ? ["origin counts include refused connections (counted before the fault is applied)"] : [];
      add(row(system, scenario, await measure(system, () => zipf(ctx, system, d.faultS, seed, true)), {}, notes));
    } finally {
      await system.origin.clearFaults();
    }
    if (stopped()) return out;
    await recover();
    if (stopped()) return out;
  }

  // 9. price change under load
  {
    const result = await priceChange(ctx, system, d, startedAt);
    add(result.row);
    if (result.pending) out.pending.push(result.pending);
  }
  if (stopped()) return out;

  // 10. Redis down (the tier only)
  if (isTier(system)) {
    await recover();
    ctx.phase(tag(`Redis down: ${paced}, ${d.faultS} s`), d.faultS * 1000);
    let killed = "";
    const m = await measure(system, async () => {
      const pid = findChildPid(system.serversPid, "redis-server");
      if (pid === null) killed = "redis-server not found: NOT killed";
      else {
        process.kill(pid, "SIGKILL");
        killed = `redis-server (pid ${pid}) killed with SIGKILL at the start of the measured phase`;
      }
      return zipf(ctx, system, d.faultS, SEEDS.redisDown, true);
    });
    const health = await Promise.all(
      system.targets.map(async (t) => {
        try {
          return ((await (await fetch(`${t}/healthz`, { signal: AbortSignal.timeout(2000) })).json()) as { l2?: string }).l2 ?? "?";
        } catch {
          return "unreachable";
        }
      }),
    );
    add(row(system, "redis-down", m, { killed, l2BreakerAfter: health }, [killed]));
  }
  return out;
}

// ---------------------------------------------------------------- price change

async function priceChange(ctx: Context, system: System, d: Durations, startedAt: number): Promise<{ row: Row; pending?: Promise<void> }> {
  const id = ctx.workload.hotId();
  const before = await getPage(`${system.targets[0]}/products/${id}`);
  const oldPrice = priceNow(before.body);
  const newMinor = oldPrice === "$123.45" ? NEW_PRICE_MINOR + 1 : NEW_PRICE_MINOR;
  const newPrice = `$${Math.floor(newMinor / 100)}.${String(newMinor % 100).padStart(2, "0")}`;
  ctx.phase(`${system.name} · price change: ${id} ${oldPrice} → ${newPrice} under paced load`, d.priceLoadS * 1000);

  const stale: Staleness = {
    id,
    oldPrice,
    newPrice,
    purge: "",
    purgeMs: null,
    seconds: null,
    capS: d.priceCapS,
    oldAnswers: 0,
    polls: 0,
    pollErrors: 0,
    entryAgeS: 0,
    pending: false,
  };
  let poll: Promise<void> | undefined;
  const m = await measure(system, async () => {
    const load = zipf(ctx, system, d.priceLoadS, SEEDS.price, true);
    await sleep(d.priceLeadS * 1000, ctx.signal);
    await system.origin.changePrice(id, newMinor);
    const changedAt = performance.now();
    stale.entryAgeS = Math.round((changedAt - startedAt) / 100) / 10;
    const purgeStarted = performance.now();
    poll = pollUntilNew(ctx, system, stale, changedAt, d.priceCapS * 1000);
    stale.purge = await system.purge(id);
    stale.purgeMs = system.name === "nginx" ? null : Math.round(performance.now() - purgeStarted);
    return load;
  });
  const r = row(system, "price-change", m, { price: stale }, [`${id}: ${oldPrice} → ${newPrice}; after the change: ${stale.purge}`]);
  r.staleness = stale;
  if (stale.seconds === null && !ctx.signal.aborted) {
    // Not yet seen: the poll goes on (without the load) up to the cap, while the next system runs.
    stale.pending = true;
    ctx.note(`${system.name}: the new price is not served yet; polling in the background for up to ${stale.capS} s after the change`);
    return {
      row: r,
      pending: poll!.then(() => {
        stale.pending = false;
        ctx.note(
          stale.seconds === null
            ? `${system.name}: new price not served within ${stale.capS} s`
            : `${system.name}: new price served by every answer ${stale.seconds} s after the change`,
        );
      }),
    };
  }
  await poll;
  return { row: r };
}

/**
 * Polls the product through every target every 50 ms until each target has
 * shown only the new price for CONFIRM_MS, or until `capMs` after the change.
 * `seconds`: from the change to the start of the first request of that final
 * all-new run.
 */
async function pollUntilNew(ctx: Context, system: System, stale: Staleness, changedAt: number, capMs: number): Promise<void> {
  let streakStart: number | null = null;
  while (!ctx.signal.aborted) {
    const tickStart = performance.now();
    if (tickStart - changedAt > capMs) return;
    const answers = await Promise.all(
      system.targets.map(async (target) => {
        try {
          const page = await getPage(`${target}/products/${stale.id}`, 5000);
          return page.status === 200 ? priceNow(page.body) : null;
        } catch {
          return null;
        }
      }),
    );
    stale.polls += answers.length;
    const errors = answers.filter((a) => a === null).length;
    stale.pollErrors += errors;
    const old = answers.filter((a) => a !== null && a !== stale.newPrice).length;
    stale.oldAnswers += old;
    if (old > 0 || errors > 0) streakStart = null;
    else {
      streakStart ??= tickStart;
      if (performance.now() - streakStart >= CONFIRM_MS) {
        stale.seconds = Math.round((streakStart - changedAt) / 10) / 100;
        return;
      }
    }
    const wait = POLL_MS - (performance.now() - tickStart);
    if (wait > 0) await sleep(wait);
  }
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
