// The scenarios of `npm run bench:peers`, run in this order against each system
// (one system at a time, each with its own demo origin). Every throughput and
// latency figure comes from wrk (bench/lib/wrk.ts); the same seeded Zipf(1.0) draws in
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
// tier-off (no cache at all) runs the walk, warm-up, fixed and saturation only;
// tier-300s and tier-location run the walk, warm-up, fixed, saturation, cached and census only. Origin counters
import { performance } from "node:perf_hooks";
import { findChildPid } from "../lib/cpu";
import { herd } from "../lib/probe";
import type { Census } from "../../dev/harness/redisProbe";
import { sleep } from "../lib/sleep";
import { wrkPhase } from "../lib/wrk";
import { isTier, measure, phaseOfHerd, row, walk, zipf } from "./measure";
import { durations, HERD_REQUESTS, SCENARIO_LABELS, SEEDS, type Context, type Row } from "./plan";
import { priceChange } from "./priceChange";
import type { System } from "./systems";

const SETTLE_MS = 1000;

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
  if (stopped() || system.name === "tier-off") return out;
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
  if (system.name === "tier-300s" || system.name === "tier-location") return out;

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
