// `npm run bench:fleet-model [-- --from bench/results/fleet.json]`: takes
// bench:fleet's measured figures to a fleet of thousands of isolates, at a
// shop's traffic, and prints what it costs and which published limit it
// meets first. Every assumption is a named constant below, with its reason;
// the published figures (prices, limits) and their sources are in
// bench/lib/prices.json and bench/fleet/sources.md.
//
// The model: the shop's traffic T (pages/s, its daily average and peak) spread
// evenly over I isolates, each serving T / I pages a second.
//   - Redis commands and bytes a page depend on how many pages an isolate
//     serves (what its L1 holds, how many of its writes ride on its claims,
//     how often its purge-log reads are due), not on how many isolates there
//     are: bench:fleet measures them at 80, 40, 20, 10 and 5 pages/s per
//     isolate (its same load over 1..16 isolates); between two, interpolated
//     on a log scale; below the lowest, every page is taken to cost what a
//     cold page costs an isolate with no other traffic (measured:
//     never-viewed products one at a time, the load stopped, so that its
//     writes and purge-log reads go alone): an upper bound, as an isolate
//     that sees a product less often than its parts' TTLs holds nothing
//     fresh of it.
//   - With a million products, the views beyond the top 100,000 (Zipf(1):
//     1 − H(100,000)/H(1,000,000) of them) cost what such a cold page costs.
//   - Origin fetches: the measured fetches a page (L2 is one for the fleet:
//     the origin sees one fetch per product part per TTL, whatever the
//     isolates), the tail beyond 100,000 products at four fetches a view.
//   - Workers: a request and `CPU_MS_PER_PAGE` a page.
//   - A bulk re-price (300 purges of 1,000 ids): its recording (and the
//     load's noise beside it) costs Redis the same whatever the fleet; its
//     reading, the largest measured data center's reads of the log (the
//     isolates of a location share the log's pages:
//     invalidation/sharedReads.ts) and the bytes Redis answered, once per
//     location, within the time the re-price took: against Upstash's
//     commands a second, its request size (a page of the log is at most
//     256 KiB) and its bandwidth's price.
import { readFileSync } from "node:fs";
import { parseCommandLine, usageError } from "../../dev/cli";
import { loadPrices, usd } from "../lib/cost";
import type { Usage } from "./measure";
import type { SizeResult } from "./report";

/** The shop (issue 49): 10 million pages a day. */
const PAGES_PER_DAY = 10_000_000;
/** Busy hours against the day's average: a shop's evening peak (assumed; shops see 2–4×). */
const PEAK_FACTOR = 3;
/** Cloudflare's locations: "over 330 cities" (sources.md §7); the issue's 300. */
const LOCATIONS = 300;
/** Fleet sizes for the README's table. */
const FLEETS = [1, 100, 1000, 10_000];
/** Workers CPU a page, ms: bench:soak's location runs (bench/results/soak-location*.json, cpuMsPerPage 1.3–1.8 on this machine). */
const CPU_MS_PER_PAGE = 1.8;
/** Zipf(1)'s share of views beyond the top 100,000 of 1,000,000 products: 1 − H(1e5)/H(1e6). */
const TAIL_SHARE_1M = 1 - harmonic(100_000) / harmonic(1_000_000);
/** Published limits (sources.md): Upstash commands a second per database, pay-as-you-go and fixed plans up to 50 GB. */
const UPSTASH_COMMANDS_PER_SECOND = 10_000;
/** Upstash pay-as-you-go bandwidth included a month, GB. */
const UPSTASH_FREE_GB = 200;
const SECONDS_A_MONTH = 30 * 86_400;

const COMMAND = "npm run bench:fleet-model";
const FROM = "bench/results/fleet.json";

const USAGE = `${COMMAND}: takes bench:fleet's measured figures to a fleet of ${FLEETS.map((n) => n.toLocaleString("en-US")).join(", ")} isolates in ${LOCATIONS} locations,
at ${PAGES_PER_DAY.toLocaleString("en-US")} pages a day (×${PEAK_FACTOR} at peak), for 100,000 and 1,000,000 products, and prints a table: Redis commands
a page and a second, the Upstash bill, Redis bandwidth, origin fetches, the Workers bill, the share of Upstash's
per-database limit at peak; then the first published limit met, and a bulk re-price at 1,000 isolates. Runs nothing,
writes nothing. Its assumptions: the head of bench/fleet/model.ts; prices and limits: bench/lib/prices.json,
bench/fleet/sources.md.

usage: ${COMMAND} -- [options]
  --from FILE           the JSON of a bench:fleet run (default ${FROM})
  -h, --help            this text

example: ${COMMAND} -- --from bench/results/fleet-smoke.json`;

function harmonic(n: number): number {
  return Math.log(n) + 0.5772156649 + 1 / (2 * n);
}

