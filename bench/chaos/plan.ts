// bench:chaos's settings and its command line (read with dev/cli.ts: --help
// prints the usage, a wrong one is a usage error in one line). The stack and
// the load are the soak's (soak/plan.ts): its catalog and origin latency.
import { parseCommandLine } from "../../dev/cli";
import { resultsSuffix, wholeNumber } from "../lib/flagValues";

/** The prober's hot products: Zipf ranks 1..HOT_RANKS, asked in turn, and those whose prices change. */
export const HOT_RANKS = 300;
/**
 * The tail's last ranks, left out of every draw (wrk's, the prober's, the
 * departing visitors'): each herd asks for one of them, still cold then (the
 * soak's COLD_RANKS, more of them).
 */
export const HERD_RANK_COUNT = 20;
/** Requests of one herd, at once, spread over the instances. */
export const HERD_REQUESTS = 200;
/** The prober's requests a second in all (half for the hot products, half Zipf draws). */
export const PROBE_RATE = 60;
/** A prober's request unanswered this long counts as no answer. */
export const PROBE_TIMEOUT_MS = 10_000;
/** The price changer's pause between two changes, ms (drawn in this range). */
export const PRICE_CHANGE_EVERY_MS = [2000, 3000] as const;
/** The price changer's wait before it sends a purge again after a 503, ms (a shop's backend retrying). */
export const PURGE_RETRY_MS = 500;
/**
 * A purge-through-redis changes one of this many hottest products: the Zipf
 * draws (the prober's and wrk's) keep them in every isolate's cache.
 */
export const THROUGH_HOT_RANKS = 20;
/** The prober's watch of a product a purge-through-redis purged: requests a second, from the change until this long after its 202. */
export const WATCH = { rate: 10, afterMs: 5000 } as const;
/** The bulk re-price: purges of this many ids each, ids outside the catalog (productId(BULK.firstIndex + n)), at most `concurrency` at once. */
export const BULK = { purges: 300, idsPerPurge: 1000, firstIndex: 200_001, concurrency: 4 } as const;
/** The bulk re-price's verdicts: at most this share of warm pages leave L1; their p99 after within this factor of before (plus one L2 round trip). */
export const BULK_LIMITS = { leftL1Share: 0.05, p99Factor: 2 } as const;
/** Heap flat: at the end at most this much above its reading after the warm-up, as a ratio or in MB (either passes). */
export const HEAP_FLAT = { ratio: 1.5, plusMB: 16 } as const;
/** The seeds of the prober's and the departing visitors' Zipf draws, offsets from --seed. */
export const SEEDS = { probe: 1, prices: 2, departing: 3, wrk: 1000 } as const;

const COMMAND = "npm run bench:chaos";

const USAGE = `${COMMAND}: every guarantee at once, under random combined faults (Redis, the gateway, the origin, deploys,
a bulk re-price) on a seeded schedule, judged by an oracle outside the tier that probes and changes prices all along
(bench/chaos/README.md). The soak's stack: isolates sharing one location cache, wrk's Zipf load paced for the whole
run, visitors who leave mid-request. Writes bench/results/chaos.md and .json. Needs redis-server; installs wrk when missing.

usage: ${COMMAND} -- [options]
  --minutes N           length of the run, 2 to 120 (default 10)
  --seed N              the schedule's seed, a whole number from 0 (default: random, printed: replay with it)
  --instances N         isolates, 1 to 4 (default 2)
  --rate N              wrk's requests a second in all, 1 to 100000 (default 150)
  --connections N       wrk's connections, 2 to 256 (default 64: enough for the pace while faults make pages slow)
  --departing N         visitors who leave 1-30 ms after asking, a second, 0 to 1000 (default 10)
  --results-suffix NAME the results as bench/results/chaos-NAME.* (letters, digits, _ and -), the committed ones left alone
  -h, --help            this text

examples: ${COMMAND} -- --seed 12345
          ${COMMAND} -- --minutes 3 --seed 1 --results-suffix smoke`;

/** The command line, read and checked: exits with the usage when asked for, with a usage error when it is wrong. */
export function chaosOptions() {
  const { values: args } = parseCommandLine(COMMAND, USAGE, {
    options: {
      minutes: { type: "string", default: "10" },
      seed: { type: "string" },
      instances: { type: "string", default: "2" },
      // wrk's Zipf load, paced (requests a second in all) for the whole run: well below what this machine serves
      // (about 400 pages a second with two isolates), so that the figures show the faults, not a saturated machine.
      rate: { type: "string", default: "150" },
      connections: { type: "string", default: "64" },
      // Visitors who leave 1-30 ms after asking, a second, for the whole run (the soak's cancellers, soak/cancel.ts):
      // Zipf products, spread over the instances. A rate, not closed loops: four loops of departures sent about
      // 250 cold pages a second, more than the paced load itself.
      departing: { type: "string", default: "10" },
      "results-suffix": { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  const minutes = wholeNumber(COMMAND, "--minutes", args.minutes, 2, 120);
  const seed = args.seed === undefined ? Math.floor(Math.random() * 1_000_000) : wholeNumber(COMMAND, "--seed", args.seed, 0);
  const instances = wholeNumber(COMMAND, "--instances", args.instances, 1, 4);
  const rate = wholeNumber(COMMAND, "--rate", args.rate, 1, 100_000);
  const connections = wholeNumber(COMMAND, "--connections", args.connections, 2, 256);
  const departing = wholeNumber(COMMAND, "--departing", args.departing, 0, 1000);
  const suffix = resultsSuffix(COMMAND, args["results-suffix"]);
  return { minutes, seed, instances, rate, connections, departing, results: `chaos${suffix ? `-${suffix}` : ""}` };
}
