// `npm run bench:fleet [-- --sizes 1,2,4,8,16] [--rate 80] [--warm 60] [--steady 60] [--after-deploy 60] [--departing 4]`:
// what grows with the number of isolates. For each size, the soak's stack
// (real Redis behind the Upstash REST gateway, the demo origin) and that many
// workerd isolates sharing one data center's location cache, under the same
// paced Zipf load in all (with departing visitors), from the same start (L2
// emptied but for the known-ids filter, a new location cache):
//   1. the fleet's first pages (what new isolates read from Redis), a warm-up,
//      then a steady stretch: Redis commands and bytes a second and a page,
//      by purpose, and origin fetches a page;
//   2. a deploy (every isolate restarted): what the new isolates read before
//      and during their first pages, the commands of the minute after against
//      a steady minute's, and how long until a window is back to steady;
//   3. a bulk re-price (chaos/reprice.ts) and a purge storm with the reach of
//      its purges at every isolate; a herd for a cold product across all of
//      them. The model (model.ts) takes the figures to a fleet of thousands.
// See bench/fleet/README.md.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { ZipfSampler } from "../../dev/harness/random";
import { member } from "../../dev/harness/cacheStatus";
import { RedisProbe } from "../../dev/harness/redisProbe";
import { PAGE_RESOURCES } from "../../src/origin/resources";
import { bulkReprice } from "../chaos/reprice";
import { benchmarkRun } from "../lib/cleanup";
import { type Answer, countLogLine, countStatuses, get, herd, type LogCounts, percentile, statusOf } from "../lib/probe";
import { describeMachine, runLine, writeResults } from "../lib/report";
import { ensureWrk, runZipfWrk, Workload } from "../lib/wrk";
import { startCancellers } from "../soak/cancel";
import { CATALOG, ORIGIN } from "../soak/plan";
import { startFleet } from "../soak/restart";
import { startStack, toolVersions, type WorkerLogs } from "../stack";
import { measure, purgeStorm, type Usage, windows } from "./measure";
import { COLD_PAGES, COLD_RANKS, DEPLOY_WINDOW_S, fleetOptions, HERD_REQUESTS, STEADY_FACTOR } from "./plan";
import { fleetReport, type SizeResult } from "./report";

const options = fleetOptions();
const { onCleanup, run, signal } = benchmarkRun("fleet");

