// The benchmark's scenarios. Each starts from a known state (L2 emptied,
// fresh Miniflare instances, so fresh isolates and empty L1s) so that a
// scenario run alone with `--scenario NAME` measures what it does in a full run.
// Only the measured phases feed the figures: warm-ups, and the warming of L2
// in `l2-hit`, are left out of the latency, the tiers and the origin counts.
// The first six are here; the steady-state, fault, shard and hot-product
// scenarios are in steady.ts, the measuring helpers in measure.ts, what a
// scenario is in scenario.ts.
import { productId } from "../dev/origin/catalog";
import { burst, runLoad, Tally } from "./load";
import type { Context, Scenario } from "./scenario";
import { Meter, result, round, seconds, setUp, SETTLE_MS, SHUFFLE_SEED, sleep, ZIPF_SEED } from "./measure";
import type { OriginCounters, Servers, WorkerInstance } from "./stack";
import { STEADY_SCENARIOS } from "./steady";
import { shuffledIndexes, ZipfSampler } from "./zipf";

/** Sequential catalog ids from `first`; null once the range is used up. */
function sequentialIds(first: number, last: number): () => string | null {
  let next = first;
  return () => (next <= last ? `/products/${productId(next++)}` : null);
}

/** L2 keys of a product's four entries, as src/cache/keys.ts spells them (pp:v1:<p|i|r|c>:<id>). */
function entryKeys(id: string): string[] {
  return ["p", "i", "r", "c"].map((code) => `pp:v1:${code}:${id}`);
}

/**
 * Share of the entries of products `first..last` present in L2. A fill writes
 * to L2 in the background after the answer; a write that fails or runs out of
 * its time budget is dropped (by design), and this is how many were not.
 */
async function l2Kept(servers: Servers, first: number, last: number): Promise<number | null> {
  if (last < first) return null;
  const keys: string[] = [];
  for (let index = first; index <= last; index++) keys.push(...entryKeys(productId(index)));
  let present = 0;
  for (let i = 0; i < keys.length; i += 4000) present += await servers.countKeys(keys.slice(i, i + 4000));
  return round(present / keys.length, 4);
}

// ---------------------------------------------------------------- durations

/** A warm-up (discarded: the isolate's JIT and connections settle) then the measured run. */
async function warmThenMeasure(ctx: Context, meter: Meter, targets: string[], next: () => string | null, warmMs: number, measureMs: number): Promise<Tally> {
  const { connections } = ctx.settings;
  ctx.phase("warm-up", warmMs);
  await runLoad({ targets, connections, next, durationMs: warmMs, signal: ctx.signal, live: ctx.live });
  ctx.phase("measure", measureMs);
  return meter.around(() => runLoad({ targets, connections, next, durationMs: measureMs, signal: ctx.signal, live: ctx.live }));
}

/**
 * One connection, after the measured phase: the time a request takes when
 * nothing queues in front of it. At 32 connections a single isolate is busy
 * all the time and latency is mostly waiting; this is the cost itself.
 */
function measureUnloaded(ctx: Context, targets: string[], next: () => string | null): Promise<Tally> {
  const ms = seconds(ctx, 3, 1);
  ctx.phase("1 connection", ms);
  return runLoad({ targets, connections: 1, next, durationMs: ms, signal: ctx.signal, live: ctx.live });
}

// ---------------------------------------------------------------- scenarios

const staticScenario: Scenario = {
  name: "static",
  description: "GET /healthz: the cheapest route, a small JSON; the runtime's and HTTP's own cost",
  async run(ctx) {
    const { workers, meter } = await setUp(ctx, 1);
    const target = [workers[0]!.url];
    const tally = await warmThenMeasure(ctx, meter, target, () => "/healthz", seconds(ctx, 3, 1), seconds(ctx, 20, 2));
    const unloaded = await measureUnloaded(ctx, target, () => "/healthz");
    return result(this, { concurrency: `${ctx.settings.connections} connections`, tally, meter, workers, unloaded });
  },
};

const L1_PRODUCT = productId(42);

const l1HitScenario: Scenario = {
  name: "l1-hit",
  description: `one product (${L1_PRODUCT}) again and again: every page from this isolate's L1`,
  async run(ctx) {
    const { workers, meter } = await setUp(ctx, 1);
    const path = `/products/${L1_PRODUCT}`;
    ctx.phase("fill");
    const target = [workers[0]!.url];
    await runLoad({ targets: target, connections: 1, next: once(path), signal: ctx.signal });
    const tally = await warmThenMeasure(ctx, meter, target, () => path, seconds(ctx, 3, 1), seconds(ctx, 20, 2));
    const unloaded = await measureUnloaded(ctx, target, () => path);
    const notes = [
      "inventory's ttl is 10 s: during a long run it goes stale and is refreshed in the background (served stale meanwhile), hence a few inventory fetches at the origin",
    ];
    return result(this, { concurrency: `${ctx.settings.connections} connections`, tally, meter, workers, unloaded, notes });
  },
};

