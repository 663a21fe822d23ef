// `npm run bench:soak [-- --minutes N] [--instances 1|2] [--connections N] [--departing N] [--rounds] [--policies JSON] [--profile-windows 8,14]`:
// do one or two isolates hold up under minutes of Zipf traffic, with visitors
// who close their connection mid-request? wrk makes the load, in windows; this
// file sets up (bench/stack.ts), sends the herd, the cancellers and the cold
// products, reads each instance's status and heap after every window, and
// prints one row per window, then pass/fail checks. With `--departing N`, N
// departing visitors (the departing flood's loops, cancel.ts) run beside wrk
// for the whole soak. See bench/soak/README.md.
// With `--flood departing|crawler|both` it runs the flood scenarios instead (flood.ts).
// The instances share one location cache; `--restart-at S` restarts every
// isolate S seconds into the load (a redeploy), `--location-off-at S` restarts
// them with the location tier off (restart.ts, phases.ts).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { ZipfSampler } from "../../dev/harness/random";
import { benchmarkRun } from "../lib/cleanup";
import { loadPrices } from "../lib/cost";
import { cpuBetween, cpuSample, workerdPids } from "../lib/cpu";
import { startProfiler, summariseBundleProfile } from "../lib/cpuProfile";
import { summaryTables } from "../lib/cpuProfileSummary";
import { change, countLogLine, countStatuses, herd as sendHerd, percentile, snapshots, type LogCounts } from "../lib/probe";
import { RedisProbe } from "../../dev/harness/redisProbe";
import { ensureWrk, runZipfWrk, Workload, type WrkFigures } from "../lib/wrk";
import { startStack, type WorkerInstance, type WorkerLogs } from "../stack";
import { coldProducts, slotsFreed } from "./afterLoad";
import { startCancellers, startDepartingVisitors } from "./cancel";
import { soakChecks } from "./checks";
import { writeSoakFiles } from "./files";
import { runFloods, uniformPaths } from "./flood";
import { locationSection } from "./phases";
import { CANCEL, CATALOG, COLD_RANKS, DEPARTING_SEED, FLOOD_CONNECTIONS, HERD, ORIGIN, PROBE_PAGES, PROBE_WARM_PAGES, soakOptions, ZIPF_SEED } from "./plan";
import { tableHead, tableRow, type Window } from "./windowTable";
import { probeLocation, startFleet, type LocationProbe } from "./restart";
import { startRecorder } from "../../dev/fleet/recorder";
import { checkFleetView, FLEET_VIEW_TOLERANCE, type FleetViewCheck } from "./fleetView";

/** The soak's own token for its fleet recorder. */
const RECORDER_TOKEN = "soak-fleet-token";
/** A data point reaches the recorder within its binding's flush (100 ms) and a POST: waited for before the count. */
const FLEET_DELIVERY_MS = 1000;

const options = soakOptions();
const { args, mode, plan, instances, connections, departingConnections, profileWindows, restartAt, locationOffAt, redisRttMs, rate, resultsSuffix } = options;
const { floods, floodSeconds, floodConnections, floodZipf } = options;

const { onCleanup, interrupted, run, signal } = benchmarkRun("soak");

