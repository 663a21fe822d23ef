// The scenarios of `npm run bench:peers`, run in this order against each system
// (one system at a time, each with its own demo origin):
//
//   steady        Zipf(1.0) over the catalog: warm-up (not measured), then measured
//   herd          1,000 simultaneous requests for one product nobody asked for yet
//   origin-slow   +500 ms on every origin service, under Zipf
//   origin-down   every origin service refuses connections, under Zipf (caches warm)
//   price-change  a hot product's price changes under Zipf load; time until every
//                 response through the system shows the new price
//   redis-down    (the tier only) redis-server killed, under Zipf
//
// The Zipf draws continue from one scenario to the next; every system gets a
// sampler with the same seeds (those of `npm run bench`), so the same sequence
// of products. Origin counters are reset before each scenario and read after.
import { performance } from "node:perf_hooks";
import { productId } from "../../dev/origin/catalog";
import { burst, runLoad, type Live, type Tally, type TallySummary } from "../load";
import { shuffledIndexes, ZipfSampler } from "../zipf";
import { coresBetween, cpuSample, findChildPid, type CpuSample } from "./procs";
import { getPage, PRODUCT_POLICY, priceNow, type Settings, type System, type SystemName, type Tier } from "./systems";

/** The seeds of `npm run bench`'s zipf scenario (bench/scenarios.ts), so both benchmarks draw the same products. */
export const ZIPF_SEED = 20_260_426;
export const SHUFFLE_SEED = 42;

export type ScenarioName = "steady" | "herd" | "origin-slow" | "origin-down" | "price-change" | "redis-down";

export const SCENARIO_LABELS: Record<ScenarioName, string> = {
  steady: "steady Zipf",
  herd: "cold herd ×1000",
  "origin-slow": "origin +500 ms",
  "origin-down": "origin down",
  "price-change": "price change",
  "redis-down": "Redis down",
};

export interface Staleness {
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
  /** Seconds between the system's first request for this product and the change (its cache entry's age at most). */
  entryAgeS: number;
  /** True while the poll goes on after the measured load ended (Nginx: until expiry). */
  pending: boolean;
}

export interface Row {
  system: SystemName;
  scenario: ScenarioName;
  concurrency: string;
  load: TallySummary;
  /** Requests the system's demo origin received during the scenario, per service. */
  origin: Record<string, number>;
  originTotal: number;
  /** Cores busy during the measured phase, by role (load generator, workerd, nginx/varnish, origin, others). */
  cores: Record<string, number>;
  staleness?: Staleness;
  extra: Record<string, unknown>;
  notes: string[];
}

export interface Context {
  settings: Settings;
  signal: AbortSignal;
  live: Live;
  phase(label: string, ms?: number): void;
  note(text: string): void;
}

/**
 * The phases, full and --quick. Load phases are bounded by a number of
 * requests, not by time, so that every system gets exactly the same Zipf
 * draws in every scenario (a slower system would otherwise see fewer
 * products and have a colder cache in the next scenario); each also has a
 * time cap, so that nothing runs unbounded (a capped phase is noted).
 */
export function durations(quick: boolean) {
  const q = <T>(full: T, quickValue: T) => (quick ? quickValue : full);
  return {
    /** Requests per phase. */
    warmUp: q(3000, 500),
    steady: q(6000, 800),
    slow: q(1500, 300),
    down: q(3000, 600),
    /** Unmeasured Zipf between fault scenarios, after an idle pause: queues drain, breakers close, caches refill. */
    recover: q(500, 150),
    redisDown: q(3000, 600),
    /** Idle after a fault is cleared: longer than the origin breaker's 2-s cool-down (src/config/defaults.ts). */
    pauseMs: 3000,
    /** The Zipf load around the price change, ms: by time, so that the change happens under load whatever the speed (the poll goes on after it if needed). */
    priceLoadMs: q(10_000, 5000),
    /** Time cap of any load phase, ms. */
    capMs: q(60_000, 15_000),
    /** Load before the change, ms. */
    priceLeadMs: 1000,
    /** Cap on the price poll: the product ttl + 30 s (full); quick runs stop after 20 s. */
    priceCapMs: quick ? 20_000 : (PRODUCT_POLICY.ttlS + 30) * 1000,
  };
}