async function main(): Promise<void> {
  ensureWrk();
  const startedAt = new Date();
  const logCounts: LogCounts = { unhandled: 0, io: 0, crossRequest: 0 };
  const logs: WorkerLogs = { count: 0, distinct: new Map(), scenario: "fleet", onLine: (line) => countLogLine(logCounts, line) };
  const { servers, filter } = await startStack({ catalogSize: CATALOG, ...ORIGIN }, onCleanup);
  const redis = await RedisProbe.connect(servers.redisPort);
  onCleanup("redis census", async () => redis.close());
  console.log(filter.built ? `known-ids filter built in ${filter.seconds} s` : `known-ids filter NOT built (${filter.detail})`);

  const dir = mkdtempSync(join(tmpdir(), "fleet-"));
  process.once("exit", () => rmSync(dir, { recursive: true, force: true }));
  const workload = new Workload(dir, CATALOG, 0, COLD_RANKS);
  const leaving = new ZipfSampler({ n: CATALOG - COLD_RANKS, s: 1, seed: options.seed + 1 });
  const departingPath = () => `/products/${workload.idOfRank(leaving.next())}`;
  // The storm's products: warm ones (ranks 21-60), so that every isolate holds them when they are purged.
  const stormIds = Array.from({ length: 40 }, (_, i) => workload.idOfRank(21 + i));
  const results: SizeResult[] = [];

  for (const [index, size] of options.sizes.entries()) {
    if (signal.aborted) break;
    console.log(`\n== ${size} isolate(s)`);
    await servers.resetL2();
    const fleet = await startFleet(size, { ...servers.bindings, LOCATION_CACHE: "on" }, logs, onCleanup);
    const targets = fleet.workers.map((w) => w.url);
    const threads = Math.max(2, size);
    const load = (seconds: number, seed: number) =>
      runZipfWrk({ targets, seconds, connections: Math.max(16, threads * 2), rate: options.rate, seed, pathsFile: workload.zipfFile, threads, signal });
    const onePageEach = async (id: string) => {
      const answers = await Promise.all(targets.map((t) => get(`${t}/products/${id}`, 10_000)));
      await sleep(2000);
      return countStatuses(answers);
    };

    // 1. First pages, warm-up, steady.
    const firstStart = await measure(redis, servers.origin, () => onePageEach(workload.idOfRank(1)));
    const departing = startCancellers(targets, departingPath, options.departing);
    const warm = await load(options.warmS, options.seed + 10 * index);
    console.log(`warm-up: ${warm.requests} pages, p99 ${(warm.p99Us / 1000).toFixed(1)} ms`);
    departing.take();
    let steadyPages = 0;
    let steadyWindows: number[] = [];
    const steady = await measure(redis, servers.origin, async () => {
      const running = load(options.steadyS, options.seed + 10 * index + 1);
      steadyWindows = await windows(redis, DEPLOY_WINDOW_S, running);
      const figures = await running;
      steadyPages = figures.requests + departing.take().sent;
      console.log(`steady: ${figures.requests} pages, p99 ${(figures.p99Us / 1000).toFixed(1)} ms, errors ${JSON.stringify(figures.errors)}`);
    });
    console.log(`steady: ${steady.commands} commands (${(steady.commands / steadyPages).toFixed(3)} a page) ${JSON.stringify(steady.byPurpose)}`);

    // What the isolates made of the location tier so far (warm-up and steady): parts looked up, served, turned down and why.
    const verdicts: Record<string, number> = {};
    for (const status of await Promise.all(targets.map(statusOf)))
      for (const [name, n] of Object.entries(status?.location?.stats ?? {})) verdicts[name] = (verdicts[name] ?? 0) + n;

    // 2. A deploy.
    await departing.stop();
    const restartMs = await fleet.restart("on");
    const deployFirst = await measure(redis, servers.origin, () => onePageEach(workload.idOfRank(2)));
    const departingAgain = startCancellers(targets, departingPath, options.departing);
    let deployPages = 0;
    let deployWindows: number[] = [];
    const deploy = await measure(redis, servers.origin, async () => {
      const running = load(options.afterDeployS, options.seed + 10 * index + 2);
      deployWindows = await windows(redis, DEPLOY_WINDOW_S, running);
      deployPages = (await running).requests + departingAgain.take().sent;
    });
    const steadyWindow = percentile(
      [...steadyWindows].sort((a, b) => a - b),
      50,
    );
    const backAt = deployWindows.findIndex((_, i) => deployWindows.slice(i).every((n) => n <= steadyWindow * STEADY_FACTOR));
    console.log(
      `deploy: restart ${restartMs} ms; first pages ${deployFirst.commands} commands, ${deployFirst.bytesOut} bytes out; minute after ${deploy.commands} commands; windows ${deployWindows.join(" ")} (steady ${steadyWindow})`,
    );

    // 3. Bulk re-price, purge storm, herd.
    const background = load(45, options.seed + 10 * index + 3);
    // What the re-price costs Redis, recording and reading together (the census of its stretch and the 30 s after).
    let reprice!: Awaited<ReturnType<typeof bulkReprice>>;
    const repriceUsage = await measure(redis, servers.origin, async () => {
      reprice = await bulkReprice({ targets, token: servers.bindings.PURGE_TOKEN!, redis, now: () => performance.now(), afterMs: 30_000, signal });
    });
    await background;
    const stormLoad = load(20, options.seed + 10 * index + 4);
    const storm = await purgeStorm({ targets, token: servers.bindings.PURGE_TOKEN!, origin: servers.origin, ids: stormIds, firstPrice: 20_000 + 1000 * index });
    await stormLoad;
    await departingAgain.stop();
    const coldId = workload.idOfRank(CATALOG - index);
    const herdAnswers = await herd(targets, `/products/${coldId}`, HERD_REQUESTS);
    await sleep(1000);
    const herdCounts = await servers.origin.countsOf(coldId);
    // Cold pages one at a time, the load stopped: each isolate's writes then go alone, as in an isolate that sees little traffic.
    const coldIds = Array.from({ length: COLD_PAGES.count }, (_, k) => workload.idOfRank(CATALOG - 8 - index * COLD_PAGES.count - k));
    const coldStatuses: Record<string, number> = {};
    const cold = await measure(redis, servers.origin, async () => {
      for (const [k, id] of coldIds.entries()) {
        const answer = await get(`${targets[k % size]}/products/${id}`, 10_000);
        coldStatuses[answer.status] = (coldStatuses[answer.status] ?? 0) + 1;
        await sleep(COLD_PAGES.gapMs);
      }
    });
    const location = await fleet.location();
    await fleet.stop();

    const reach = storm.reaches.flatMap((r) => r.ms);
    const reached = reach.filter((ms): ms is number => ms !== null).sort((a, b) => a - b);
    const result: SizeResult = {
      size,
      steady: perPage(steady, steadyPages),
      firstStart,
      deploy: {
        restartMs,
        first: deployFirst,
        minute: perPage(deploy, deployPages),
        windows: deployWindows,
        steadyWindow,
        backToSteadyS: backAt < 0 ? null : backAt * DEPLOY_WINDOW_S,
      },
      reprice: {
        acknowledged: reprice.acknowledged,
        seconds: Math.round((reprice.end - reprice.start) / 100) / 10,
        afterSeconds: reprice.after.seconds,
        afterCommands: reprice.after.total,
        l1Entries: reprice.l1Entries,
        usage: repriceUsage,
      },
      storm: {
        purges: storm.acks.length,
        ackP50Ms: percentile(
          [...storm.acks].sort((a, b) => a - b),
          50,
        ),
        reachP50Ms: reached.length ? percentile(reached, 50) : null,
        reachP99Ms: reached.length ? percentile(reached, 99) : null,
        reachMaxMs: reached.at(-1) ?? null,
        missed: reach.length - reached.length,
        samples: reach.length,
      },
      herd: {
        statuses: countStatuses(herdAnswers.answers),
        fetches: Object.fromEntries(PAGE_RESOURCES.map((r) => [r, herdCounts[r] ?? 0])),
        servedAs: productServedAs(herdAnswers.answers),
      },
      location: { hits: location.hits, matches: location.matches, puts: location.puts, verdicts },
      cold: { pages: coldIds.length, statuses: coldStatuses, usage: cold },
    };
    results.push(result);
    console.log(
      `re-price: ${reprice.after.total} commands in ${reprice.after.seconds} s after; storm reach p50 ${result.storm.reachP50Ms} p99 ${result.storm.reachP99Ms} ms (${result.storm.missed} missed), purge attempts ${JSON.stringify(storm.attempts)}; herd ${JSON.stringify(result.herd.fetches)}, its products served as ${JSON.stringify(result.herd.servedAs)}`,
    );
  }

  const machine = describeMachine(await toolVersions());
  const head = runLine("npm run bench:fleet", machine, startedAt);
  const files = fleetReport({ head, options, results, logCounts, filterBuilt: filter.built });
  for (const file of writeResults(options.results, files)) console.log(`wrote ${file}`);
}

/** A stretch's usage with its pages. */
function perPage(usage: Usage, pages: number): Usage & { pages: number } {
  return { ...usage, pages };
}

run(main);

/** How a herd's pages got their product: Cache-Status's product member (dev/harness/cacheStatus.ts), its ttl left out, and how many pages each. */
function productServedAs(answers: readonly Answer[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const answer of answers) {
    const product = member(String(answer.headers?.["cache-status"] ?? ""), "product");
    const key = product ? product.replace(/; ttl=-?\d+/, "") : "none";
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}
