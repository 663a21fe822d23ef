// `npm run bench:fleet-model [-- --from bench/results/fleet.json]`: takes
// bench:fleet's measured figures to a fleet of thousands of isolates, at a
// shop's traffic, and prints what it costs and which published limit it
// meets first. Every assumption is a named constant below, with its reason;
// the published figures (prices, limits) and their sources are in
// bench/lib/prices.json and bench/fleet/sources.md.
//
// The model, per second of the shop's average and peak traffic T (pages/s)
// spread over I isolates (L locations):
//   - Redis commands = pages' own commands + purge-log reads.
//     · Purge-log reads are what an isolate does whatever its traffic: at
//       most `pollReadsPerSecond` per isolate (measured with one isolate at
//       bench:fleet's load), and at most one per page it serves (the read
//       is made for a request): I × min(T / I, pollReadsPerSecond).
//     · A page's own commands (fills' claims and writes, L2 reads, the
//       filter) depend on how many pages an isolate serves: measured at
//       bench:fleet's per-isolate rates (its load over 1..16 isolates);
//       below the lowest, every page is taken to cost what a new isolate's
//       first page costs (measured after the deploy): an upper bound, as an
//       isolate that sees a product less often than its parts' TTLs holds
//       nothing fresh of it.
//     · With a million products, the views beyond the top 100,000 (Zipf(1):
//       1 − H(100,000)/H(1,000,000) of them) cost what a new isolate's first page costs.
//   - Bandwidth to Redis: the same split for bytes.
//   - Origin fetches: the measured fetches a page (L2 is one for the fleet:
//     the origin sees one fetch per product part per TTL, whatever the
//     isolates), the tail beyond 100,000 products at four fetches a view.
//   - Workers: a request and `CPU_MS_PER_PAGE` a page.
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { loadPrices, usd } from "../lib/cost";
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

function harmonic(n: number): number {
  return Math.log(n) + 0.5772156649 + 1 / (2 * n);
}

interface Measured {
  size: number;
  perIsolateRate: number;
  /** A page's own commands and bytes (purge-log reads left out). */
  commands: number;
  bytes: number;
  origin: number;
}

/** bench:fleet's figures, as the model uses them. */
function readMeasured(file: string) {
  const { results, options } = JSON.parse(readFileSync(file, "utf8")) as { results: SizeResult[]; options: { rate: number } };
  if (!results.length) throw new Error(`${file} holds no sizes`);
  const points: Measured[] = results.map((r) => {
    const pages = Math.max(1, r.steady.pages);
    const log = r.steady.byPurpose["purge log"] ?? 0;
    return {
      size: r.size,
      perIsolateRate: r.steady.pages / Math.max(1, r.steady.seconds) / r.size,
      commands: (r.steady.commands - log) / pages,
      bytes: (r.steady.bytesIn + r.steady.bytesOut) / pages,
      origin: r.steady.originFetches / pages,
    };
  });
  const one = results.find((r) => r.size === 1) ?? results[0]!;
  const pollReadsPerSecond = (one.steady.byPurpose["purge log"] ?? 0) / Math.max(1, one.steady.seconds) / one.size;
  // A new isolate's first page, the largest fleet's (after the deploy: the location cache and L2 warm).
  const last = results.at(-1)!;
  const cold = { commands: last.deploy.first.commands / last.size, bytes: (last.deploy.first.bytesIn + last.deploy.first.bytesOut) / last.size };
  return { points: points.sort((a, b) => b.perIsolateRate - a.perIsolateRate), pollReadsPerSecond, cold, rate: options.rate };
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

function main(): void {
  const { values } = parseArgs({ options: { from: { type: "string", default: "bench/results/fleet.json" } } });
  const m = readMeasured(values.from!);
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
      const logReads = (t: number) => isolates * Math.min(t / isolates, m.pollReadsPerSecond);
      const commandsAt = (t: number) => t * pageCommands + logReads(t);
      const commands = commandsAt(average);
      const peak = commandsAt(average * PEAK_FACTOR);
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
      `Fleet model (bench/fleet/model.ts) from ${values.from}: ${PAGES_PER_DAY.toLocaleString("en-US")} pages a day (${average.toFixed(0)}/s average, ×${PEAK_FACTOR} at peak), ${LOCATIONS} locations; purge-log reads at most ${m.pollReadsPerSecond.toFixed(2)}/s per isolate (one isolate measured); a page's own commands ${m.points.map((p) => `${p.commands.toFixed(2)} at ${p.perIsolateRate.toFixed(1)}/s`).join(", ")} per isolate; a new isolate's first page ${m.cold.commands.toFixed(1)} commands, ${(m.cold.bytes / 1024).toFixed(1)} KB.`,
      "",
      "| products | isolates | pages/s per isolate | Redis commands a page | Redis commands/s average / peak | Upstash a month (pay-as-you-go) | Redis GB a month | origin fetches/s | Workers a month | peak vs Upstash's 10,000 commands/s |",
      "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
      ...rows,
      "",
      limits.length
        ? `First limit met: ${limits[0]}.`
        : `No published limit is met: the nearest is Upstash's ${UPSTASH_COMMANDS_PER_SECOND} commands/s per database (the last column); Workers' limits (10,000 subrequests and 6 connections a request, 128 MB an isolate) are per request and per isolate, not per fleet.`,
    ].join("\n"),
  );
}

main();
