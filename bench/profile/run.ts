// `npm run bench:profile [-- --seconds N] [--warm N] [--instances 1|2]`: where
// the worker's CPU goes under the steady Zipf mix, next to its floor.
//
// The deployed bundle in workerd (bench/stack.ts), the demo origin (100,000
// products, 20 ± 2 ms) and Redis behind the gateway; wrk makes all the load.
// After a warm-up of Zipf(1.0) traffic it runs, with the same connections:
//   1. /healthz (a static string): the runtime's floor, workerd CPU per request;
//   2. the hottest page's bytes and headers from a worker of nothing else
//      (./constantPage.ts): the floor of a cached page;
//   3. cached: Zipf over the HOT_RANKS hottest products only, every page in L1
//      and in the rendered-page cache: what the read path costs on top of the floor;
//   4. Zipf: CPU per page, Redis commands per page (INFO commandstats), answers per tier;
//   5. the row named by --profile (Zipf by default) again, with the V8 profiler
//      of instance 1 recording (bench/lib/cpuProfileSummary.ts).
// Writes bench/results/profile.md (and the raw profile.cpuprofile, git-ignored,
// which Chrome DevTools opens). Measures and writes; asserts nothing.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseCommandLine } from "../../dev/cli";
import { benchmarkRun } from "../lib/cleanup";
import { oneOf, wholeNumber } from "../lib/flagValues";
import { cpuBetween, cpuSample, workerdPids } from "../lib/cpu";
import { describeMachine, runLine, writeResults } from "../lib/report";
import { change, snapshots } from "../lib/probe";
import { startStack, startWorkers, toolVersions, type WorkerLogs } from "../stack";
import { ensureWrk, runZipfWrk, Workload, type WrkFigures } from "../lib/wrk";
import { bundleInclusiveMs, SAMPLING_INTERVAL_US, startProfiler, summariseBundleProfile } from "../lib/cpuProfile";
import { summaryTables } from "../lib/cpuProfileSummary";
import { startConstantPage } from "./constantPage";

const CATALOG = 100_000;
/** The cached row's products: few enough that every page stays rendered in each isolate (8 MiB ≈ 800 pages). */
const HOT_RANKS = 300;
const ORIGIN = { latencyMs: 20, jitterMs: 2 };

const COMMAND = "npm run bench:profile";
const PROFILED_ROWS = ["zipf", "cached"] as const;

const USAGE = `${COMMAND}: where the worker's CPU goes under the Zipf mix, next to its floor (bench/profile/README.md).
The deployed bundle in workerd, the demo origin (${CATALOG.toLocaleString("en-US")} products, ${ORIGIN.latencyMs} ± ${ORIGIN.jitterMs} ms) and Redis behind the gateway;
after a warm-up of Zipf traffic, wrk runs with the same connections: /healthz (the runtime's floor), the hottest page
served as a constant (a cached page's floor), the ${HOT_RANKS} hottest products only (every page in L1), the Zipf mix (CPU,
Redis calls and tiers a page), then one of those rows again under the V8 profiler of instance 1.
Writes bench/results/profile.md (and profile.cpuprofile). Needs redis-server; installs wrk when missing.

usage: ${COMMAND} -- [options]
  --seconds N           seconds of each row, 1 or more (default 20)
  --warm N              seconds of Zipf before the rows, 1 or more (default 60)
  --instances 1|2       worker instances, each its own isolate (default 1)
  --connections N       wrk's connections, 1 or more (default 64)
  --profile zipf|cached  the row run again under the profiler: the Zipf mix or the cached one (default zipf)
  -h, --help            this text

example: ${COMMAND} -- --seconds 10 --warm 30 --profile cached`;

const { values: args } = parseCommandLine(COMMAND, USAGE, {
  options: {
    seconds: { type: "string", default: "20" },
    warm: { type: "string", default: "60" },
    instances: { type: "string", default: "1" },
    connections: { type: "string", default: "64" },
    profile: { type: "string", default: "zipf" },
    help: { type: "boolean", short: "h", default: false },
  },
});
const seconds = wholeNumber(COMMAND, "--seconds", args.seconds, 1);
const warmS = wholeNumber(COMMAND, "--warm", args.warm, 1);
const instances = wholeNumber(COMMAND, "--instances", args.instances, 1, 2);
const connections = wholeNumber(COMMAND, "--connections", args.connections, 1);
const profiledRow = oneOf(COMMAND, "--profile", args.profile, PROFILED_ROWS);

const { onCleanup, run } = benchmarkRun("profile");

interface Phase {
  label: string;
  wrk: WrkFigures;
  /** workerd CPU-seconds over the run. */
  cpuS: number;
  /** Redis calls during the run, by command. */
  redis: Record<string, number>;
  /** Resource answers by tier, summed over the instances (null if a status could not say). */
  tiers: { l1: number; l2: number; origin: number; failed: number } | null;
  /** Product pages instance 1 answered (the one profiled; null if its status could not say). */
  firstPages: number | null;
}

