// bench:soak's settings: the stack, the herd, the cold products, the
// cancellers, the heap limit, the two modes' plans, and the command line
// (read with dev/cli.ts: --help prints the usage, a wrong one is a usage error
// in one line).
import { parseCommandLine, usageError } from "../../dev/cli";
import { oneOf, resultsSuffix as checkedSuffix, wholeNumber, wholeNumbers } from "../lib/flagValues";

export const CATALOG = 100_000;
export const ORIGIN = { latencyMs: 20, jitterMs: 2 };
export const HERD = { requests: 1000, rank: 1 };
/** The tail's last ranks: left out of every draw, so they are still cold when the load is over. */
export const COLD_RANKS = [99_996, 99_997, 99_998, 99_999, 100_000];
/** Cancellers: this share of wrk's last rate, at most CAP a second (START before wrk has a rate). */
export const CANCEL = { share: 0.05, cap: 50, start: 10 };
export const HEAP_LIMIT_MB = 96;
/** The cold products must answer 200 within this long, right after the load. */
export const COLD_MS = 1000;
/** The seed of the cancellers' Zipf draws. */
export const ZIPF_SEED = 20_260_426;
/** Pages the location probe asks for right after a restart: the hottest Zipf ranks (in the location, in no new L1). */
export const PROBE_PAGES = 100;
/** Pages asked before them (the next ranks), unmeasured, so that both passes run on warm code. */
export const PROBE_WARM_PAGES = 200;
/** The seed of the `--departing` visitors' uniform draws. */
export const DEPARTING_SEED = ZIPF_SEED + 2;

/**
 * The two modes: minutes of 30 s windows with cancellers, or the bug report's
 * four 10 s rounds. `period`: windows per throughput figure of the checks (a minute; a round).
 */
const PLANS = {
  soak: (minutes: number) => ({
    windowS: 30,
    windows: 2 * minutes,
    period: 2,
    cancellers: true,
    label: (i: number) => `${Math.floor((i + 1) / 2)}:${(i + 1) % 2 ? "30" : "00"}`,
  }),
  rounds: () => ({ windowS: 10, windows: 4, period: 1, cancellers: false, label: (i: number) => `round ${i + 1}` }),
};

/** The floods' connections when `--flood-connections` does not say. */
export const FLOOD_CONNECTIONS = { departing: 8, crawler: 32 };

/** `--policies`: JSON whose value is an object (`null` and arrays pass, as they always did). */
function isJsonObject(text: string): boolean {
  try {
    return typeof JSON.parse(text) === "object";
  } catch {
    return false;
  }
}

const COMMAND = "npm run bench:soak";
const FLOOD_KINDS = { departing: ["departing"], crawler: ["crawler"], both: ["departing", "crawler"] } as const;

const USAGE = `${COMMAND}: do one or two isolates hold up under minutes of Zipf traffic (wrk), with visitors who close their
connection mid-request? A herd for a cold product first, then 30 s windows (one row each: throughput, latency, where
pages came from, Redis and origin calls, heap, logs), the cold products after, then pass/fail checks (bench/soak/README.md).
With --flood, the flood scenarios instead: departing visitors, a crawler, each alone and beside the Zipf load.
Writes bench/results/soak.md, .svg and .json (soak-rounds.* with --rounds, soak-floods.md and .json with --flood).
Needs redis-server; installs wrk when missing.

usage: ${COMMAND} -- [options]
       ${COMMAND} -- --flood departing|crawler|both [flood options]
  --minutes N           minutes of load, 1 or more (default 10)
  --instances 1|2       isolates sharing Redis and the origin (default 1)
  --connections N       wrk's connections, 2 or more (default 64)
  --rate N              wrk's requests a second in all, paced, 1 or more (default: a closed loop; not with --rounds or --flood)
  --departing N         departing visitors beside wrk for the whole soak, 0 to 256 closed loops, each request left
                        1–30 ms after it was sent (default 0; not with --flood)
  --rounds              the bug report instead: the herd, 4 rounds of 10 s, the cold products
  --policies JSON       the worker's CACHE_POLICIES, e.g. '{"product":{"ttl":3600}}'
  --profile-windows LIST
                        windows (1-based, comma-separated) during which instance 1's V8 profiler records
  --location            the location tier on, the instances sharing one location cache (default off)
  --restart-at S,S…     seconds into the load at which every isolate is restarted, a redeploy: multiples of 30,
                        before the load's end (not with --rounds)
  --location-off-at S   seconds into the load (a multiple of 30) from which the isolates run with LOCATION_CACHE=off
                        (with --location)
  --redis-rtt MS        every Redis call held this long by the gateway, 0 to 200 (default 0)
  --no-fleet            the FLEET binding left unbound (default: a local recorder, the fleet view checked)
  --results-suffix NAME the results as bench/results/<name>-NAME.* (letters, digits, _ and -), the committed ones left alone
 flood options:
  --flood-seconds N     seconds of each phase (the baseline, the flood), 1 to 120 (default 15)
  --flood-connections N both floods' connections, 2 to 256 (default departing ${FLOOD_CONNECTIONS.departing}, crawler ${FLOOD_CONNECTIONS.crawler})
  --flood-zipf N        wrk's connections of the Zipf load beside each flood's second run, 0 or 2 to 256 (default 16; 0: no such run)
  --flood-departures reported|unreported
                        how the departing visitors leave: a reset (workerd cancels the request) or a plain close (the
                        worker never hears of it) (default reported)
  --flood-path PATH     the departing flood asks this path instead of random products (e.g. /healthz)
  --flood-profile       the isolate's V8 CPU profile over each flood phase, summarised after the table
  -h, --help            this text

examples: ${COMMAND} -- --minutes 1 --results-suffix smoke
          ${COMMAND} -- --minutes 10 --instances 2 --departing 8
          ${COMMAND} -- --flood both`;

