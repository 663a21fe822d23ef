// `npm run bench:soak -- --flood departing|crawler|both`: does one isolate
// keep serving its cached pages while a flood of requests for uniform random
// products (nearly all misses) goes on? Two floods (issue 28):
//   departing  N Node connections, each in a closed loop: a request, left
//              1–30 ms after it was sent (a reset), then at once the next
//              (cancel.ts), connection i the client 10.3.0.(i+1);
//   crawler    wrk, N connections in a closed loop over uniform random
//              products (zipf.lua with s = 0), nobody leaving, 5 s timeout,
//              one client (10.2.0.1).
// Each run alone with the sampler, then beside a wrk Zipf load
// (`--flood-zipf`), a client per 4 of its connections (10.1.0.i): the worker
// names a client by `CF-Connecting-IP`, and the sampler, sending none, is
// one more (Miniflare's 127.0.0.1).
// Each on a fresh isolate (L2 emptied but for the known-ids filter, 100
// cached pages warmed into L1), a baseline phase without the flood, then the
// flood phase: a sampler times a cached page every 100 ms throughout; right
// after each phase the first cached pages are timed; Redis (MONITOR), the
// origin's counters, workerd's CPU and the worker's status tell what the
// flood cost and what was shed. With `--flood-profile`, the isolate's V8 CPU
// profile over each flood phase's load, summarised after its table. See
// bench/soak/README.md, "Floods".
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { benchmarkRun } from "../lib/cleanup";
import { cpuBetween, cpuSample, workerdPids } from "../lib/cpu";
import { RedisProbe } from "../../dev/harness/redisProbe";
import { SAMPLING_INTERVAL_US, startProfiler, summariseBundleProfile } from "../lib/cpuProfile";
import { summaryTables } from "../lib/cpuProfileSummary";
import { describeMachine, runLine, writeResults } from "../lib/report";
import { startStack, startWorkers, toolVersions, type Servers, type WorkerInstance, type WorkerLogs } from "../stack";
import { ensureWrk, runZipfWrk, Workload, type WrkFigures } from "../lib/wrk";
import { mulberry32 } from "../../dev/harness/random";
import { startDepartingFlood } from "./cancel";
import { change, countLogLine, countStatuses, get, numericChanges, percentile, snapshots, statusOf, type Answer, type LogCounts } from "../lib/probe";
import { floodTable, floodTargets, type FloodKind, type FloodPhase, type FloodRun, type SamplerFigures } from "./floodTables";

export interface FloodSettings {
  floods: FloodKind[];
  seconds: number;
  /** The flood's connections, per kind. */
  connections: Record<FloodKind, number>;
  /** wrk's connections of the Zipf load beside each flood's second run (0: no such run). */
  zipfConnections: number;
  /** Whether the departing visitors leave with a reset (workerd cancels their requests) or a plain close (it never hears of it). */
  departuresReported: boolean;
  /** The departing flood asks this path instead of random products (`/healthz`: what its requests cost the runtime alone); undefined: products. */
  departingPath?: string;
  catalog: number;
  origin: { latencyMs: number; jitterMs: number };
  /** Record the isolate's V8 CPU profile during each flood phase (not the baseline), summarised after the run's table. */
  profile: boolean;
  /** The results' file name in bench/results (without extension). */
  results: string;
}

/** The pages the sampler times: the hottest Zipf ranks, warmed into L1 first. */
const CACHED_PAGES = 100;
const SAMPLE_EVERY_MS = 100;
const SAMPLE_TIMEOUT_MS = 10_000;
/** Cached pages timed one after the other right after a phase. */
const RIGHT_AFTER = 5;
/** After a phase, the status is polled until no fill is in flight and no origin slot held, this long at most. */
const SETTLE_MAX_MS = 5000;
const CRAWLER_TIMEOUT_S = 5;
/** Functions listed in a flood phase's profile summary (by self time). */
const PROFILE_TOP = 20;
/** The departing flood's uniform draws; wrk's seeds are 1, 2... per phase. */
const SEED = 20_260_428;
/**
 * The clients (`CF-Connecting-IP`): the Zipf load's wrk thread i is
 * 10.1.0.i, the crawler 10.2.0.1 (both its threads), the departing flood's
 * connection i 10.3.0.(i+1). The sampler sends no header: Miniflare then
 * writes 127.0.0.1, a client of its own.
 */
