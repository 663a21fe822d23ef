// `npm run bench:soak [-- --minutes N] [--instances 1|2] [--connections N] [--departing N] [--rounds] [--policies JSON] [--profile-windows 8,14]`:
// do one or two isolates hold up under minutes of Zipf traffic, with visitors
// who close their connection mid-request? wrk makes the load, in windows; this
// file sets up (bench/stack.ts), sends the herd, the cancellers and the cold
// products, reads each instance's status and heap after every window, and
// prints one row per window, then pass/fail checks. With `--departing N`, N
// departing visitors (the departing flood's loops, cancel.ts) run beside wrk
// for the whole soak. See bench/README.md, "Soak".
// With `--flood departing|crawler|both` it runs the flood scenarios instead (flood.ts).
// The instances share one location cache; `--restart-at S` restarts every
// isolate S seconds into the load (a redeploy), `--location-off-at S` restarts
// them with the location tier off (restart.ts, phases.ts).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import { benchmarkRun } from "../lib/cleanup";
import { cpuBetween, cpuSample, workerdPids } from "../lib/cpu";
import { describeMachine, writeResults } from "../lib/report";
import { SAMPLING_INTERVAL_US, startProfiler, summariseBundleProfile } from "../lib/cpuProfile";
import { summaryTables } from "../lib/cpuProfileSummary";
import { loadPrices, pricesNote } from "../lib/cost";
import { RedisProbe } from "../lib/redis";
import { startStack, toolVersions, type WorkerInstance, type WorkerLogs } from "../stack";
import { ZipfSampler } from "../../dev/run/random";
import { startCancellers, startDepartingVisitors } from "./cancel";
import { runFloods, uniformPaths } from "./flood";
import { change, countLogLine, countStatuses, get, herd as sendHerd, snapshots, percentile, statusOf, type LogCounts } from "../lib/probe";
import { lineChartSvg } from "../lib/chart";
import { departingText, pagesOf, tableHead, tableRow, type Window } from "./report";
import { ensureWrk, runZipfWrk, Workload, type WrkFigures } from "../lib/wrk";
import { groupFigures, phaseGroups, phaseTable, phaseTargets, probeTable } from "./phases";
import { probeLocation, startFleet, type LocationProbe } from "./restart";

const CATALOG = 100_000;
const ORIGIN = { latencyMs: 20, jitterMs: 2 };
const HERD = { requests: 1000, rank: 1 };
/** The tail's last ranks: left out of every draw, so they are still cold when the load is over. */
const COLD_RANKS = [99_996, 99_997, 99_998, 99_999, 100_000];
/** Cancellers: this share of wrk's last rate, at most CAP a second (START before wrk has a rate). */
const CANCEL = { share: 0.05, cap: 50, start: 10 };
const HEAP_LIMIT_MB = 96;
/** The cold products must answer 200 within this long, right after the load. */
const COLD_MS = 1000;
/** The seed of the cancellers' Zipf draws. */
const ZIPF_SEED = 20_260_426;
/** Pages the location probe asks for right after a restart: the hottest Zipf ranks (in the location, in no new L1). */
const PROBE_PAGES = 40;
/** The seed of the `--departing` visitors' uniform draws. */
const DEPARTING_SEED = ZIPF_SEED + 2;

/**
 * The two modes: minutes of 30 s windows with cancellers, or the bug report's
 * four 10 s rounds. `period`: windows per throughput figure of the checks (a minute; a round).
 */
const PLANS = {
  soak: (minutes: number) => ({
    windowS: 30,
    windows: 2 * minutes,
    period: 2,
    cancellers: true,
    label: (i: number) => `${Math.floor((i + 1) / 2)}:${(i + 1) % 2 ? "30" : "00"}`,
  }),
  rounds: () => ({ windowS: 10, windows: 4, period: 1, cancellers: false, label: (i: number) => `round ${i + 1}` }),
};

