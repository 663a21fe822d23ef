// `npm run bench:chaos [-- --minutes 10] [--seed N] [--instances 2] [--rate N] [--connections N] [--departing N] [--results-suffix S]`:
// every guarantee at once, under random combined faults, judged by an
// oracle. The soak's stack and load (its catalog and origin, its fleet of
// isolates sharing a location cache, wrk's Zipf, departing visitors); a
// seeded schedule of faults (schedule.ts, done by faults.ts; the bulk
// re-price by reprice.ts); wrk's paced Zipf load for the whole run, and the
// schedule's boundaries cutting it into segments; an oracle probing and changing prices all along (oracle.ts),
// the origin's counts (protection.ts), the isolates after the load
// (isolate.ts); the tables (report.ts). See bench/chaos/README.md.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { ZipfSampler } from "../../dev/harness/random";
import { RedisProbe } from "../../dev/harness/redisProbe";
import { DEFAULT_POLICIES, DEFAULTS } from "../../src/config/defaults";
import { benchmarkRun } from "../lib/cleanup";
import { countLogLine, type LogCounts, type Snapshot, snapshots, statusOf } from "../lib/probe";
import { describeMachine, runLine, writeResults } from "../lib/report";
import { ensureWrk, runZipfWrk, Workload, type WrkFigures } from "../lib/wrk";
import { slotsFreed } from "../soak/afterLoad";
import { startCancellers } from "../soak/cancel";
import { CATALOG, ORIGIN } from "../soak/plan";
import { startFleet } from "../soak/restart";
import { startStack, toolVersions, type WorkerLogs } from "../stack";
import { faultControls, faultName, tailsOf } from "./faults";
import { heapFlat, sampleL1, workSettled } from "./isolate";
import { judgeAvailability, judgeFreshness, probeFigures, startProber, type TierTimes } from "./oracle";
import { chaosOptions, HERD_RANK_COUNT, HOT_RANKS, PROBE_RATE, SEEDS, WATCH } from "./plan";
import { startPriceChanger } from "./priceChanger";
import { type HerdResult, judgeStretch, originCounters, sendHerd } from "./protection";
import { chaosTables, type ChaosInput, type SegmentRow, wrkLine } from "./report";
import { bulkReprice, type RepriceBaseline, type RepriceRun, repriceFigures } from "./reprice";
import { describe, drawSchedule, scheduleTable, segments, spans, type Step, steps } from "./schedule";

const options = chaosOptions();
const { minutes, seed, instances, rate, connections, departing, results } = options;
const { onCleanup, interrupted, run, signal } = benchmarkRun("chaos");

/** wrk's Zipf load at `rate` for the whole run, stopped with the run. */
async function runWrk(targets: string[], seconds: number, wrkSeed: number, pathsFile: string): Promise<WrkFigures> {
  const abort = new AbortController();
  const stop = onCleanup("wrk", async () => abort.abort());
  try {
    return await runZipfWrk({ targets, seconds, connections, rate, seed: wrkSeed, pathsFile, signal: abort.signal });
  } finally {
    await stop();
  }
}

