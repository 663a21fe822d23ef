// bench:fleet's settings and its command line (read and checked; a wrong one
// prints the usage and exits). The stack and the catalog are the soak's
// (soak/plan.ts); the load is paced and the same in all for every size, so
// that what changes from one size to the next is the number of isolates.
import { parseArgs } from "node:util";
import { DEFAULTS } from "../../src/config/defaults";

/** Zipf ranks left out of every draw: the herds' cold products (one per size, the last ranks), then the cold pages'. */
export const COLD_RANKS = 8 + 5 * 24;
/**
 * Cold pages measured one at a time in each size, with the load stopped: what a page costs an isolate that holds nothing of it
 * and sees no other traffic. Further apart than a write may wait for a claim to carry it (DEFAULTS.patientWriteHoldMs), so
 * that each page's writes go alone.
 */
export const COLD_PAGES = { count: 24, gapMs: DEFAULTS.patientWriteHoldMs + 500 } as const;
/** Requests of the hot-product herd, at once, spread over the isolates. */
export const HERD_REQUESTS = 200;
/** The purge storm: this many single-product purges (each a price change at the origin first), `perSecond` of them. */
export const STORM = { purges: 40, perSecond: 8 } as const;
/** Purge reach is measured for every `reachEvery`-th purge of the storm, each isolate asked every `pollMs` until it shows the new price (`giveUpMs` at most). */
export const REACH = { reachEvery: 4, pollMs: 50, giveUpMs: 10_000 } as const;
/** After a deploy, Redis commands are counted in windows of this many seconds. */
export const DEPLOY_WINDOW_S = 5;
/** A window after a deploy is back to steady when its commands a page are within this factor of the steady stretch's. */
export const STEADY_FACTOR = 1.2;
/** The targets this benchmark checks (issue 49's "Done when"). */
export const TARGETS = {
  /** Redis commands a page at the largest size ≤ this × one isolate's. */
  commandsPerPageRatio: 1.5,
  /** A deploy's Redis commands in the minute after it ≤ this × a steady minute's. */
  deployMinuteRatio: 2,
  /** What a new isolate reads from Redis before its first pages are served from its filter, bytes. */
  newIsolateReadBytes: 50 * 1024,
  /** The Redis bytes a bulk re-price costs at the largest size ≤ this × at the smallest (the log read once per data center: issue 65). */
  repriceBytesRatio: 1.5,
} as const;

/** The command line, read and checked: exits with the usage when it is wrong (or asked for). */
export function fleetOptions() {
  const { values: args } = parseArgs({
    options: {
      sizes: { type: "string", default: "1,2,4,8,16" },
      // Requests a second in all, whatever the size: light enough that 16 isolates on this 2-core machine are not the limit.
      rate: { type: "string", default: "80" },
      warm: { type: "string", default: "60" },
      steady: { type: "string", default: "60" },
      "after-deploy": { type: "string", default: "60" },
      departing: { type: "string", default: "4" },
      seed: { type: "string", default: "4949" },
      "results-suffix": { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  const sizes = (args.sizes ?? "").split(",").map(Number);
  const [rate, warmS, steadyS, afterDeployS, departing, seed] = [args.rate, args.warm, args.steady, args["after-deploy"], args.departing, args.seed].map(
    Number,
  ) as [number, number, number, number, number, number];
  const whole = (n: number, lo: number, hi: number) => Number.isInteger(n) && n >= lo && n <= hi;
  if (
    args.help ||
    sizes.length === 0 ||
    !sizes.every((n) => whole(n, 1, 32)) ||
    !whole(rate, 1, 10_000) ||
    !whole(warmS, 10, 3600) ||
    !whole(steadyS, 10, 3600) ||
    !whole(afterDeployS, DEPLOY_WINDOW_S * 2, 3600) ||
    !whole(departing, 0, 1000) ||
    !whole(seed, 0, 2 ** 31) ||
    !/^[A-Za-z0-9_-]*$/.test(args["results-suffix"] ?? "")
  ) {
    (args.help ? console.log : console.error)(
      "usage: npm run bench:fleet -- [--sizes 1,2,4,8,16 (isolates, 1–32 each)] [--rate N (pages a second in all, default 80)] [--warm S (default 60)] [--steady S (default 60)] [--after-deploy S (default 60)] [--departing N (visitors who leave, a second; default 4)] [--seed N] [--results-suffix NAME]",
    );
    process.exit(args.help ? 0 : 2);
  }
  const suffix = args["results-suffix"];
  return { sizes, rate, warmS, steadyS, afterDeployS, departing, seed, results: `fleet${suffix ? `-${suffix}` : ""}` };
}
export type FleetOptions = ReturnType<typeof fleetOptions>;