const { values: args } = parseArgs({
  options: {
    minutes: { type: "string", default: "10" },
    instances: { type: "string", default: "1" },
    connections: { type: "string", default: "64" },
    // Departing visitors beside wrk for the whole soak: N closed loops, each request left 1–30 ms after it was sent (0: none).
    departing: { type: "string", default: "0" },
    rounds: { type: "boolean", default: false },
    // The worker's CACHE_POLICIES, as a shop would set it, e.g. '{"product":{"ttl":3600}}'.
    policies: { type: "string" },
    // Windows (1-based) during which instance 1's V8 profiler records, e.g. one before and one after the products' first TTL.
    "profile-windows": { type: "string" },
    // The flood scenarios (flood.ts) instead of the soak: departing, crawler or both.
    flood: { type: "string" },
    "flood-seconds": { type: "string", default: "15" },
    // Both floods' connections (default: departing 8, crawler 32).
    "flood-connections": { type: "string" },
    // wrk's connections of the Zipf load beside the departing flood's second run (0: no second run).
    "flood-zipf": { type: "string", default: "16" },
    // The isolate's V8 CPU profile over each flood phase (not the baselines), summarised after the run's table.
    "flood-profile": { type: "boolean", default: false },
    // Results written as bench/results/<name>-<suffix>.* (e.g. a smoke run that must not overwrite the committed figures).
    "results-suffix": { type: "string" },
    // The location tier on (the instances share one Cache API folder); off otherwise, as in every benchmark (bench/stack.ts says why).
    location: { type: "boolean", default: false },
    // Seconds into the load (multiples of 30, comma-separated) at which every isolate is stopped and started again (a redeploy).
    "restart-at": { type: "string" },
    // Seconds into the load (a multiple of 30) at which every isolate is restarted with LOCATION_CACHE=off, for the rest of the run.
    "location-off-at": { type: "string" },
    help: { type: "boolean", short: "h", default: false },
  },
});
const minutes = Number(args.minutes);
const instances = Number(args.instances);
const connections = Number(args.connections);
const departingConnections = Number(args.departing);
const resultsSuffix = args["results-suffix"] === undefined ? "" : `-${args["results-suffix"]}`;
const profileWindows = (args["profile-windows"] ?? "").split(",").filter(Boolean).map(Number);
const restartAt = (args["restart-at"] ?? "").split(",").filter(Boolean).map(Number);
const locationOffAt = args["location-off-at"] === undefined ? null : Number(args["location-off-at"]);
/** Restarts fall between windows, before the load's end; turning the location tier off needs it on first. */
const restartsValid =
  (locationOffAt === null || args.location) &&
  [...restartAt, ...(locationOffAt === null ? [] : [locationOffAt])].every(
    (s) => !args.rounds && Number.isInteger(s) && s > 0 && s % 30 === 0 && s < minutes * 60,
  );
const FLOODS = { departing: ["departing"], crawler: ["crawler"], both: ["departing", "crawler"] } as const;
const floods = args.flood === undefined ? null : (FLOODS[args.flood as keyof typeof FLOODS] ?? []);
const floodSeconds = Number(args["flood-seconds"]);
const floodConnections = args["flood-connections"] === undefined ? null : Number(args["flood-connections"]);
const floodZipf = Number(args["flood-zipf"]);
const floodsValid =
  floods === null ||
  (floods.length > 0 &&
    Number.isInteger(floodSeconds) &&
    floodSeconds >= 1 &&
    floodSeconds <= 120 &&
    (floodConnections === null || (Number.isInteger(floodConnections) && floodConnections >= 2 && floodConnections <= 256)) &&
    Number.isInteger(floodZipf) &&
    (floodZipf === 0 || (floodZipf >= 2 && floodZipf <= 256)));
const policiesValid =
  args.policies === undefined ||
  (() => {
    try {
      return typeof JSON.parse(args.policies) === "object";
    } catch {
      return false;
    }
  })();