const CLIENTS = { zipf: "10.1.0.", crawler: "10.2.0.1", departing: (i: number) => `10.3.0.${i + 1}` };
/** The Zipf load's connections per wrk thread, that is per client. */
const ZIPF_CONNECTIONS_PER_CLIENT = 4;

/** The Zipf load's wrk threads, each a client: one per ZIPF_CONNECTIONS_PER_CLIENT connections, 2 at least. */
const zipfClients = (zipfConnections: number) => Math.max(2, Math.floor(zipfConnections / ZIPF_CONNECTIONS_PER_CLIENT));

/**
 * Product paths drawn uniformly over the catalog's ranks, `except` left out
 * (drawn again), from `seed`: the departing flood's draws, and those of the
 * soak's `--departing` visitors.
 */
export function uniformPaths(workload: Workload, seed: number, except: readonly number[] = []): () => string {
  const random = mulberry32(seed);
  return () => {
    for (;;) {
      const rank = 1 + Math.floor(random() * workload.catalogSize);
      if (!except.includes(rank)) return `/products/${workload.idOfRank(rank)}`;
    }
  };
}

type Cleanups = Pick<ReturnType<typeof benchmarkRun>, "onCleanup" | "signal" | "interrupted">;

interface Context {
  settings: FloodSettings;
  cleanups: Cleanups;
  servers: Servers;
  redis: RedisProbe;
  workload: Workload;
  logs: WorkerLogs;
  logCounts: LogCounts;
  nextSeed: () => number;
}