async function main(): Promise<void> {
  ensureWrk();
  const startedAt = new Date();
  const command = ["npm run bench:chaos", ...(process.argv.length > 2 ? ["--", ...process.argv.slice(2)] : [])].join(" ");
  const span = spans(minutes);
  const faults = drawSchedule(seed, minutes);
  const head = `chaos: ${minutes} min, ${instances} instance(s) sharing a location cache, wrk -t2 -c${connections} Zipf paced at ${rate} req/s, ${departing} departing visitors a second, the oracle's prober at ${PROBE_RATE} req/s; origin ${ORIGIN.latencyMs} ± ${ORIGIN.jitterMs} ms, ${CATALOG.toLocaleString("en-US")} products`;
  console.log(`seed ${seed}: replay with --seed ${seed}\n${head}\n\n${scheduleTable(faults)}\n`);

  const logCounts: LogCounts = { unhandled: 0, io: 0, crossRequest: 0 };
  const logs: WorkerLogs = { count: 0, distinct: new Map(), scenario: "chaos", onLine: (line) => countLogLine(logCounts, line) };
  const { servers, filter } = await startStack({ catalogSize: CATALOG, ...ORIGIN }, onCleanup);
  // The location tier on: a deploy then exercises the isolates' shared location cache.
  const fleet = await startFleet(instances, { ...servers.bindings, LOCATION_CACHE: "on" }, logs, onCleanup);
  const targets = fleet.workers.map((w) => w.url);
  const redis = await RedisProbe.connect(servers.redisPort);
  onCleanup("redis census", async () => redis.close());
  console.log(filter.built ? `known-ids filter built in ${filter.seconds} s` : `known-ids filter NOT built (${filter.detail})`);

  // The settings the deadlines and bounds are made of, as the workers run them.
  const config = (await statusOf(targets[0]!))?.config;
  const times: TierTimes = { pollMs: config?.purgePollMs ?? DEFAULTS.purgePollMs, l2TimeoutMs: config?.l2TimeoutMs ?? DEFAULTS.l2TimeoutMs };
  const policies = config?.policies ?? DEFAULT_POLICIES;
  const timesLine = `PURGE_POLL_MS ${times.pollMs}, L2_TIMEOUT_MS ${times.l2TimeoutMs}, ttl ${Object.entries(policies)
    .map(([name, p]) => `${name} ${p.ttl} s`)
    .join(", ")} (${config ? "the workers' /__status.json" : "the defaults: the status has no config"})`;
  console.log(timesLine);

  const dir = mkdtempSync(join(tmpdir(), "chaos-"));
  process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
  // Zipf ranks → products (the shared shuffle), the herds' cold ranks left out of every draw.
  const workload = new Workload(dir, CATALOG, 0, HERD_RANK_COUNT);
  const herdRanks = Array.from({ length: HERD_RANK_COUNT }, (_, i) => CATALOG - HERD_RANK_COUNT + 1 + i);
  const hotIds = Array.from({ length: HOT_RANKS }, (_, i) => workload.idOfRank(i + 1));
  const sampler = new ZipfSampler({ n: CATALOG, s: 1, seed: seed + SEEDS.probe });
  const zipfId = () => {
    for (;;) {
      const rank = sampler.next();
      if (rank <= CATALOG - HERD_RANK_COUNT) return workload.idOfRank(rank);
    }
  };

  // The load's clock: every time the oracle judges is ms from here.
  const t0 = performance.now();
  const now = () => performance.now() - t0;
  const prober = startProber({ targets, rate: PROBE_RATE, hotIds, zipfId, seed: seed + SEEDS.probe, now });
  onCleanup("prober", () => prober.stop());
  const l1Samples = sampleL1(targets, now);
  onCleanup("L1 samples", () => l1Samples.stop());
  /** A deploy under way: herds wait for it. */
  let restarting: Promise<void> = Promise.resolve();
  const restartFleet = async () => {
    await prober.pause();
    try {
      await fleet.restart("on");
    } finally {
      prober.resume();
    }
  };
  const tails = tailsOf(policies);
  const prices = startPriceChanger({ targets, origin: servers.origin, token: servers.bindings.PURGE_TOKEN!, hotIds, seed: seed + SEEDS.prices, now });
  onCleanup("price changer", () => prices.stop());
  const controls = faultControls({
    servers,
    origin: servers.origin,
    now,
    tails,
    restartFleet: () => (restarting = restartFleet()),
    // A purge-through-redis: a price changed and purged as its Redis outage starts, the product watched until 5 s after the 202.
    purgeNow: (fault) => {
      const { id, done } = prices.changeNow(fault.n);
      prober.watch(
        id,
        done.then(() => sleep(WATCH.afterMs)),
      );
    },
  });
  onCleanup("faults", () => controls.undoAll());
  const leaving = new ZipfSampler({ n: CATALOG, s: 1, seed: seed + SEEDS.departing });
  const leavingPath = () => {
    for (;;) {
      const rank = leaving.next();
      if (rank <= CATALOG - HERD_RANK_COUNT) return `/products/${workload.idOfRank(rank)}`;
    }
  };
  const visitors = departing ? startCancellers(targets, leavingPath, departing) : null;
  if (visitors) onCleanup("departing visitors", () => visitors.stop());
  const counters = originCounters(servers.origin);

  const herds: Promise<HerdResult>[] = [];
  const repricing = new Map<number, Promise<RepriceRun>>();
  const repriced: { fault: number; run: RepriceRun }[] = [];
  const doStep = async ({ fault, what, k }: Step) => {
    console.log(`${(now() / 1000).toFixed(1)} s: ${what}${what === "step" ? ` ${k + 1}` : ""} ${faultName(fault)}`);
    if (fault.spec.kind === "bulk-reprice" && what === "start") {
      const afterMs = span.bulk.afterS * 1000;
      repricing.set(fault.n, bulkReprice({ targets, token: servers.bindings.PURGE_TOKEN!, redis, now, afterMs, signal }));
    }
    if (fault.spec.kind === "bulk-reprice" && what === "end") repriced.push({ fault: fault.n, run: await repricing.get(fault.n)! });
    if (what === "start") await controls.start(fault);
    else if (what === "step") await controls.step(fault, k);
    else await controls.end(fault);
    if (what === "start" && fault.herdAtS !== null) {
      const id = workload.idOfRank(herdRanks[herds.length]!);
      const send = () => sendHerd({ fault: fault.n, id, targets, counters, origin: servers.origin, timeline: controls.timeline, now });
      herds.push(sleep((fault.herdAtS - fault.atS) * 1000).then(() => restarting.then(send)));
    }
  };

  // The load runs through every segment; a segment is the time from one boundary of the schedule to the next, the steps due run between two.
  const allSteps = steps(faults);
  const baselines = new Map<number, RepriceBaseline>();
  const rows: SegmentRow[] = [];
  let afterWarmup: Snapshot[] = [];
  const load = runWrk(targets, span.totalS, seed * 1000 + SEEDS.wrk, workload.zipfFile).catch((err: unknown) => {
    if (!interrupted()) console.error(`wrk: ${String(err)}`);
    return null;
  });
  for (const segment of segments(faults, span)) {
    if (interrupted()) break;
    if (segment.startS === span.warmupS) afterWarmup = await snapshots(fleet.workers, true);
    for (const step of allSteps.filter((x) => x.atS === segment.startS)) await doStep(step);
    const start = now();
    const epoch = segment.state === "quiet" ? await counters.reset() : null;
    const untilEnd = () => sleep(Math.max(0, segment.endS * 1000 - now()), undefined, { signal }).catch(() => undefined);
    // The quiet stretch right before a bulk re-price: Redis's commands at the load's own rate, its baseline.
    const repriceNext = faults.find((f) => f.spec.kind === "bulk-reprice" && f.atS === segment.endS);
    if (repriceNext) {
      const census = await redis.census(untilEnd);
      baselines.set(repriceNext.n, { seconds: census.seconds, total: Object.values(census.sent).reduce((sum, n) => sum + n, 0) });
    } else await untilEnd();
    const end = now();
    const stretch = epoch === null ? null : await judgeStretch(counters, epoch, { start, end }, { instances, policies, changes: prices.changes });
    rows.push({ ...segment, start, end, stretch });
    const p = probeFigures(prober.records, start, end);
    const state = segment.state === "fault" ? segment.active.map((f) => `#${f.n} ${describe(f.spec)}`).join(" + ") : segment.state;
    console.log(
      `${(start / 1000).toFixed(0)}–${(end / 1000).toFixed(0)} s ${state}: oracle ${JSON.stringify(p.statuses)}, cached p99 ${p.cachedP99} ms, cold p99 ${p.coldP99} ms${stretch ? `; origin ${stretch.ok === false ? "OVER" : "ok"} (worst ${stretch.worst})` : ""}`,
    );
  }
  const wrk = await load;
  if (wrk) console.log(`wrk: ${wrkLine(wrk, rate)}`);
  await Promise.all([prices.stop(), prober.stop(), visitors?.stop(), l1Samples.stop()]);
  await controls.undoAll();
  controls.timeline.closeAll(now());
  const herdResults = await Promise.all(herds);
  for (const [n, task] of repricing) if (!repriced.some((r) => r.fault === n)) repriced.push({ fault: n, run: await task });
  if (interrupted()) return;

  // The isolates after the load.
  const slots = await slotsFreed(targets);
  const work = await workSettled(targets);
  const heap = heapFlat(afterWarmup, await snapshots(fleet.workers, true));

  const { records, changes } = { records: prober.records, changes: prices.changes };
  const timeline = controls.timeline;
  const input: ChaosInput = {
    proberLagMax: prober.lagMax,
    rows,
    wrk,
    rate,
    timeline,
    records,
    changes,
    times,
    fresh: judgeFreshness(records, changes, timeline, times),
    failures: judgeAvailability(records, changes, timeline, times, l1Samples.samples),
    herds: herdResults,
    bulk: repriced.map(({ fault, run }) => ({
      fault,
      run,
      figures: repriceFigures(run, records, changes, {
        beforeMs: span.bulk.beforeS * 1000,
        afterMs: span.bulk.afterS * 1000,
        l2TimeoutMs: times.l2TimeoutMs,
        baseline: baselines.get(fault) ?? null,
      }),
    })),
    isolate: { logs: { ...logCounts }, heap, slots, work },
  };
  const tables = chaosTables(input);
  console.log(`\n${tables}`);

  const machine = describeMachine(toolVersions());
  const acked = changes.filter((c) => c.ackAt !== null).length;
  const markdown = [
    `# Chaos: ${minutes} minutes, seed ${seed}`,
    "",
    runLine("npm run bench:chaos", machine, startedAt),
    "",
    `${head}. Known-ids filter ${filter.built ? "built" : `NOT built (${filter.detail})`}; not rebuilt after Redis restarts (the tier fails open). ${timesLine}. The oracle: ${records.length} answers recorded, ${changes.length} price changes (${acked} purges acknowledged). Replay: \`npm run bench:chaos -- --minutes ${minutes} --seed ${seed}\`. The method: bench/chaos/README.md.`,
    "",
    "## Schedule (s from the load's start)",
    "",
    scheduleTable(faults),
    "",
    tables,
    "",
  ].join("\n");
  const json = {
    command,
    seed,
    minutes,
    startedAt: startedAt.toISOString(),
    machine,
    settings: { instances, rate, connections, departing, probeRate: PROBE_RATE, times, policies, tails },
    filter,
    schedule: faults,
    timeline: timeline.records,
    segments: rows.map(({ active, ...row }) => ({ ...row, active: active.map((f) => f.n), oracle: probeFigures(records, row.start, row.end) })),
    freshness: input.fresh.slice(0, 1000),
    freshnessCounts: { violation: input.fresh.filter((v) => v.excused === null).length, excused: input.fresh.filter((v) => v.excused !== null).length },
    failures: input.failures.slice(0, 1000),
    l1Samples: l1Samples.samples,
    failureCounts: input.failures.reduce<Record<string, number>>((c, f) => ((c[f.verdict] = (c[f.verdict] ?? 0) + 1), c), {}),
    priceChanges: changes,
    herds: herdResults,
    bulk: input.bulk,
    isolate: input.isolate,
  };
  const files = writeResults(results, { ".md": markdown, ".json": `${JSON.stringify(json, null, 2)}\n` });
  console.log(`\nresults: ${files.join(", ")}`);
}

run(main);