if (
  args.help ||
  !Number.isInteger(minutes) ||
  minutes < 1 ||
  ![1, 2].includes(instances) ||
  !Number.isInteger(connections) ||
  connections < 2 ||
  !Number.isInteger(departingConnections) ||
  departingConnections < 0 ||
  departingConnections > 256 ||
  (departingConnections > 0 && floods !== null) ||
  (args["flood-profile"] && floods === null) ||
  !/^[A-Za-z0-9_-]*$/.test(args["results-suffix"] ?? "") ||
  !policiesValid ||
  !profileWindows.every((n) => Number.isInteger(n) && n >= 1) ||
  !restartsValid ||
  !floodsValid
) {
  (args.help ? console.log : console.error)(
    "usage: npm run bench:soak -- [--minutes N (≥ 1, default 10)] [--instances 1|2] [--connections N (≥ 2, default 64)] [--departing N (0–256 departing visitors beside wrk, default 0)] [--rounds] [--policies JSON (CACHE_POLICIES)] [--profile-windows 8,14 (1-based)] [--location] [--restart-at S,S… (multiples of 30 s)] [--location-off-at S (with --location)] [--results-suffix NAME]\n" +
      "       npm run bench:soak -- --flood departing|crawler|both [--flood-seconds N (1–120, default 15)] [--flood-connections N (2–256; default departing 8, crawler 32)] [--flood-zipf N (wrk connections beside the departing flood's second run, default 16; 0: no such run)] [--flood-profile] [--results-suffix NAME]",
  );
  process.exit(args.help ? 0 : 2);
}
const mode = args.rounds ? "rounds" : "soak";
const plan = args.rounds ? PLANS.rounds() : PLANS.soak(minutes);

const { onCleanup, interrupted, run, signal } = benchmarkRun("soak");

/** One wrk run: `seconds` of Zipf traffic, thread i on instance i. */
async function runWrk(targets: string[], seconds: number, seed: number, pathsFile: string): Promise<WrkFigures> {
  const abort = new AbortController();
  const stop = onCleanup("wrk", async () => abort.abort());
  try {
    return await runZipfWrk({ targets, seconds, connections, seed, pathsFile, signal: abort.signal });
  } finally {
    await stop();
  }
}

const snapshot = (workers: WorkerInstance[]) => snapshots(workers, true);

