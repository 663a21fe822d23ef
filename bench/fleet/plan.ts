// bench:fleet's settings and its command line (read with dev/cli.ts: --help
// prints the usage, a wrong one is a usage error in one line). The stack and
// the catalog are the soak's (soak/plan.ts); the load is paced and the same in
// all for every size, so that what changes from one size to the next is the
// number of isolates.
import { parseCommandLine, usageError } from "../../dev/cli";
import { resultsSuffix, wholeNumber, wholeNumbers } from "../lib/flagValues";
import { DEFAULTS } from "../../src/config/defaults";

/** Zipf ranks left out of every draw: the herds' cold products (one per size, the last ranks), then the cold pages'. */
export const COLD_RANKS = 8 + 5 * 24;
/**
 * Cold pages measured one at a time in each size, with the load stopped: what a page costs an isolate that holds nothing of it
 * and sees no other traffic. Further apart than a write may wait for a claim to carry it (a write's budget, DEFAULTS.backgroundCallMs), so
 * that each page's writes go alone.
 */
export const COLD_PAGES = { count: 24, gapMs: DEFAULTS.backgroundCallMs + 500 } as const;
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

const COMMAND = "npm run bench:fleet";

const USAGE = `${COMMAND}: what grows with the number of isolates rather than with traffic (bench/fleet/README.md).
For each size, that many isolates sharing one data center's location cache, from the same start, under the same
paced Zipf load and departing visitors: Redis commands and bytes a page in a steady stretch (by purpose), origin
fetches; a deploy (what new isolates read, the minute after it); a bulk re-price, a purge storm and its reach, a herd,
cold pages. Writes bench/results/fleet.md, fleet-redis.svg, fleet-events.svg and fleet.json, which
npm run bench:fleet-model takes to a fleet. Needs redis-server; installs wrk when missing.

usage: ${COMMAND} -- [options]
  --sizes LIST          isolates of each size, comma-separated, 1 to 32 each (default 1,2,4,8,16)
  --rate N              pages a second in all, whatever the size, 1 to 10000 (default 80)
  --warm S              seconds of warm-up of each size, 10 to 3600 (default 60)
  --steady S            seconds of the steady stretch, 10 to 3600 (default 60)
  --after-deploy S      seconds of load after the deploy, ${DEPLOY_WINDOW_S * 2} to 3600 (default 60)
  --departing N         visitors who leave, a second, 0 to 1000 (default 4)
  --seed N              the seed of the load's draws, 0 to ${2 ** 31} (default 4949)
  --results-suffix NAME the results as bench/results/fleet-NAME.* (letters, digits, _ and -), the committed ones left alone
  -h, --help            this text

examples: ${COMMAND} -- --sizes 1,4,16
          ${COMMAND} -- --sizes 1,2 --warm 20 --steady 20 --results-suffix smoke`;

/** The command line, read and checked: exits with the usage when asked for, with a usage error when it is wrong. */
export function fleetOptions() {
  const { values: args } = parseCommandLine(COMMAND, USAGE, {
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
  const sizes = wholeNumbers(COMMAND, "--sizes", args.sizes, 1, 32);
  if (sizes.length === 0) usageError(COMMAND, `--sizes takes at least one size, got ${JSON.stringify(args.sizes)}`);
  const rate = wholeNumber(COMMAND, "--rate", args.rate, 1, 10_000);
  const warmS = wholeNumber(COMMAND, "--warm", args.warm, 10, 3600);
  const steadyS = wholeNumber(COMMAND, "--steady", args.steady, 10, 3600);
  const afterDeployS = wholeNumber(COMMAND, "--after-deploy", args["after-deploy"], DEPLOY_WINDOW_S * 2, 3600);
  const departing = wholeNumber(COMMAND, "--departing", args.departing, 0, 1000);
  const seed = wholeNumber(COMMAND, "--seed", args.seed, 0, 2 ** 31);
  const suffix = resultsSuffix(COMMAND, args["results-suffix"]);
  return { sizes, rate, warmS, steadyS, afterDeployS, departing, seed, results: `fleet${suffix ? `-${suffix}` : ""}` };
}
export type FleetOptions = ReturnType<typeof fleetOptions>;