export async function runFloods(settings: FloodSettings, cleanups: Cleanups): Promise<void> {
  ensureWrk();
  const startedAt = new Date();
  const { onCleanup, interrupted } = cleanups;
  const logCounts: LogCounts = { unhandled: 0, io: 0, crossRequest: 0 };
  const logs: WorkerLogs = { count: 0, distinct: new Map(), scenario: "floods", onLine: (line) => countLogLine(logCounts, line) };
  const { connections: c, seconds } = settings;
  console.log(
    `soak floods: ${settings.floods.map((kind) => `${kind} (${c[kind]} connections)`).join(", ")}, ${seconds} s each phase, 1 instance; ` +
      `origin ${settings.origin.latencyMs} ± ${settings.origin.jitterMs} ms, ${settings.catalog.toLocaleString("en-US")} products` +
      (settings.profile ? "; the isolate's CPU profile recorded over each flood phase" : ""),
  );
  const { servers, filter } = await startStack({ catalogSize: settings.catalog, ...settings.origin }, onCleanup);
  console.log(filter.built ? `known-ids filter built in ${filter.seconds} s` : `known-ids filter NOT built (${filter.detail})`);
  const redis = await RedisProbe.connect(servers.redisPort);
  onCleanup("redis probe", async () => redis.close());
  const dir = mkdtempSync(join(tmpdir(), "soak-floods-"));
  process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
  // Every product in the paths file (no cold ranks): the crawler draws from all of them.
  const workload = new Workload(dir, settings.catalog, CACHED_PAGES, 0);
  let seed = 0;
  const ctx: Context = { settings, cleanups, servers, redis, workload, logs, logCounts, nextSeed: () => ++seed };

  const plan: { kind: FloodKind; zipf: number }[] = settings.floods.flatMap((kind) =>
    settings.zipfConnections > 0
      ? [
          { kind, zipf: 0 },
          { kind, zipf: settings.zipfConnections },
        ]
      : [{ kind, zipf: 0 }],
  );
  const runs: FloodRun[] = [];
  for (const step of plan) {
    if (interrupted()) return;
    const run = await floodRun(ctx, step.kind, step.zipf);
    runs.push(run);
    console.log(`\n${floodTable(run)}\n`);
    console.log(`${floodTargets(run)}\n`);
    if (run.profile) console.log(`${profileHeading(run)}\n\n${run.profile}\n`);
  }

  const machine = describeMachine(toolVersions());
  const errorLines = [...logs.distinct]
    .filter(([line]) => /error|warn|uncaught|exception|cannot/i.test(line))
    .sort((a, b) => b[1] - a[1])
    .slice(0, 10);
  for (const [line, count] of errorLines) console.log(`worker log ${count}× ${line.slice(0, 300)}`);
  const markdown = [
    `# Soak floods: ${runs.map((r) => r.title).join("; ")}`,
    "",
    `${runLine("npm run bench:soak", machine, startedAt)} · Node ${machine.node}`,
    "",
    `Origin ${settings.origin.latencyMs} ± ${settings.origin.jitterMs} ms, ${settings.catalog.toLocaleString("en-US")} products; one isolate per run, ` +
      `L2 emptied but for the known-ids filter (${filter.built ? "built" : `NOT built: ${filter.detail}`}), the ${CACHED_PAGES} hottest products warmed into L1. ` +
      `Each phase ${seconds} s; the sampler asks for one of those ${CACHED_PAGES} pages every ${SAMPLE_EVERY_MS} ms (${SAMPLE_TIMEOUT_MS / 1000} s timeout). ` +
      "Per flood request: the flood phase's count minus the baseline's scaled to the same wall time, over the flood's requests. " +
      (settings.profile ? "The flood phases ran under the V8 profiler (their figures include its cost; the baselines did not). " : "") +
      'Method: bench/soak/README.md, "Floods".',
    "",
    ...runs.flatMap((run) => [
      `## ${run.title}`,
      "",
      floodTable(run),
      "",
      floodTargets(run),
      "",
      ...(run.profile ? [`### ${profileHeading(run)}`, "", run.profile, ""] : []),
    ]),
    ...(errorLines.length
      ? ["Worker log (errors and warnings, distinct lines):", "", ...errorLines.map(([line, n]) => `- ${n}× \`${line.slice(0, 400).replace(/`/g, "'")}\``), ""]
      : []),
  ].join("\n");
  const raw = {
    command: ["npm run bench:soak --", ...process.argv.slice(2)].join(" "),
    startedAt,
    machine,
    settings,
    cachedPages: CACHED_PAGES,
    sampleEveryMs: SAMPLE_EVERY_MS,
    filter,
    runs,
    workerLog: errorLines,
  };
  const files = writeResults(settings.results, { ".md": markdown, ".json": JSON.stringify(raw, null, 2) });
  console.log(`results: ${files.join(", ")}`);
}

/** One flood on a fresh isolate: warm the cached pages, a baseline phase, the flood phase. */
async function floodRun(ctx: Context, kind: FloodKind, zipfConnections: number): Promise<FloodRun> {
  const { settings, servers, workload, logs, cleanups } = ctx;
  const connections = settings.connections[kind];
  const beside = zipfConnections ? `, beside wrk -c${zipfConnections} Zipf (${zipfClients(zipfConnections)} clients)` : "";
  const title =
    kind === "departing"
      ? `departing flood, ${connections} connections${settings.departuresReported ? "" : ", departures not reported"}${settings.departingPath ? `, asking ${settings.departingPath}` : ""}${beside}`
      : `crawler, ${connections} connections${beside}`;
  logs.scenario = title;
  console.log(`\n${title}: warming ${CACHED_PAGES} pages, then ${settings.seconds} s baseline, ${settings.seconds} s flood`);
  await servers.resetL2();
  // With its inspector only when profiled.
  const { workers, stop } = await startWorkers(1, servers.bindings, logs, cleanups.onCleanup, settings.profile);
  const target = workers[0]!.url;
  try {
    const paths = workload.walkPaths();
    const warm: Answer[] = [];
    for (let i = 0; i < paths.length; i += 10) warm.push(...(await Promise.all(paths.slice(i, i + 10).map((p) => get(`${target}${p}`, 30_000)))));
    const warmStatuses = countStatuses(warm);
    if (warm.some((a) => a.status !== 200)) console.log(`warm-up: not every cached page answered 200: ${JSON.stringify(warmStatuses)}`);
    const { figures: baseline } = await phase(ctx, target, "baseline", null, zipfConnections, null);
    const { figures: flood, profile } = await phase(ctx, target, "flood", kind, zipfConnections, settings.profile ? workers[0]! : null);
    return { title, kind, connections, zipfConnections, seconds: settings.seconds, warmStatuses, baseline, flood, profile };
  } finally {
    await stop();
  }
}