function once(path: string): () => string | null {
  let sent = false;
  return () => (sent ? null : ((sent = true), path));
}

/**
 * Connections that fill L2 through instance A. Few on purpose: under 32, the
 * busy isolate lets many of its background L2 writes overrun their time
 * budget, and they are dropped (see the miss scenario's l2WritesKept), which
 * would leave holes that B then fills from the origin.
 */
const FILL_CONNECTIONS = 8;

const l2HitScenario: Scenario = {
  name: "l2-hit",
  description: "instance A fills L2 for a batch of products, then a fresh instance B asks for each once: L1 miss, L2 hit",
  async run(ctx) {
    const { workers, meter } = await setUp(ctx, 2);
    const [a, b] = workers as [WorkerInstance, WorkerInstance];
    const { connections } = ctx.settings;
    // Batches keep every entry young: inventory is fresh for only 10 s, and
    // warming all products first would leave the early ones stale in L2 by
    // the time B asks for them (served, but refreshed from the origin).
    const batch = ctx.settings.quick ? 100 : 400;
    const batches = ctx.settings.quick ? 1 : 5;
    let first = 1;
    const tally = new Tally();
    let oldestMs = 0;
    const kept: number[] = [];
    const unloaded = new Tally();
    // Batch 0 only warms B (its isolate, JIT and sockets) and is not measured;
    // the last batch is read one request at a time (the unloaded figure).
    for (let i = 0; i <= batches + 1 && !ctx.signal.aborted; i++) {
      const last = first + batch - 1;
      const label = i === 0 ? "warm B" : i > batches ? "B, 1 connection" : "measure B";
      ctx.phase(`batch ${i}/${batches + 1}: fill L2 through A (${FILL_CONNECTIONS} connections)`);
      const filled = Date.now();
      await runLoad({ targets: [a.url], connections: FILL_CONNECTIONS, next: sequentialIds(first, last), signal: ctx.signal, live: ctx.live });
      await sleep(200); // the last fills' background writes
      kept.push((await l2Kept(ctx.servers, first, last)) ?? 0);
      ctx.phase(`batch ${i}/${batches + 1}: ${label}`);
      const read = (into: Tally, readers: number) =>
        runLoad({ targets: [b.url], connections: readers, next: sequentialIds(first, last), signal: ctx.signal, live: ctx.live }, into);
      if (i === 0) await read(new Tally(), connections);
      else if (i > batches) await read(unloaded, 1);
      else await meter.around(() => read(tally, connections));
      oldestMs = Math.max(oldestMs, Date.now() - filled);
      first = last + 1;
    }
    const extra = {
      products: batch * batches,
      batch,
      fillConnections: FILL_CONNECTIONS,
      l2EntriesPresentBeforeB: round(kept.reduce((x, y) => x + y, 0) / Math.max(1, kept.length), 4),
      oldestEntryAgeS: round(oldestMs / 1000, 1),
    };
    const notes = ["pages whose entries were missing from L2 (l2EntriesPresentBeforeB < 1) are filled from the origin by B and show as origin"];
    return result(this, { concurrency: `${connections} connections`, tally, meter, workers, unloaded, extra, notes });
  },
};

const missScenario: Scenario = {
  name: "miss",
  description: "a distinct, never-seen product on every request: L1 and L2 miss, four origin fetches per page",
  async run(ctx) {
    const { workers, meter } = await setUp(ctx, 1);
    let nextIndex = 1;
    const next = () => (nextIndex <= ctx.settings.catalogSize ? `/products/${productId(nextIndex++)}` : null);
    const warmMs = seconds(ctx, 3, 1);
    const { connections } = ctx.settings;
    ctx.phase("warm-up", warmMs);
    await runLoad({ targets: [workers[0]!.url], connections, next, durationMs: warmMs, signal: ctx.signal, live: ctx.live });
    const firstMeasured = nextIndex;
    const measureMs = seconds(ctx, 20, 2);
    ctx.phase("measure", measureMs);
    const tally = await meter.around(() => runLoad({ targets: [workers[0]!.url], connections, next, durationMs: measureMs, signal: ctx.signal, live: ctx.live }));
    const lastMeasured = nextIndex - 1;
    const unloaded = await measureUnloaded(ctx, [workers[0]!.url], next);
    ctx.phase("check L2 writes");
    await sleep(SETTLE_MS);
    const extra = { l2WritesKept: await l2Kept(ctx.servers, firstMeasured, lastMeasured) };
    const notes = [
      "l2WritesKept: share of the measured pages' four entries present in L2 a second after the run; the rest were background writes dropped (a write that fails or overruns the L2 time budget is not retried, by design)",
    ];
    return result(this, { concurrency: `${connections} connections`, tally, meter, workers, unloaded, extra, notes });
  },
};