const HERD_REQUESTS = 1000;
const POLL_MS = 50;
/** Every target must show the new price this long before the change counts as complete. */
const CONFIRM_MS = 1000;
const SETTLE_MS = 1000;
/** $123.45: no demo-origin price ends in 45 (they all end in 99). */
const NEW_PRICE_MINOR = 12_345;

// ---------------------------------------------------------------- Zipf paths

/** The product sequence of one system: the same seeds for every system. */
export class ZipfPaths {
  private readonly sampler: ZipfSampler;
  private readonly indexes: Uint32Array;
  private readonly seen: Uint8Array;
  /** When each system first asked for the hot product (its cache entry's birth, at the latest). */
  hotFirstAt: number | null = null;
  distinct = 0;

  constructor(readonly n: number) {
    this.sampler = new ZipfSampler({ n, s: 1.0, seed: ZIPF_SEED });
    this.indexes = shuffledIndexes(n, SHUFFLE_SEED);
    this.seen = new Uint8Array(n + 1);
  }

  readonly next = (): string => {
    const rank = this.sampler.next();
    const index = this.indexes[rank - 1]!;
    if (!this.seen[index]) {
      this.seen[index] = 1;
      this.distinct++;
      if (rank === 1) this.hotFirstAt = performance.now();
    }
    return `/products/${productId(index)}`;
  };

  /** The most popular product (rank 1). */
  hotId(): string {
    return productId(this.indexes[0]!);
  }

  /** A product never requested so far: the least popular ranks first. */
  coldId(): string {
    for (let rank = this.n; rank > 0; rank--) {
      const index = this.indexes[rank - 1]!;
      if (!this.seen[index]) {
        this.seen[index] = 1;
        return productId(index);
      }
    }
    throw new Error("every product has been requested");
  }
}

// ---------------------------------------------------------------- measuring

interface Measured {
  origin: Record<string, number>;
  originTotal: number;
  cores: Record<string, number>;
}

/** Resets the origin's counters, runs `work`, waits `settleMs` (background fills), reads the counters. */
async function measure<T>(system: System, work: () => Promise<T>, settleMs = 0): Promise<{ value: T } & Measured> {
  await system.origin.resetCounters();
  const cpu0: CpuSample = cpuSample(system.cpuRoots);
  const value = await work();
  const cpu1 = cpuSample(system.cpuRoots);
  if (settleMs) await sleep(settleMs);
  const counters = await system.origin.counters();
  const services = ["product", "inventory", "reviews", "recommendations"];
  const origin = Object.fromEntries(services.map((s) => [s, counters.services[s] ?? 0]));
  return { value, origin, originTotal: services.reduce((sum, s) => sum + (counters.services[s] ?? 0), 0), cores: coresBetween(cpu0, cpu1) };
}

/** `count` Zipf requests (at most `capMs`); `capped` tells whether the cap cut it short. */
async function zipfLoad(ctx: Context, system: System, paths: ZipfPaths, count: number, capMs: number): Promise<Tally & { capped?: boolean }> {
  let left = count;
  const next = () => (left-- > 0 ? paths.next() : null);
  const tally: Tally & { capped?: boolean } = await runLoad({ targets: system.targets, connections: ctx.settings.connections, next, durationMs: capMs, signal: ctx.signal, live: ctx.live });
  tally.capped = left > 0 && !ctx.signal.aborted;
  return tally;
}