async function main(): Promise<void> {
  ensureWrk();
  const startedAt = new Date();
  const logs: WorkerLogs = { count: 0, distinct: new Map(), scenario: "profile" };
  console.log(
    `profile: ${instances} instance(s), wrk -t2 -c${connections}; warm-up ${warmS} s, then ${seconds} s each of /healthz, Zipf, Zipf under the profiler`,
  );
  const { servers, filter } = await startStack({ catalogSize: CATALOG, ...ORIGIN }, onCleanup);
  const { workers } = await startWorkers(instances, servers.bindings, logs, onCleanup, true);
  const targets = workers.map((w) => w.url);

  const dir = mkdtempSync(join(tmpdir(), "profile-"));
  process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
  const workload = new Workload(dir, CATALOG, HOT_RANKS);
  const zipfPaths = workload.zipfFile;
  const cachedPaths = workload.cachedFile;
  const healthzPaths = workload.single("/healthz");

  let seed = 1;
  const wrk = (pathsFile: string, s: number) => {
    const abort = new AbortController();
    const stop = onCleanup("wrk", async () => abort.abort());
    return runZipfWrk({ targets, seconds: s, connections, seed: seed++, pathsFile, signal: abort.signal }).finally(stop);
  };

  console.log(`warm-up: ${warmS} s of Zipf`);
  const warm = await wrk(zipfPaths, warmS);
  console.log(`  ${Math.round(warm.requests / (warm.durationUs / 1e6))} req/s`);

  const phase = async (label: string, pathsFile: string): Promise<Phase> => {
    const before = await snapshots(workers);
    await servers.resetRedisStats();
    const cpuBefore = cpuSample({ workerd: [...workerdPids()], servers: [servers.pid] });
    const figures = await wrk(pathsFile, seconds);
    const cpuAfter = cpuSample({ workerd: [...workerdPids()], servers: [servers.pid] });
    const redis = await servers.redisCalls();
    const after = await snapshots(workers);
    const moved = workers.map((_, k) => change(before[k]!, after[k]!));
    const changes = moved.map((m) => m.tiers);
    const tiers = changes.some((t) => t === null)
      ? null
      : changes.reduce<Phase["tiers"] & object>(
          (sum, t) => ({ l1: sum.l1 + t!.l1, l2: sum.l2 + t!.l2, origin: sum.origin + t!.origin, failed: sum.failed + t!.failed }),
          { l1: 0, l2: 0, origin: 0, failed: 0 },
        );
    const firstPages = moved[0]!.pages;
    const result = { label, wrk: figures, cpuS: cpuBetween(cpuBefore, cpuAfter).seconds.workerd ?? 0, redis, tiers, firstPages };
    console.log(
      `  ${label}: ${Math.round(rps(result))} req/s, p50 ${msOfUs(figures.p50Us)} ms, p99 ${msOfUs(figures.p99Us)} ms, ${(cpuPerRequestMs(result)).toFixed(3)} workerd CPU-ms per request`,
    );
    return result;
  };
  /**
   * The hottest product's page, its bytes and headers, from a worker that
   * returns them as a constant (./constantPage.ts): the floor of a cached
   * page. Its CPU is its own workerd's; the tier's isolates sit idle.
   */
  const constantPhase = async (pageUrl: string): Promise<Phase> => {
    const page = await startConstantPage(pageUrl, instances);
    const stop = onCleanup("constant page", page.close);
    try {
      const label = `the same page as a constant (${Math.round(page.bytes / 102.4) / 10} KB, ${page.headers} headers; no tier)`;
      const cpuBefore = cpuSample({ workerd: page.pids });
      const figures = await runZipfWrk({ targets: page.urls, seconds, connections, seed: seed++, pathsFile: workload.single(new URL(pageUrl).pathname) });
      const cpuAfter = cpuSample({ workerd: page.pids });
      const result = { label, wrk: figures, cpuS: cpuBetween(cpuBefore, cpuAfter).seconds.workerd ?? 0, redis: {}, tiers: null, firstPages: null };
      console.log(`  ${label}: ${Math.round(rps(result))} req/s, ${cpuPerRequestMs(result).toFixed(3)} workerd CPU-ms per request`);
      return result;
    } finally {
      await stop();
    }
  };
  const healthz = await phase("/healthz", healthzPaths);
  const constant = await constantPhase(`${targets[0]}/products/${workload.hotId()}`);
  const cached = await phase(`cached (${HOT_RANKS} hottest)`, cachedPaths);
  const zipf = await phase("Zipf", zipfPaths);

  const [profiledLabel, profiledPaths] = profiledRow === "cached" ? [cached.label, cachedPaths] : [zipf.label, zipfPaths];
  console.log(`${profiledLabel} under the profiler (instance 1)`);
  const profiler = await startProfiler(workers[0]!);
  onCleanup("inspector", async () => profiler.close());
  const profiled = await phase(`${profiledLabel}, profiled`, profiledPaths);
  const profile = await profiler.stop();
  const summary = summariseBundleProfile(profile);
  const renderMs = bundleInclusiveMs(profile, RENDER_ENTRY);

  // Report.
  const machine = describeMachine(toolVersions());
  const floor = cpuPerRequestMs(healthz);
  const rows = [healthz, constant, cached, zipf, profiled].map((p) => {
    const pages = p.wrk.requests;
    const redisTotal = Object.values(p.redis).reduce((a, b) => a + b, 0);
    const t = p.tiers;
    const answers = t ? t.l1 + t.l2 + t.origin + t.failed : 0;
    const split = t && answers ? `${pct(t.l1, answers)} / ${pct(t.l2, answers)} / ${pct(t.origin, answers)}` : "–";
    return `| ${p.label} | ${Math.round(rps(p))} | ${msOfUs(p.wrk.p50Us)} | ${msOfUs(p.wrk.p99Us)} | ${nonOk(p.wrk)} | ${cpuPerRequestMs(p).toFixed(3)} | ${(cpuPerRequestMs(p) / floor).toFixed(2)}× | ${(redisTotal / pages).toFixed(3)} | ${split} |`;
  });
  const perCommand = Object.entries(zipf.redis)
    .sort((a, b) => b[1] - a[1])
    .map(([command, calls]) => `${command} ${(calls / zipf.wrk.requests).toFixed(3)}`)
    .join(", ");
  const markdown = [
    `# Where the worker's CPU goes: ${instances} instance(s), ${connections} connections, Zipf(1.0) over ${CATALOG.toLocaleString("en-US")} products`,
    "",
    runLine("npm run bench:profile", machine, startedAt),
    "",
    `Origin ${ORIGIN.latencyMs} ± ${ORIGIN.jitterMs} ms; known-ids filter ${filter.built ? "built" : "NOT built"}; warm-up ${warmS} s of Zipf (${Math.round(warm.requests / (warm.durationUs / 1e6))} req/s); then ${seconds} s per row, wrk -t2 -c${connections}. CPU is workerd's, from /proc, over the row's run (all instances); ÷ wrk's requests. The machine is shared: compare rows of this run, not runs.`,
    "",
    "| load | req/s | p50 ms | p99 ms | non-2xx | workerd CPU-ms / request | ÷ /healthz | Redis calls / request | answers l1 / l2 / origin |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ...rows,
    "",
    `Redis calls per page in the Zipf row, by command (INFO commandstats; commands run inside a script are counted as well as the script): ${perCommand || "none"}.`,
    "",
    `## Profile of instance 1 (sampling every ${SAMPLING_INTERVAL_US} µs, during the profiled row)`,
    "",
    summaryTables(summary),
    "",
    renderLine(renderMs, profiled.firstPages, floor),
    "",
    `Raw profile: \`profile.cpuprofile\` (not committed; open it in Chrome DevTools → Performance).`,
  ].join("\n");
  const files = writeResults("profile", { ".md": markdown, ".cpuprofile": JSON.stringify(profile) });
  console.log(`\n${markdown}\n\nresults: ${files.join(", ")}`);
}