const zipfScenario: Scenario = {
  name: "zipf",
  description: "Zipf(s=1.0) over the whole catalog, hot ids spread by a seeded shuffle; cold start, warm-up, then measured",
  async run(ctx) {
    const n = ctx.settings.catalogSize;
    const sampler = new ZipfSampler({ n, s: 1.0, seed: ZIPF_SEED });
    const indexes = shuffledIndexes(n, SHUFFLE_SEED);
    // What an ideal cache (infinite, never expiring) could serve without the
    // origin: requests for a product already requested before in this run.
    const seen = new Uint8Array(n + 1);
    let measuring = false;
    let drawn = 0;
    let repeats = 0;
    let distinct = 0;
    const next = () => {
      const rank = sampler.next();
      if (measuring) drawn++;
      if (seen[rank]) {
        if (measuring) repeats++;
      } else {
        seen[rank] = 1;
        distinct++;
      }
      return `/products/${productId(indexes[rank - 1]!)}`;
    };

    const { workers, meter } = await setUp(ctx, 1);
    const target = [workers[0]!.url];
    const warmMs = seconds(ctx, 15, 2);
    const measureMs = seconds(ctx, 30, 5);
    const { connections } = ctx.settings;
    ctx.phase("warm-up", warmMs);
    const warm = await runLoad({ targets: target, connections, next, durationMs: warmMs, signal: ctx.signal, live: ctx.live });
    measuring = true;
    ctx.phase("measure", measureMs);
    const tally = await meter.around(() => runLoad({ targets: target, connections, next, durationMs: measureMs, signal: ctx.signal, live: ctx.live }));
    const warmSummary = warm.summary();
    const extra = {
      s: 1.0,
      products: n,
      seeds: { zipf: ZIPF_SEED, shuffle: SHUFFLE_SEED },
      warmUpS: warmMs / 1000,
      measuredS: measureMs / 1000,
      warmUpRequests: warmSummary.requests,
      warmUpNoOriginShare: warmSummary.noOriginShare === null ? null : round(warmSummary.noOriginShare, 4),
      distinctProductsRequested: distinct,
      // Requests still in flight when the run stopped were drawn but not counted: at most `connections`.
      idealNoOriginShare: drawn ? round(repeats / drawn, 4) : null,
      top100Share: round(sampler.headShare(100), 4),
      top1000Share: round(sampler.headShare(1000), 4),
    };
    const notes = [
      "idealNoOriginShare: share of measured requests for a product already requested earlier in this run — the most any cache starting cold could serve without the origin, whatever its design",
    ];
    return result(this, { concurrency: `${connections} connections`, tally, meter, workers, extra, notes });
  },
};

const HERD_INSTANCES = 4;
const HERD_PER_INSTANCE = 100;

const herdScenario: Scenario = {
  name: "herd",
  description: `${HERD_INSTANCES} instances × ${HERD_PER_INSTANCE} simultaneous requests for one cold product: coalescing in and across isolates`,
  async run(ctx) {
    ctx.phase(`start ${HERD_INSTANCES} instances`);
    const { workers, meter } = await setUp(ctx, HERD_INSTANCES);
    const rounds = ctx.settings.quick ? 1 : 3;
    const tally = new Tally();
    const perRound: Array<Record<string, number | string>> = [];
    for (let round = 1; round <= rounds && !ctx.signal.aborted; round++) {
      // A product nobody asked for: L2 was emptied and no other round uses it.
      const index = 500 + round;
      const id = productId(index);
      ctx.phase(`round ${round}/${rounds}: ${id}`);
      const before = await ctx.servers.counters();
      const burstTally = await meter.around(() =>
        burst({ targets: workers.map((w) => w.url), perTarget: HERD_PER_INSTANCE, path: `/products/${id}`, live: ctx.live }),
      );
      await sleep(SETTLE_MS);
      const after = await ctx.servers.counters();
      const summary = burstTally.summary();
      perRound.push({
        id,
        product: delta(before, after, "product"),
        inventory: delta(before, after, "inventory"),
        reviews: delta(before, after, "reviews"),
        recommendations: delta(before, after, "recommendations"),
        ok: summary.statuses["200"] ?? 0,
        errors: summary.errors,
        collapsed: summary.collapsed,
        p50Ms: summary.latencyMs.p50,
        maxMs: summary.latencyMs.max,
        l2EntriesPresentAfter: (await l2Kept(ctx.servers, index, index)) ?? 0,
      });
      tally.add(burstTally);
    }
    const extra = { instances: HERD_INSTANCES, perInstance: HERD_PER_INSTANCE, rounds: perRound };
    const notes = ["target: exactly 1 product and 1 inventory fetch at the origin per round (counted until 1 s after the burst)"];
    return result(this, { concurrency: `${HERD_INSTANCES} × ${HERD_PER_INSTANCE} at once`, tally, meter, workers, extra, notes });
  },
};

function delta(before: OriginCounters, after: OriginCounters, service: string): number {
  return (after.services[service] ?? 0) - (before.services[service] ?? 0);
}

export const SCENARIOS: readonly Scenario[] = [staticScenario, l1HitScenario, l2HitScenario, missScenario, zipfScenario, herdScenario, ...STEADY_SCENARIOS];