interface Measured {
  size: number;
  perIsolateRate: number;
  /** Redis commands and bytes a page, everything the isolates sent. */
  commands: number;
  bytes: number;
  origin: number;
}

/** The text of an error, for a message of ours. */
const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

/** bench:fleet's figures, as the model uses them; throws what is wrong with the file. */
function readMeasured(file: string) {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (error) {
    throw new Error(`cannot be read (${messageOf(error)})`);
  }
  let run: { results?: SizeResult[]; options?: { rate: number } };
  try {
    run = JSON.parse(text);
  } catch (error) {
    throw new Error(`is not JSON (${messageOf(error)})`);
  }
  const { results, options } = run;
  if (!Array.isArray(results) || typeof options?.rate !== "number") throw new Error("is not the JSON of a bench:fleet run (no results, or no options.rate)");
  if (!results.length) throw new Error("holds no sizes");
  const points: Measured[] = results.map((r) => {
    const pages = Math.max(1, r.steady.pages);
    return {
      size: r.size,
      perIsolateRate: r.steady.pages / Math.max(1, r.steady.seconds) / r.size,
      commands: r.steady.commands / pages,
      bytes: (r.steady.bytesIn + r.steady.bytesOut) / pages,
      origin: r.steady.originFetches / pages,
    };
  });
  // A cold page in a quiet isolate (the load stopped), the largest fleet's: its writes go alone.
  const last = results.at(-1)!;
  if (!last.cold) throw new Error("has no cold pages (a bench:fleet from before they were measured): run it again");
  const cold = { commands: last.cold.usage.commands / last.cold.pages, bytes: (last.cold.usage.bytesIn + last.cold.usage.bytesOut) / last.cold.pages };
  // The re-price at the largest size: what one data center cost Redis beyond its load (recording included), and how long it took.
  const usage = last.reprice.usage;
  const beyondLoad = (stretch: number, steady: number) => Math.max(0, stretch - (steady / Math.max(1, last.steady.seconds)) * usage.seconds);
  // Runs before the purpose was split say it by shape (the read-only script on the log's keys).
  const reads = (u: Usage) =>
    u.byPurpose["purge log reads"] ??
    Object.entries(u.byShape)
      .filter(([shape]) => /^eval(sha)?_ro\b.*:purge:/.test(shape))
      .reduce((sum, [, n]) => sum + n, 0);
  const reprice = usage
    ? {
        isolates: last.size,
        // The log moves while the purges come: its reads fall within the re-price, and its rate is theirs.
        seconds: last.reprice.seconds,
        commands: beyondLoad(usage.commands, last.steady.commands),
        reads: beyondLoad(reads(usage), reads(last.steady)),
        bytes: beyondLoad(usage.bytesOut, last.steady.bytesOut),
      }
    : null;
  return { points: points.sort((a, b) => b.perIsolateRate - a.perIsolateRate), cold, rate: options.rate, reprice };
}

/** A page's own figure at `rate` pages/s per isolate: log-interpolated between measured rates, the cold page's below them. */
function atRate(points: Measured[], rate: number, pick: (m: Measured) => number, cold: number): number {
  if (rate >= points[0]!.perIsolateRate) return pick(points[0]!);
  for (let i = 1; i < points.length; i++) {
    const [hi, lo] = [points[i - 1]!, points[i]!];
    if (rate >= lo.perIsolateRate) {
      const t = Math.log(rate / lo.perIsolateRate) / Math.log(hi.perIsolateRate / lo.perIsolateRate);
      return pick(lo) + t * (pick(hi) - pick(lo));
    }
  }
  return Math.max(cold, pick(points.at(-1)!));
}

/** A bulk re-price at 1,000 isolates in LOCATIONS locations, from one data center's measured cost. */
function repriceLine(r: { isolates: number; seconds: number; commands: number; reads: number; bytes: number } | null, usdPerGB: number): string {
  if (!r) return "Bulk re-price: not measured in this bench:fleet run (run it again).";
  // Recorded once for the fleet; read in every location (what Redis answers is nearly all the reads' bytes).
  const commands = r.commands - r.reads + r.reads * LOCATIONS;
  const perSecond = commands / Math.max(1, r.seconds);
  const gb = (r.bytes * LOCATIONS) / 1e9;
  return `Bulk re-price (300 purges of 1,000 ids), 1,000 isolates in ${LOCATIONS} locations, from one data center of ${r.isolates} measured (${Math.round(r.commands)} commands beyond the load, ${Math.round(r.reads)} of them reads of the log, and ${(r.bytes / 1e6).toFixed(2)} MB from Redis, over the ${Math.round(r.seconds)} s of the re-price): ${Math.round(commands).toLocaleString("en-US")} commands, ${Math.round(perSecond).toLocaleString("en-US")} a second (${((100 * perSecond) / UPSTASH_COMMANDS_PER_SECOND).toFixed(1)}% of Upstash's ${UPSTASH_COMMANDS_PER_SECOND.toLocaleString("en-US")}/s: the nearest limit), ${gb.toFixed(2)} GB (${usd(gb * usdPerGB)} past the free 200 GB a month); no request over a page of the log, 256 KiB (Upstash: 10 MB).`;
}