function row(system: System, scenario: ScenarioName, concurrency: string, tally: Tally & { capped?: boolean }, m: Measured, extra: Record<string, unknown> = {}, notes: string[] = []): Row {
  const load = tally.summary();
  if (tally.capped) notes = [...notes, `cut short by the time cap: ${load.requests} requests instead of the planned number (the Zipf draws then differ from the other systems')`];
  return { system: system.name, scenario, concurrency, load, origin: m.origin, originTotal: m.originTotal, cores: m.cores, extra, notes };
}

// ---------------------------------------------------------------- the scenarios

export interface SystemRun {
  rows: Row[];
  /** Polls still going (price change not yet seen through the system): awaited before the report. */
  pending: Promise<void>[];
}

/**
 * Runs every scenario against one system, in order. `onRow` sees each row
 * as it is done (progress lines).
 */
export async function runScenarios(ctx: Context, system: System, onRow: (row: Row) => void): Promise<SystemRun> {
  const d = durations(ctx.settings.quick);
  const paths = new ZipfPaths(ctx.settings.catalogSize);
  const conns = `${ctx.settings.connections} conn`;
  const rows: Row[] = [];
  const pending: Promise<void>[] = [];
  const add = (r: Row) => {
    rows.push(r);
    onRow(r);
  };
  const stopped = () => ctx.signal.aborted;
  const tag = (label: string) => `${system.name} · ${label}`;

  // 1. steady Zipf
  ctx.phase(tag(`steady: warm-up, ${d.warmUp} requests`));
  await zipfLoad(ctx, system, paths, d.warmUp, d.capMs);
  if (stopped()) return { rows, pending };
  ctx.phase(tag(`steady: measure ${d.steady} requests`));
  {
    const m = await measure(system, () => zipfLoad(ctx, system, paths, d.steady, d.capMs));
    add(row(system, "steady", conns, m.value, m, { distinctProductsSoFar: paths.distinct }));
  }
  if (stopped()) return { rows, pending };

  // 2. cold herd
  {
    const id = paths.coldId();
    const perTarget = Math.ceil(HERD_REQUESTS / system.targets.length);
    ctx.phase(tag(`herd: ${perTarget * system.targets.length} requests at once for ${id}`));
    const m = await measure(system, () => burst({ targets: system.targets, perTarget, path: `/products/${id}`, live: ctx.live }), SETTLE_MS);
    const concurrency = system.targets.length > 1 ? `${system.targets.length} × ${perTarget} at once` : `${perTarget} at once`;
    add(row(system, "herd", concurrency, m.value, m, { id }, ["origin counted until 1 s after the burst"]));
  }
  if (stopped()) return { rows, pending };

  // 3. origin slow
  await system.origin.setFaults({ latencyMs: 500 });
  ctx.phase(tag(`origin +500 ms: measure ${d.slow} requests`));
  try {
    const m = await measure(system, () => zipfLoad(ctx, system, paths, d.slow, d.capMs));
    add(row(system, "origin-slow", conns, m.value, m));
  } finally {
    await system.origin.clearFaults();
  }
  if (stopped()) return { rows, pending };
  ctx.phase(tag(`pause ${d.pauseMs / 1000} s, then recover: ${d.recover} requests`));
  await sleep(d.pauseMs);
  await zipfLoad(ctx, system, paths, d.recover, d.capMs);

  // 4. origin down (refuse), caches warm
  await system.origin.setFaults({ down: "refuse" });
  ctx.phase(tag(`origin down: measure ${d.down} requests`));
  try {
    const m = await measure(system, () => zipfLoad(ctx, system, paths, d.down, d.capMs));
    add(row(system, "origin-down", conns, m.value, m, {}, ["origin counts include refused connections (counted before the fault is applied)"]));
  } finally {
    await system.origin.clearFaults();
  }
  if (stopped()) return { rows, pending };
  ctx.phase(tag(`pause ${d.pauseMs / 1000} s, then recover: ${d.recover} requests`));
  await sleep(d.pauseMs);
  await zipfLoad(ctx, system, paths, d.recover, d.capMs);
  if (stopped()) return { rows, pending };

  // 5. price change under load
  {
    const result = await priceChange(ctx, system, paths, d);
    add(result.row);
    if (result.pending) pending.push(result.pending);
  }
  if (stopped()) return { rows, pending };

  // 6. Redis down (the tier only)
  if (system.name === "tier") {
    const tier = system as Tier;
    ctx.phase(tag(`recover: ${d.recover} requests`));
    await zipfLoad(ctx, system, paths, d.recover, d.capMs);
    ctx.phase(tag(`Redis down: measure ${d.redisDown} requests`));
    let killed = "";
    const m = await measure(system, async () => {
      const pid = findChildPid(tier.serversPid, "redis-server");
      if (pid === null) killed = "redis-server not found: NOT killed";
      else {
        process.kill(pid, "SIGKILL");
        killed = `redis-server (pid ${pid}) killed with SIGKILL at the start of the measured phase`;
      }
      return zipfLoad(ctx, system, paths, d.redisDown, d.capMs);
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
    add(row(system, "redis-down", conns, m.value, m, { killed, l2BreakerAfter: health }, [killed]));
  }
  return { rows, pending };
}

// ---------------------------------------------------------------- price change

async function priceChange(ctx: Context, system: System, paths: ZipfPaths, d: ReturnType<typeof durations>): Promise<{ row: Row; pending?: Promise<void> }> {
  const id = paths.hotId();
  const before = await getPage(`${system.targets[0]}/products/${id}`);
  const oldPrice = priceNow(before.body);
  const newMinor = oldPrice === "$123.45" ? NEW_PRICE_MINOR + 1 : NEW_PRICE_MINOR;
  const newPrice = `$${Math.floor(newMinor / 100)}.${String(newMinor % 100).padStart(2, "0")}`;
  ctx.phase(`${system.name} · price change: ${id} ${oldPrice} → ${newPrice} under load`, d.priceLoadMs);

  const stale: Staleness = {
    id,
    oldPrice,
    newPrice,
    purge: "",
    purgeMs: null,
    seconds: null,
    capS: d.priceCapMs / 1000,
    oldAnswers: 0,
    polls: 0,
    pollErrors: 0,
    entryAgeS: 0,
    pending: false,
  };
  let poll: Promise<void> | undefined;
  const m = await measure(system, async () => {
    const load = runLoad({ targets: system.targets, connections: ctx.settings.connections, next: paths.next, durationMs: d.priceLoadMs, signal: ctx.signal, live: ctx.live });
    await sleep(d.priceLeadMs);
    await system.origin.changePrice(id, newMinor);
    const changedAt = performance.now();
    stale.entryAgeS = paths.hotFirstAt === null ? 0 : Math.round((changedAt - paths.hotFirstAt) / 100) / 10;
    const purgeStarted = performance.now();
    poll = pollUntilNew(ctx, system, stale, changedAt, d.priceCapMs);
    stale.purge = await system.purge(id);
    stale.purgeMs = system.name === "nginx" ? null : Math.round(performance.now() - purgeStarted);
    return load;
  });
  const notes = [`${id}: ${oldPrice} → ${newPrice}; after the change: ${stale.purge}`];
  const r = row(system, "price-change", `${ctx.settings.connections} conn + poll`, m.value, m, { price: stale }, notes);
  r.staleness = stale;
  if (stale.seconds === null && !ctx.signal.aborted) {
    // Not yet seen: the poll goes on (without the load) up to the cap, while the next system runs.
    stale.pending = true;
    ctx.note(`${system.name}: the new price is not served yet; polling in the background for up to ${stale.capS} s after the change`);
    return {
      row: r,
      pending: poll!.then(() => {
        stale.pending = false;
        ctx.note(stale.seconds === null ? `${system.name}: new price not served within ${stale.capS} s` : `${system.name}: new price served by every answer ${stale.seconds} s after the change`);
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

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