/** One wrk run: `seconds` of Zipf traffic, thread i on instance i. */
async function runWrk(targets: string[], seconds: number, seed: number, pathsFile: string): Promise<WrkFigures> {
  const abort = new AbortController();
  const stop = onCleanup("wrk", async () => abort.abort());
  try {
    return await runZipfWrk({ targets, seconds, connections, seed, pathsFile, rate: rate ?? undefined, signal: abort.signal });
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
    `soak (${mode}): ${instances} instance(s), wrk -t2 -c${connections}${rate ? ` paced at ${rate} req/s` : ""}${departingConnections ? ` + ${departingConnections} departing connections` : ""}, ${plan.windows} × ${plan.windowS} s; origin ${ORIGIN.latencyMs} ± ${ORIGIN.jitterMs} ms, ${CATALOG.toLocaleString("en-US")} products${redisRttMs ? `; every Redis call held ${redisRttMs} ms` : ""}${args.policies ? `; CACHE_POLICIES ${args.policies}` : ""}`,
  );

  // Set-up: bundle and servers at once, the known-ids filter, the instances with their inspectors.
  const { servers, filter } = await startStack({ catalogSize: CATALOG, ...ORIGIN, redisLatencyMs: redisRttMs }, onCleanup);
  // The instances share one location cache, as two isolates of one data center do.
  // The instances' FLEET binding delivers to a local recorder: after the load, the fleet view is held against their status pages.
  const recorder = args["no-fleet"] ? null : await startRecorder({ port: 0, token: RECORDER_TOKEN });
  if (recorder) onCleanup("fleet recorder", () => recorder.close());
  const fleet = await startFleet(
    instances,
    { ...servers.bindings, LOCATION_CACHE: args.location ? "on" : "off", ...(args.policies ? { CACHE_POLICIES: args.policies } : {}) },
    logs,
    onCleanup,
    recorder?.pointsUrl,
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
          Array.from({ length: PROBE_WARM_PAGES }, (_, k) => pathOf(PROBE_PAGES + k + 1)),
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
    if (rate && wrk.late > 0) {
      console.log(`${plan.label(i)}: ${wrk.late} sends left late (up to ${Math.round(wrk.lateMaxMs)} ms): the isolates did not keep up with --rate ${rate}`);
    }
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
      // Paced, wrk's duration holds the schedule's start and the last answers' wait.
      rps: wrk.requests / (rate ? plan.windowS : wrk.durationUs / 1e6),
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

  // After the load: until no origin slot is held, then the cold products.
  const slots = await slotsFreed(targets);
  console.log(`\norigin limiter slots in use → 0 after the load: ${slots.slotsText}`);
  const { cold, coldTable } = await coldProducts(targets, workload, servers);
  console.log(`\n${coldTable}`);
  const last = await snapshot(workers);

  const checks = soakChecks({ windows, herdAnswers, cold, logCounts, first, last, slots, departingTotal: departing?.total() ?? null, plan });
  // What npm run fleet says of the instances together, against their status pages (after the deliveries' last batch).
  let fleetView: FleetViewCheck | null = null;
  if (recorder && probes.length === 0) {
    await sleep(FLEET_DELIVERY_MS);
    fleetView = await checkFleetView(
      { url: recorder.sqlUrl, token: RECORDER_TOKEN },
      Math.ceil((Date.now() - startedAt.getTime()) / 1000) + 60,
      (await snapshots(workers)).map((s) => s.status),
      recorder.points(),
    );
    console.log(`\nthe fleet view (npm run fleet) against the status pages summed:\n${fleetView.table}`);
    checks.push([
      `the fleet view within ${FLEET_VIEW_TOLERANCE * 100}% of the status pages summed (figures of 1,000 or more)`,
      fleetView.rows.map(([name, , , ratio]) => `${name} ${ratio === null ? "—" : ratio.toFixed(3)}`).join(", "),
      fleetView.pass ? "pass" : "FAIL",
    ]);
  }
  const checksTable = ["| check | value | verdict |", "| --- | --- | --- |", ...checks.map((c) => `| ${c.join(" | ")} |`)].join("\n");
  console.log(`\n${checksTable}`);
  const prices = loadPrices();
  const locationReport = locationSection(windows, probes, prices, args.location ? await fleet.location() : null);
  console.log(`\n${locationReport.text}`);
  const errorLines = [...logs.distinct]
    .filter(([line]) => /error|warn|uncaught|exception|cannot|origin_failure|slow_page/i.test(line))
    .sort((a, b) => b[1] - a[1])
    .slice(0, 10);
  for (const [line, count] of errorLines) console.log(`worker log ${count}× ${line.slice(0, 300)}`);

  const files = writeSoakFiles(options, {
    command,
    startedAt,
    filter,
    herd,
    herdLine,
    windows,
    departing: departing !== null,
    slots,
    cold,
    coldTable,
    checks,
    checksTable,
    probes,
    location: locationReport,
    prices,
    profiles,
    errorLines,
    fleetView,
  });
  console.log(`\nresults: ${files.join(", ")}`);
}

run(
  floods
    ? () =>
        runFloods(
          {
            floods: [...floods],
            seconds: floodSeconds,
            connections: { departing: floodConnections ?? FLOOD_CONNECTIONS.departing, crawler: floodConnections ?? FLOOD_CONNECTIONS.crawler },
            zipfConnections: floodZipf,
            departuresReported: options.departuresReported,
            departingPath: options.departingPath,
            catalog: CATALOG,
            origin: ORIGIN,
            profile: args["flood-profile"],
            results: `soak-floods${resultsSuffix}`,
          },
          { onCleanup, interrupted, signal },
        )
    : main,
);