/** The product page's render: view model, templates and what they call (src/render/index.ts). */
const RENDER_ENTRY = "renderProductPage";

/**
 * The render's CPU per page: the samples of instance 1 with RENDER_ENTRY on
 * the stack (its inclusive time, built-ins and garbage collection it set off
 * included) over the pages that instance answered in the profiled row, pages
 * kept rendered included (they cost no render), against the floor's CPU per
 * request (issue 30's render target).
 */
function renderLine(renderMs: number, pages: number | null, floorMs: number): string {
  const head = `Render, inclusive: ${Math.round(renderMs)} ms of samples with \`${RENDER_ENTRY}\` on the stack`;
  if (!pages) return `${head}; the instance's page count is not known.`;
  const perPageMs = renderMs / pages;
  return `${head}, over the ${pages.toLocaleString("en-US")} pages instance 1 answered: ${(perPageMs * 1000).toFixed(1)} µs a page, ${(perPageMs / floorMs).toFixed(2)}× the floor's CPU per request.`;
}

const rps = (p: Phase) => p.wrk.requests / (p.wrk.durationUs / 1e6);
const cpuPerRequestMs = (p: Phase) => (1000 * p.cpuS) / Math.max(1, p.wrk.requests);
/** Microseconds (wrk's unit) as milliseconds to one decimal. */
const msOfUs = (us: number) => Math.round(us / 100) / 10;
const pct = (n: number, of: number) => `${Math.round((100 * n) / of)}%`;
/** Answers other than 2xx and wrk's time-outs, with their kinds ("0", or "12: 4xx 10, timeout 2"). */
const nonOk = (w: WrkFigures) => {
  const kinds = [...Object.entries(w.statuses).filter(([c]) => c !== "2xx"), ["timeout", w.errors.timeout] as const].filter(([, n]) => n > 0);
  const total = kinds.reduce((n, [, c]) => n + c, 0);
  return total === 0 ? "0" : `${total}: ${kinds.map(([kind, n]) => `${kind} ${n}`).join(", ")}`;
};

run(main);