/** The heading of a run's profile summary. */
const profileHeading = (run: FloodRun) =>
  `CPU profile of the isolate, flood phase of "${run.title}" (sampling every ${SAMPLING_INTERVAL_US} µs over the load; the profiler slows that phase)`;

/**
 * One phase: the sampler, the flood if any, the Zipf load if any; then the
 * cached pages right after, and what it all cost. `profiled`: the worker
 * whose V8 profiler records over the load (from before the sampler starts
 * until the flood's sockets are closed), summarised as `profile`.
 */
async function phase(
  ctx: Context,
  target: string,
  label: FloodPhase["label"],
  flood: FloodKind | null,
  zipfConnections: number,
  profiled: WorkerInstance | null,
): Promise<{ figures: FloodPhase; profile: string | null }> {
  const { settings, servers, workload, cleanups, logCounts } = ctx;
  const worker = [{ url: target }];
  const [before] = await snapshots(worker);
  await servers.origin.resetCounters();
  await servers.resetRedisStats();
  const logsBefore = { ...logCounts };
  const roots = () => ({ workerd: [...workerdPids()], servers: [servers.pid] });
  const cpuBefore = cpuSample(roots());
  let loadS = 0;
  let samples: Promise<(Answer & { atMs: number })[]> = Promise.resolve([]);
  const rightAfter: Answer[] = [];
  let settled: FloodPhase["settled"] = "n/a";
  let departing: FloodPhase["departing"] = null;
  let crawler: WrkFigures | null = null;
  let zipf: WrkFigures | null = null;
  let profile: string | null = null;
  const census = await ctx.redis.census(async () => {
    const profiler = profiled ? await startProfiler(profiled) : null;
    const closeProfiler = profiler ? cleanups.onCleanup("profiler", async () => profiler.close()) : null;
    const sampler = startSampler(target, workload.walkPaths());
    const stopSampler = cleanups.onCleanup("sampler", async () => void sampler.stop());
    const products = uniformPaths(workload, SEED + ctx.nextSeed());
    const { departingPath } = settings;
    const uniformPath = departingPath ? () => departingPath : products;
    const leaving =
      flood === "departing" ? startDepartingFlood(target, uniformPath, settings.connections.departing, settings.departuresReported, CLIENTS.departing) : null;
    const stopLeaving = leaving ? cleanups.onCleanup("departing flood", () => leaving.stop()) : null;
    const wrk = (connections: number, uniform: boolean) =>
      runZipfWrk({
        targets: [target],
        seconds: settings.seconds,
        connections,
        seed: ctx.nextSeed(),
        pathsFile: workload.zipfFile,
        signal: cleanups.signal,
        // Counted by code: the 429s (a client over its share) apart from the 503s (the isolate shedding).
        byCode: true,
        ...(uniform ? { s: 0, timeoutS: CRAWLER_TIMEOUT_S, clients: CLIENTS.crawler } : { threads: zipfClients(connections), clients: CLIENTS.zipf }),
      });
    const started = performance.now();
    // wrk's -d counts from its threads' start, a moment after the spawn: the phase ends when wrk does (both, beside Zipf).
    [zipf, crawler] = await Promise.all([
      zipfConnections ? wrk(zipfConnections, false) : null,
      flood === "crawler" ? wrk(settings.connections.crawler, true) : null,
      sleep(settings.seconds * 1000, undefined, { signal: cleanups.signal }),
    ]);
    loadS = (performance.now() - started) / 1000;
    samples = sampler.stop();
    await stopSampler();
    if (leaving && stopLeaving) {
      await stopLeaving();
      departing = { ...leaving.counts, clients: leaving.clients };
    }
    // Stopped before the right-after pages: the profile's transfer must not delay them.
    if (profiler && closeProfiler) {
      try {
        profile = summaryTables(summariseBundleProfile(await profiler.stop()), PROFILE_TOP);
      } finally {
        await closeProfiler();
      }
    }
    // Right after: the first cached pages, one after the other.
    for (let i = 0; i < RIGHT_AFTER; i++) rightAfter.push(await get(`${target}${workload.walkPaths()[i]}`, SAMPLE_TIMEOUT_MS));
    settled = await settle(target);
  });
  const cpu = cpuBetween(cpuBefore, cpuSample(roots()));
  const origin = await servers.origin.counters();
  const redisCalls = await servers.redisCalls();
  const [after] = await snapshots(worker);
  const moved = change(before!, after!);
  const raw = (s: typeof before) => s?.status as Record<string, unknown> | null | undefined;
  const section = (key: string) => (raw(after)?.[key] === undefined ? null : numericChanges(raw(before)?.[key], raw(after)?.[key]));
  const sampled = await samples;
  const figures: FloodPhase = {
    label,
    wallS: cpu.wallS,
    loadS: Math.round(loadS * 10) / 10,
    sampler: samplerFigures(sampled),
    samples: sampled.map((s) => [Math.round(s.atMs), s.status, s.ms]),
    rightAfter: { ms: rightAfter.map((a) => a.ms), statuses: countStatuses(rightAfter) },
    settled,
    departing,
    crawler,
    zipf,
    redisSent: census.sent,
    redisInScripts: Object.values(census.inScripts).reduce((n, k) => n + k, 0),
    redisCalls,
    origin,
    cpu: { workerdS: cpu.seconds.workerd ?? 0, harnessS: cpu.seconds.harness ?? 0, othersS: cpu.seconds.others ?? 0 },
    status: {
      tiers: moved.tiers,
      workerOrigin: moved.workerOrigin,
      l2: moved.l2,
      slots: moved.slots,
      overload: section("overload"),
      fills: section("fills"),
    },
    logs: {
      unhandled: logCounts.unhandled - logsBefore.unhandled,
      io: logCounts.io - logsBefore.io,
      crossRequest: logCounts.crossRequest - logsBefore.crossRequest,
    },
  };
  return { figures, profile };
}