async function main(): Promise<void> {
  ensureWrk();
  const startedAt = new Date();
  const command = ["npm run bench:soak", ...(process.argv.length > 2 ? ["--", ...process.argv.slice(2)] : [])].join(" ");
  const logCounts: LogCounts = { unhandled: 0, io: 0, crossRequest: 0 };
  const logs: WorkerLogs = {
    count: 0,
    distinct: new Map(),
    scenario: mode,
    onLine: (line) => countLogLine(logCounts, line),
  };
  console.log(
    `soak (${mode}): ${instances} instance(s), wrk -t2 -c${connections}${departingConnections ? ` + ${departingConnections} departing connections` : ""}, ${plan.windows} × ${plan.windowS} s; origin ${ORIGIN.latencyMs} ± ${ORIGIN.jitterMs} ms, ${CATALOG.toLocaleString("en-US")} products${args.policies ? `; CACHE_POLICIES ${args.policies}` : ""}`,
  );

  // Set-up: bundle and servers at once, the known-ids filter, the instances with their inspectors.
  const { servers, filter } = await startStack({ catalogSize: CATALOG, ...ORIGIN }, onCleanup);
  // The instances share one location cache, as two isolates of one data center do.
  const fleet = await startFleet(
    instances,
    { ...servers.bindings, LOCATION_CACHE: args.location ? "on" : "off", ...(args.policies ? { CACHE_POLICIES: args.policies } : {}) },
    logs,
    onCleanup,
  );
  const workers = fleet.workers;
  const redis = await RedisProbe.connect(servers.redisPort);
  onCleanup("redis census", async () => redis.close());
  console.log(filter.built ? `known-ids filter built in ${filter.seconds} s` : `known-ids filter NOT built (${filter.detail})`);
  const targets = workers.map((w) => w.url);

  const dir = mkdtempSync(join(tmpdir(), "soak-"));
  // On exit, whoever exits: Miniflare's own SIGINT hook may end the process before the cleanups do.
  process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
  // Zipf ranks → product paths (the shared shuffle: the same hot products), the cold ranks left out.
  const workload = new Workload(dir, CATALOG, 0, COLD_RANKS.length);
  const pathsFile = workload.zipfFile;
  const pathOf = (rank: number) => `/products/${workload.idOfRank(rank)}`;

  // The herd: 1,000 requests at once for one cold product.
  const first = await snapshot(workers);
  await servers.origin.resetCounters();
  const herdId = workload.idOfRank(HERD.rank);
  const { answers: herdAnswers } = await sendHerd(targets, `/products/${herdId}`, HERD.requests);
  await sleep(1000);
  const herdMs = herdAnswers.map((a) => a.ms).sort((a, b) => a - b);
  const herd = {
    id: herdId,
    statuses: countStatuses(herdAnswers),
    p50Ms: percentile(herdMs, 50),
    maxMs: herdMs.at(-1) ?? 0,
    originFetches: await servers.origin.countsOf(herdId),
  };
  const herdLine = `herd: ${HERD.requests} requests for ${herdId} (rank ${HERD.rank}) at once: ${JSON.stringify(herd.statuses)}, p50 ${herd.p50Ms} ms, max ${herd.maxMs} ms; origin fetches ${JSON.stringify(herd.originFetches)}`;
  console.log(herdLine);

  // The windows.
  const sampler = new ZipfSampler({ n: CATALOG, s: 1.0, seed: ZIPF_SEED + 1 });
  const nextPath = () => {
    for (;;) {
      const rank = sampler.next();
      if (!COLD_RANKS.includes(rank)) return pathOf(rank);
    }
  };
  const cancellers = plan.cancellers ? startCancellers(targets, nextPath, CANCEL.start) : null;
  if (cancellers) onCleanup("cancellers", () => cancellers.stop());
  // The departing visitors: the departing flood's loops over uniform products (the cold ranks left out), spread over the instances.
  const departing = departingConnections ? startDepartingVisitors(targets, uniformPaths(workload, DEPARTING_SEED, COLD_RANKS), departingConnections) : null;
  if (departing) onCleanup("departing visitors", () => departing.stop());
  await servers.origin.resetCounters();
  await servers.resetRedisStats();
  const windows: Window[] = [];
  let before = await snapshot(workers);
  let cpuBefore = cpuSample({ workerd: [...workerdPids()], servers: [servers.pid] });
  let logsBefore = { ...logCounts };
  const loadStart = Date.now();
  console.log(`\n${tableHead(departing !== null)}`);
  const profiles: { label: string; tables: string }[] = [];
  const probes: { label: string; probe: LocationProbe }[] = [];
  let location: "on" | "off" = args.location ? "on" : "off";
  let restartedAtWindow = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < plan.windows && !interrupted(); i++) {
    const atS = i * plan.windowS;
    const redisBefore = await redis.snapshot();
    // What the restart and the probe sent to Redis (the new isolates' first purge-log read...) counts in the window after them.
    let restartCensus: { sent: Record<string, number>; sentByKey: Record<string, number>; bytes: number } = { sent: {}, sentByKey: {}, bytes: 0 };
    if (restartAt.includes(atS) || locationOffAt === atS) {
      // A redeploy: every workerd process stopped and started again on its port; Redis and the location folder stay.
      location = locationOffAt === atS ? "off" : location;
      const tier = location;
      restartCensus = await redis.census(async () => {
        const ms = await fleet.restart(tier);
        const probe = await probeLocation(
          targets,
          Array.from({ length: PROBE_PAGES }, (_, k) => pathOf(k + 1)),
          tier === "on" ? "pp-location" : "pp-l2",
        );
        probes.push({ label: `${atS} s (tier ${tier})`, probe });
        console.log(`restarted every isolate at ${atS} s (tier ${tier}) in ${ms} ms; probe: ${JSON.stringify(probe)}`);
      });
      restartedAtWindow = i;
      // The new isolates' counters start at 0, and their processes are new.
      [before, cpuBefore] = [await snapshot(workers), cpuSample({ workerd: [...workerdPids()], servers: [servers.pid] })];
    }
    const profiler = profileWindows.includes(i + 1) ? await startProfiler(workers[0]!) : null;
    let wrk: WrkFigures | undefined;
    const census = await redis.census(async () => void (wrk = await runWrk(targets, plan.windowS, i + 1, pathsFile)));
    const redisAfter = await redis.snapshot();
    if (!wrk) throw new Error("wrk gave no figures");
    const added = (a: Record<string, number>, b: Record<string, number>) => {
      const sum = { ...a };
      for (const [name, n] of Object.entries(b)) sum[name] = (sum[name] ?? 0) + n;
      return sum;
    };
    if (profiler) profiles.push({ label: plan.label(i), tables: summaryTables(summariseBundleProfile(await profiler.stop()), 15) });
    const endS = Math.round((Date.now() - loadStart) / 1000);
    const cancel = cancellers?.take() ?? null;
    const leaving = departing?.take();
    const after = await snapshot(workers);
    const cpuAfter = cpuSample({ workerd: [...workerdPids()], servers: [servers.pid] });
    const origin = await servers.origin.counters();
    await servers.origin.resetCounters();
    const redisCalls = await servers.redisCalls();
    await servers.resetRedisStats();
    const used = cpuBetween(cpuBefore, cpuAfter);
    const cores = (role: "workerd" | "others") => (used.seconds[role] ?? 0) / used.wallS;
    const e = wrk.errors;
    const window: Window = {
      label: plan.label(i),
      endS,
      rps: wrk.requests / (wrk.durationUs / 1e6),
      p50Ms: Math.round(wrk.p50Us / 100) / 10,
      p99Ms: Math.round(wrk.p99Us / 100) / 10,
      maxMs: Math.round(wrk.maxUs / 1000),
      statuses: wrk.statuses,
      socketErrors: e.connect + e.read + e.write,
      timeouts: e.timeout,
      cancel,
      ...(leaving ? { departing: leaving } : {}),
      originRequests: origin.total,
      originByService: origin.services,
      redisCalls,
      redisSent: added(census.sent, restartCensus.sent),
      redisSentByKey: added(census.sentByKey, restartCensus.sentByKey),
      redisBytes: Math.max(
        0,
        redisAfter.netInBytes - redisBefore.netInBytes + redisAfter.netOutBytes - redisBefore.netOutBytes - census.bytes - restartCensus.bytes,
      ),
      phase: { location, afterRestart: i - restartedAtWindow < 60 / plan.windowS, restarts: probes.length },
      instances: workers.map((_, k) => change(before[k]!, after[k]!)),
      logs: {
        unhandled: logCounts.unhandled - logsBefore.unhandled,
        io: logCounts.io - logsBefore.io,
        crossRequest: logCounts.crossRequest - logsBefore.crossRequest,
      },
      cpu: { workerd: cores("workerd"), others: cores("others") },
    };
    windows.push(window);
    console.log(tableRow(window));
    cancellers?.setRate(Math.min(CANCEL.cap, CANCEL.share * window.rps));
    [before, cpuBefore, logsBefore] = [after, cpuAfter, { ...logCounts }];
  }
  await Promise.all([cancellers?.stop(), departing?.stop()]);
  if (interrupted()) return;

  // After the load: until no origin slot is held (polled every 250 ms, 10 s at most), then cold products.
  const drainStart = Date.now();
  let slotsFreeMs: number | null = null;
  let slotsKnown = true;
  while (Date.now() - drainStart < 10_000) {
    const slots = (await Promise.all(targets.map(statusOf))).map((s) => s?.originSlots);
    if (slots.some((s) => s === undefined)) {
      slotsKnown = false;
      break;
    }
    if (slots.every((s) => s!.inUse === 0)) {
      slotsFreeMs = Date.now() - drainStart;
      break;
    }
    await sleep(250);
  }
  const slotsText = !slotsKnown ? "n/a (no originSlots in the status)" : slotsFreeMs === null ? "still in use after 10 s" : `${slotsFreeMs} ms`;
  console.log(`\norigin limiter slots in use → 0 after the load: ${slotsText}`);
  await servers.origin.resetCounters();
  const cold = [];
  for (const [i, rank] of COLD_RANKS.entries()) {
    const id = workload.idOfRank(rank);
    cold.push({ id, rank, ...(await get(`${targets[i % targets.length]}/products/${id}`, 30_000)) });
  }
  const coldOrigin = await Promise.all(cold.map((c) => servers.origin.countsOf(c.id)));
  const coldRows = cold.map((c, i) => `| ${c.id} | ${c.rank} | ${c.status || "no answer"} | ${c.ms} | ${coldOrigin[i]!.product ?? 0} |`);
  const coldTable = ["| cold product | rank | status | ms | origin product fetches |", "| --- | ---: | ---: | ---: | ---: |", ...coldRows].join("\n");
  console.log(`\n${coldTable}`);
  const last = await snapshot(workers);

  // Checks.
  const fivexx =
    windows.reduce((n, w) => n + (w.statuses["5xx"] ?? 0), 0) + herdAnswers.filter((a) => a.status >= 500).length + cold.filter((c) => c.status >= 500).length;
  const periods: number[] = [];
  // Pages served well (2xx) per second: fast 503s must not pass for throughput.
  const okPerS = (w: Window) => (w.rps * (w.statuses["2xx"] ?? 0)) / Math.max(1, pagesOf(w));
  for (let i = 0; i < windows.length; i += plan.period)
    periods.push(windows.slice(i, i + plan.period).reduce((n, w) => n + okPerS(w), 0) / windows.slice(i, i + plan.period).length);
  const heapVerdicts = workers.map((_, k) => {
    const changes = windows.map((w) => w.instances[k]!);
    if (changes.length === 0 || changes.some((c) => c.heap === null || c.l1MB === null)) return { ok: null, text: "n/a" };
    // L1 grows by design up to its cap: growth is judged on the heap held beyond it.
    const beyondL1 = changes.map((c) => Math.round((c.heap!.afterGcMB - c.l1MB!) * 10) / 10);
    // The limit is for what is held (after GC); the heap found before it is shown, not judged (V8 collects lazily).
    const [peakKept, peakFound] = [Math.max(...changes.map((c) => c.heap!.afterGcMB)), Math.max(...changes.map((c) => c.heap!.usedMB))];
    const peaks = `peak ${peakKept} MB after GC (${peakFound} MB found)`;
    // Window 1 is the warm-up; with fewer than 3 windows there is nothing to compare the last one with.
    if (beyondL1.length < 3) return { ok: peakKept < HEAP_LIMIT_MB ? null : false, text: `too short to judge growth; ${peaks}` };
    const reference = Math.max(...beyondL1.slice(1, -1));
    const last = beyondL1.at(-1)!;
    return {
      ok: last <= Math.max(reference * 1.1, reference + 2) && peakKept < HEAP_LIMIT_MB,
      text: `beyond L1: last ${last} MB vs ≤ ${reference} MB in windows 2..n−1; ${peaks}`,
    };
  });
  const l2Skipped = workers.map((_, k) => change(first[k]!, last[k]!).l2?.skipped ?? null);
  // Breaker state changes from before the herd to after the cold products: exact with `breakerTransitions`,
  // else the breakers whose last change (`breakerChanges`) fell in that time (any that changed at all).
  const breakers = workers.map((_, k) => change(first[k]!, last[k]!).breakers);
  const departingTotal = departing?.total() ?? null;
  const verdict = (ok: boolean | null) => (ok === null ? "n/a" : ok ? "pass" : "FAIL");
  const checks = [
    ["no 5xx (herd, wrk, cold)", String(fivexx), verdict(fivexx === 0)],
    ['no unhandled_error / "Cannot perform I/O" log lines', `${logCounts.unhandled} / ${logCounts.io}`, verdict(logCounts.unhandled + logCounts.io === 0)],
    // Expected, not a fault: a request that waited on another's fill or slot
    // was cancelled by its visitor, and workerd drops its continuation.
    ["workerd's \"resolved from a different request context\" warnings (a cancelled waiter's continuation dropped)", String(logCounts.crossRequest), "info"],
    [
      `heap flat after warm-up, below ${HEAP_LIMIT_MB} MB`,
      heapVerdicts.map((h) => h.text).join(" · "),
      verdict(heapVerdicts.some((h) => h.ok === null) ? null : heapVerdicts.every((h) => h.ok)),
    ],
    [
      `last ${plan.period * plan.windowS} s 2xx/s ≥ 0.9 × the best ${plan.period * plan.windowS} s`,
      `${Math.round(periods.at(-1) ?? 0)} vs ${Math.round(Math.max(...periods))}`,
      verdict(periods.length > 1 ? periods.at(-1)! >= 0.9 * Math.max(...periods) : null),
    ],
    ["limiter slots 0 within 2 s after the load", slotsText, verdict(!slotsKnown ? null : slotsFreeMs !== null && slotsFreeMs <= 2000)],
    [
      `cold products answer 200 within ${COLD_MS / 1000} s, right after the load`,
      cold.map((c) => `${c.status || "none"} in ${c.ms} ms`).join(", "),
      verdict(cold.every((c) => c.status === 200 && c.ms <= COLD_MS)),
    ],
    [
      "no breaker opened (state changes of any breaker, herd to cold products)",
      breakers.map((b) => (b === null ? "n/a" : `${b.exact ? "" : "≥"}${b.count}${b.names.length ? ` (${b.names.join(", ")})` : ""}`)).join(" · "),
      verdict(breakers.some((b) => b === null) ? null : breakers.every((b) => b!.count === 0)),
    ],
    [
      "L2 reads skipped by the breaker = 0",
      l2Skipped.map((n) => n ?? "n/a").join(" · "),
      verdict(l2Skipped.some((n) => n === null) ? null : l2Skipped.every((n) => n === 0)),
    ],
    ...(departingTotal ? [["departing visitors: sent / left in flight / left unsent / answered (by status)", departingText(departingTotal), "info"]] : []),
  ];
  const checksTable = ["| check | value | verdict |", "| --- | --- | --- |", ...checks.map((c) => `| ${c.join(" | ")} |`)].join("\n");
  console.log(`\n${checksTable}`);
  // The location tier: phases (on / off, steady / the minute after a restart), the probes, issue 31's targets.
  const prices = loadPrices();
  const phases = phaseGroups(windows).map((group) => groupFigures(group, prices));
  const locationTargets = phaseTargets(phases, probes);
  const locationText = [
    phaseTable(phases),
    ...(probes.length ? ["", probeTable(probes)] : []),
    "",
    ["| issue 31 target | value | verdict |", "| --- | --- | --- |", ...locationTargets.map((c) => `| ${c.join(" | ")} |`)].join("\n"),
  ].join("\n");
  console.log(`\n${locationText}`);
  const errorLines = [...logs.distinct]
    .filter(([line]) => /error|warn|uncaught|exception|cannot|origin_failure|slow_page/i.test(line))
    .sort((a, b) => b[1] - a[1])
    .slice(0, 10);
  for (const [line, count] of errorLines) console.log(`worker log ${count}× ${line.slice(0, 300)}`);

  // Files: Markdown, SVG, JSON.
  const name = `${args.rounds ? "soak-rounds" : "soak"}${resultsSuffix}`;
  const machine = describeMachine(toolVersions());
  const title = `Soak (${mode}): ${instances} instance(s), ${connections} connections${departingConnections ? ` + ${departingConnections} departing` : ""}, ${plan.windows} × ${plan.windowS} s`;
  const subtitle = `${machine.cpu}, ${machine.cores} cores · commit ${machine.git?.commit ?? "?"} (${machine.git?.dirtyFiles ?? "?"} uncommitted files in src/, templates/) · ${startedAt.toISOString()}`;
  const markdown = [
    `# ${title}`,
    "",
    `\`${command}\` · ${subtitle} · Node ${machine.node}, workerd ${machine.versions.workerd}, miniflare ${machine.versions.miniflare}`,
    "",
    `Origin ${ORIGIN.latencyMs} ± ${ORIGIN.jitterMs} ms, ${CATALOG.toLocaleString("en-US")} products, Zipf(1.0); known-ids filter ${filter.built ? "built" : `NOT built (${filter.detail})`}.` +
      (plan.cancellers
        ? ` Cancellers: ${CANCEL.share * 100}% of the last window's wrk rate (at most ${CANCEL.cap}/s), each closed 1–30 ms after it was sent.`
        : " No cancellers.") +
      (departingConnections
        ? ` Departing visitors: ${departingConnections} connections spread over the instances, each a closed loop of requests for uniform products (the cold ones left out), each left (a reset) 1–30 ms after it was sent.`
        : ""),
    "",
    `${herdLine}.`,
    "",
    tableHead(departing !== null),
    ...windows.map((w) => tableRow(w)),
    "",
    `![req/s and p99 per window](${name}.svg)`,
    "",
    `Origin limiter slots in use → 0 after the load: ${slotsText}.`,
    "",
    coldTable,
    "",
    checksTable,
    "",
    "## The location tier: phases, probes, targets",
    "",
    locationText,
    "",
    `${pricesNote(prices)} Workers CPU is workerd's process CPU per page (the runtime's own work included), as bench:peers counts it.`,
    "",
    ...profiles.flatMap(({ label, tables }) => [
      `## CPU profile of instance 1, window ending ${label} (sampling every ${SAMPLING_INTERVAL_US} µs; the profiler slows that window)`,
      "",
      tables,
      "",
    ]),
    ...(errorLines.length
      ? [
          "Worker log (errors and warnings, distinct lines):",
          "",
          ...errorLines.map(([line, count]) => `- ${count}× \`${line.slice(0, 400).replace(/`/g, "'")}\``),
          "",
        ]
      : []),
  ].join("\n");
  const raw = {
    command,
    startedAt,
    machine,
    settings: {
      mode,
      instances,
      connections,
      departing: departingConnections,
      plan: { windowS: plan.windowS, windows: plan.windows },
      origin: ORIGIN,
      catalog: CATALOG,
      cancel: CANCEL,
      restartAt,
      locationOffAt,
    },
    filter,
    herd,
    windows,
    slotsFreeMs: slotsKnown ? slotsFreeMs : "n/a",
    cold,
    checks,
    location: { restartAt, locationOffAt, probes, phases, targets: locationTargets },
    workerLog: errorLines,
  };
  const files = writeResults(name, { ".md": markdown, ".svg": lineChartSvg(title, subtitle, windows), ".json": JSON.stringify(raw, null, 2) });
  console.log(`\nresults: ${files.join(", ")}`);
}

/** The floods' connections when `--flood-connections` does not say. */
const FLOOD_CONNECTIONS = { departing: 8, crawler: 32 };

run(
  floods
    ? () =>
        runFloods(
          {
            floods: [...floods],
            seconds: floodSeconds,
            connections: { departing: floodConnections ?? FLOOD_CONNECTIONS.departing, crawler: floodConnections ?? FLOOD_CONNECTIONS.crawler },
            zipfConnections: floodZipf,
            catalog: CATALOG,
            origin: ORIGIN,
            profile: args["flood-profile"],
            results: `soak-floods${resultsSuffix}`,
          },
          { onCleanup, interrupted, signal },
        )
    : main,
);