/** The command line, read and checked: exits with the usage when asked for, with a usage error when it is wrong. */
export function soakOptions() {
  const { values: args } = parseCommandLine(COMMAND, USAGE, {
    options: {
      minutes: { type: "string", default: "10" },
      instances: { type: "string", default: "1" },
      connections: { type: "string", default: "64" },
      // wrk's requests a second in all, on a fixed schedule (the Zipf load paced, not a closed loop: phases compare at one rate).
      rate: { type: "string" },
      // Departing visitors beside wrk for the whole soak: N closed loops, each request left 1–30 ms after it was sent (0: none).
      departing: { type: "string", default: "0" },
      rounds: { type: "boolean", default: false },
      // The worker's CACHE_POLICIES, as a shop would set it, e.g. '{"product":{"ttl":3600}}'.
      policies: { type: "string" },
      // Windows (1-based) during which instance 1's V8 profiler records, e.g. one before and one after the products' first TTL.
      "profile-windows": { type: "string" },
      // The flood scenarios (flood.ts) instead of the soak: departing, crawler or both.
      flood: { type: "string" },
      "flood-seconds": { type: "string", default: "15" },
      // Both floods' connections (default: departing 8, crawler 32).
      "flood-connections": { type: "string" },
      // wrk's connections of the Zipf load beside each flood's second run, a client per 4 (0: no second run).
      "flood-zipf": { type: "string", default: "16" },
      // How the departing visitors leave: "reported" (a reset: workerd cancels the request) or "unreported" (a plain close: it never hears of it).
      "flood-departures": { type: "string", default: "reported" },
      // The isolate's V8 CPU profile over each flood phase (not the baselines), summarised after the run's table.
      "flood-profile": { type: "boolean", default: false },
      // The departing flood asks this path instead of random products: /healthz measures what its requests cost the runtime alone.
      "flood-path": { type: "string" },
      // Results written as bench/results/<name>-<suffix>.* (e.g. a smoke run that must not overwrite the committed figures).
      "results-suffix": { type: "string" },
      // The location tier on (the instances share one location cache); off otherwise, as in every benchmark (bench/stack.ts says why).
      location: { type: "boolean", default: false },
      // The instances' FLEET binding delivers to a local recorder, and the fleet view is checked after the load; off: unbound (to measure what the local binding costs).
      "no-fleet": { type: "boolean", default: false },
      // Every Redis call held this long by the gateway first: Redis in another region, as Upstash is for a distant data center (default 0).
      "redis-rtt": { type: "string", default: "0" },
      // Seconds into the load (multiples of 30, comma-separated) at which every isolate is stopped and started again (a redeploy).
      "restart-at": { type: "string" },
      // Seconds into the load (a multiple of 30) at which every isolate is restarted with LOCATION_CACHE=off, for the rest of the run.
      "location-off-at": { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  const minutes = wholeNumber(COMMAND, "--minutes", args.minutes, 1);
  const instances = wholeNumber(COMMAND, "--instances", args.instances, 1, 2);
  const connections = wholeNumber(COMMAND, "--connections", args.connections, 2);
  const departingConnections = wholeNumber(COMMAND, "--departing", args.departing, 0, 256);
  const resultsSuffix = args["results-suffix"] === undefined ? "" : `-${checkedSuffix(COMMAND, args["results-suffix"])}`;
  if (args.policies !== undefined && !isJsonObject(args.policies))
    usageError(COMMAND, `--policies must be a JSON object (the worker's CACHE_POLICIES), got ${JSON.stringify(args.policies)}`);
  const profileWindows = wholeNumbers(COMMAND, "--profile-windows", args["profile-windows"] ?? "", 1);
  // Restarts fall between windows, before the load's end; turning the location tier off needs it on first.
  const loadS = minutes * 60;
  const betweenWindows = (s: number) => Number.isInteger(s) && s > 0 && s % 30 === 0 && s < loadS;
  const restartAt = (args["restart-at"] ?? "").split(",").filter(Boolean).map(Number);
  if (!restartAt.every(betweenWindows))
    usageError(
      COMMAND,
      `--restart-at takes multiples of 30 seconds before the load's end (${loadS} s), comma-separated, got ${JSON.stringify(args["restart-at"])}`,
    );
  const locationOffAt = args["location-off-at"] === undefined ? null : Number(args["location-off-at"]);
  if (locationOffAt !== null && !betweenWindows(locationOffAt))
    usageError(
      COMMAND,
      `--location-off-at must be a multiple of 30 seconds before the load's end (${loadS} s), got ${JSON.stringify(args["location-off-at"])}`,
    );
  if ((restartAt.length > 0 || locationOffAt !== null) && args.rounds) usageError(COMMAND, "--restart-at and --location-off-at do not go with --rounds");
  if (locationOffAt !== null && !args.location) usageError(COMMAND, "--location-off-at needs --location (the tier on first)");
  const redisRttMs = wholeNumber(COMMAND, "--redis-rtt", args["redis-rtt"], 0, 200);
  const rate = args.rate === undefined ? null : wholeNumber(COMMAND, "--rate", args.rate, 1);
  const floods = args.flood === undefined ? null : FLOOD_KINDS[oneOf(COMMAND, "--flood", args.flood, ["departing", "crawler", "both"])];
  const floodSeconds = wholeNumber(COMMAND, "--flood-seconds", args["flood-seconds"], 1, 120);
  const floodConnections = args["flood-connections"] === undefined ? null : wholeNumber(COMMAND, "--flood-connections", args["flood-connections"], 2, 256);
  const floodZipf = wholeNumber(COMMAND, "--flood-zipf", args["flood-zipf"], 0, 256);
  if (floodZipf === 1) usageError(COMMAND, `--flood-zipf must be 0 (no such run) or 2 to 256, got ${JSON.stringify(args["flood-zipf"])}`);
  const departures = oneOf(COMMAND, "--flood-departures", args["flood-departures"], ["reported", "unreported"]);
  if (args["flood-path"] !== undefined && !/^\/[\w./?=&-]*$/.test(args["flood-path"]))
    usageError(COMMAND, `--flood-path must be a path such as /healthz (letters, digits and _ . / ? = & -), got ${JSON.stringify(args["flood-path"])}`);
  if (rate !== null && args.rounds) usageError(COMMAND, "--rate does not go with --rounds (four closed-loop rounds)");
  if (floods !== null && rate !== null) usageError(COMMAND, "--rate does not go with --flood");
  if (floods !== null && departingConnections > 0) usageError(COMMAND, "--departing does not go with --flood (the departing flood is its own)");
  if (floods === null && args["flood-profile"]) usageError(COMMAND, "--flood-profile needs --flood");
  return {
    args,
    minutes,
    instances,
    connections,
    departingConnections,
    resultsSuffix,
    profileWindows,
    restartAt,
    locationOffAt,
    redisRttMs,
    rate,
    floods,
    floodSeconds,
    floodConnections,
    floodZipf,
    departuresReported: departures !== "unreported",
    departingPath: args["flood-path"],
    mode: args.rounds ? ("rounds" as const) : ("soak" as const),
    plan: args.rounds ? PLANS.rounds() : PLANS.soak(minutes),
  };
}
export type SoakOptions = ReturnType<typeof soakOptions>;