/** A cached page every SAMPLE_EVERY_MS, whatever the last one is doing (each on its own socket); `stop()` (idempotent) ends it and gives every answer. */
function startSampler(target: string, paths: string[]) {
  const answers: Promise<Answer & { atMs: number }>[] = [];
  const started = performance.now();
  const timer = setInterval(() => {
    const atMs = performance.now() - started;
    answers.push(get(`${target}${paths[answers.length % paths.length]}`, SAMPLE_TIMEOUT_MS).then((a) => ({ ...a, atMs })));
  }, SAMPLE_EVERY_MS);
  let all: Promise<(Answer & { atMs: number })[]> | undefined;
  return {
    stop() {
      clearInterval(timer);
      all ??= Promise.all(answers);
      return all;
    },
  };
}

/** ms until the worker has no fill in flight and no origin slot held or queued (polled every 100 ms, SETTLE_MAX_MS at most). */
async function settle(target: string): Promise<FloodPhase["settled"]> {
  const started = performance.now();
  while (performance.now() - started < SETTLE_MAX_MS) {
    const status = await statusOf(target);
    if (!status?.fills || !status.originSlots) return "n/a";
    if (status.fills.inFlight === 0 && status.originSlots.inUse === 0 && status.originSlots.queued === 0) return Math.round(performance.now() - started);
    await sleep(100);
  }
  return "busy";
}

function samplerFigures(answers: Answer[]): SamplerFigures {
  const ms = answers.map((a) => a.ms).sort((a, b) => a - b);
  return {
    n: answers.length,
    p50Ms: percentile(ms, 50),
    p99Ms: percentile(ms, 99),
    maxMs: ms.at(-1) ?? 0,
    failures: answers.filter((a) => a.status !== 200).length,
    statuses: countStatuses(answers),
  };
}
