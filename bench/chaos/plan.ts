// bench:chaos's settings and its command line (read and checked; a wrong one
// prints the usage and exits). The stack and the load are the soak's
// (soak/plan.ts): its catalog and origin latency.
import { parseArgs } from "node:util";

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

/** The command line, read and checked: exits with the usage when it is wrong (or asked for). */
export function chaosOptions() {
  const { values: args } = parseArgs({
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
  const minutes = Number(args.minutes);
  const instances = Number(args.instances);
  const connections = Number(args.connections);
  const rate = Number(args.rate);
  const departing = Number(args.departing);
  const seed = args.seed === undefined ? Math.floor(Math.random() * 1_000_000) : Number(args.seed);
  if (
    args.help ||
    !Number.isInteger(minutes) ||
    minutes < 2 ||
    minutes > 120 ||
    !Number.isInteger(seed) ||
    seed < 0 ||
    !Number.isInteger(instances) ||
    instances < 1 ||
    instances > 4 ||
    !Number.isInteger(connections) ||
    connections < 2 ||
    connections > 256 ||
    !Number.isInteger(rate) ||
    rate < 1 ||
    rate > 100_000 ||
    !Number.isInteger(departing) ||
    departing < 0 ||
    departing > 1000 ||
    !/^[A-Za-z0-9_-]*$/.test(args["results-suffix"] ?? "")
  ) {
    (args.help ? console.log : console.error)(
      "usage: npm run bench:chaos -- [--minutes N (2–120, default 10)] [--seed N (default: random, printed)] [--instances N (1–4, default 2)] [--rate N (wrk's requests a second, default 150)] [--connections N (wrk's, default 64: enough for the pace while faults make pages slow)] [--departing N (visitors who leave, a second: 0–1000, default 10)] [--results-suffix NAME]",
    );
    process.exit(args.help ? 0 : 2);
  }
  const suffix = args["results-suffix"];
  return { minutes, seed, instances, rate, connections, departing, results: `chaos${suffix ? `-${suffix}` : ""}` };
}