function main(): void {
  const { values } = parseCommandLine(COMMAND, USAGE, {
    options: {
      from: { type: "string", default: FROM },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  let m: ReturnType<typeof readMeasured>;
  try {
    m = readMeasured(values.from);
  } catch (error) {
    usageError(COMMAND, `--from ${values.from} ${messageOf(error)}`);
  }
  const prices = loadPrices();
  const average = PAGES_PER_DAY / 86_400;
  const rows: string[] = [];
  const limits: string[] = [];
  for (const catalog of [100_000, 1_000_000]) {
    for (const isolates of FLEETS) {
      const perIsolate = average / isolates;
      const tail = catalog > 100_000 ? TAIL_SHARE_1M : 0;
      const own = (pick: (x: Measured) => number, cold: number) => (1 - tail) * atRate(m.points, perIsolate, pick, cold) + tail * cold;
      const pageCommands = own((x) => x.commands, m.cold.commands);
      const pageBytes = own((x) => x.bytes, m.cold.bytes);
      const commands = average * pageCommands;
      // At peak each isolate serves more pages: its figure at that rate.
      const peak =
        average * PEAK_FACTOR * ((1 - tail) * atRate(m.points, perIsolate * PEAK_FACTOR, (x) => x.commands, m.cold.commands) + tail * m.cold.commands);
      const gbMonth = (average * pageBytes * SECONDS_A_MONTH) / 1e9;
      const originPerSecond = average * ((1 - tail) * m.points.at(-1)!.origin + tail * 4);
      const redisUsd =
        ((commands * SECONDS_A_MONTH) / 100_000) * prices.redis.commandsUsdPer100k + Math.max(0, gbMonth - UPSTASH_FREE_GB) * prices.redis.bandwidthUsdPerGB;
      const pagesMonth = average * SECONDS_A_MONTH;
      const workersUsd =
        prices.workers.monthlyBaseUsd +
        Math.max(0, pagesMonth / 1e6 - prices.workers.requestsIncludedMillionsPerMonth) * prices.workers.requestsUsdPerMillion +
        Math.max(0, (pagesMonth * CPU_MS_PER_PAGE) / 1e6 - prices.workers.cpuMsIncludedMillionsPerMonth) * prices.workers.cpuMsUsdPerMillion;
      rows.push(
        `| ${catalog.toLocaleString("en-US")} | ${isolates.toLocaleString("en-US")} (${Math.max(1, Math.round(isolates / LOCATIONS))} a location) | ${perIsolate.toFixed(2)} | ${(commands / average).toFixed(2)} | ${Math.round(commands)} / ${Math.round(peak)} | ${usd(redisUsd)} | ${gbMonth.toFixed(1)} | ${originPerSecond.toFixed(1)} | ${usd(workersUsd)} | ${((100 * peak) / UPSTASH_COMMANDS_PER_SECOND).toFixed(1)}% |`,
      );
      if (peak > UPSTASH_COMMANDS_PER_SECOND)
        limits.push(
          `${catalog} products, ${isolates} isolates: peak ${Math.round(peak)} commands/s exceeds Upstash's ${UPSTASH_COMMANDS_PER_SECOND}/s per database`,
        );
    }
  }
  console.log(
    [
      `Fleet model (bench/fleet/model.ts) from ${values.from}: ${PAGES_PER_DAY.toLocaleString("en-US")} pages a day (${average.toFixed(0)}/s average, ×${PEAK_FACTOR} at peak), ${LOCATIONS} locations; Redis commands a page ${m.points.map((p) => `${p.commands.toFixed(2)} at ${p.perIsolateRate.toFixed(1)}/s`).join(", ")} per isolate; a cold page alone ${m.cold.commands.toFixed(1)} commands, ${(m.cold.bytes / 1024).toFixed(1)} KB.`,
      "",
      "| products | isolates | pages/s per isolate | Redis commands a page | Redis commands/s average / peak | Upstash a month (pay-as-you-go) | Redis GB a month | origin fetches/s | Workers a month | peak vs Upstash's 10,000 commands/s |",
      "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
      ...rows,
      "",
      limits.length
        ? `First limit met: ${limits[0]}.`
        : `No published limit is met: the nearest is Upstash's ${UPSTASH_COMMANDS_PER_SECOND} commands/s per database (the last column); Workers' limits (10,000 subrequests and 6 connections a request, 128 MB an isolate) are per request and per isolate, not per fleet.`,
      "",
      repriceLine(m.reprice, prices.redis.bandwidthUsdPerGB),
    ].join("\n"),
  );
}

main();
