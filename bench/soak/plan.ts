// bench:soak's settings: the stack, the herd, the cold products, the
// cancellers, the heap limit, the two modes' plans, and the command line
// (read and checked; a wrong one prints the usage and exits).
import { parseArgs } from "node:util";

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

/** The command line, read and checked: exits with the usage when it is wrong (or asked for). */
export function soakOptions() {
  const { values: args } = parseArgs({
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
  const minutes = Number(args.minutes);
  const instances = Number(args.instances);
  const connections = Number(args.connections);
  const departingConnections = Number(args.departing);
  const resultsSuffix = args["results-suffix"] === undefined ? "" : `-${args["results-suffix"]}`;
  const profileWindows = (args["profile-windows"] ?? "").split(",").filter(Boolean).map(Number);
  const restartAt = (args["restart-at"] ?? "").split(",").filter(Boolean).map(Number);
  const locationOffAt = args["location-off-at"] === undefined ? null : Number(args["location-off-at"]);
  const redisRttMs = Number(args["redis-rtt"]);
  const rate = args.rate === undefined ? null : Number(args.rate);
  /** Restarts fall between windows, before the load's end; turning the location tier off needs it on first. */
  const restartsValid =
    (locationOffAt === null || args.location) &&
    [...restartAt, ...(locationOffAt === null ? [] : [locationOffAt])].every(
      (s) => !args.rounds && Number.isInteger(s) && s > 0 && s % 30 === 0 && s < minutes * 60,
    );
  const FLOODS = { departing: ["departing"], crawler: ["crawler"], both: ["departing", "crawler"] } as const;
  const floods = args.flood === undefined ? null : (FLOODS[args.flood as keyof typeof FLOODS] ?? []);
  const floodSeconds = Number(args["flood-seconds"]);
  const floodConnections = args["flood-connections"] === undefined ? null : Number(args["flood-connections"]);
  const floodZipf = Number(args["flood-zipf"]);
  const floodsValid =
    floods === null ||
    (floods.length > 0 &&
      Number.isInteger(floodSeconds) &&
      floodSeconds >= 1 &&
      floodSeconds <= 120 &&
      (floodConnections === null || (Number.isInteger(floodConnections) && floodConnections >= 2 && floodConnections <= 256)) &&
      Number.isInteger(floodZipf) &&
      (floodZipf === 0 || (floodZipf >= 2 && floodZipf <= 256)) &&
      ["reported", "unreported"].includes(args["flood-departures"] ?? "") &&
      (args["flood-path"] === undefined || /^\/[\w./?=&-]*$/.test(args["flood-path"])));
  const policiesValid =
    args.policies === undefined ||
    (() => {
      try {
        return typeof JSON.parse(args.policies) === "object";
      } catch {
        return false;
      }
    })();
  if (
    args.help ||
    !Number.isInteger(minutes) ||
    minutes < 1 ||
    ![1, 2].includes(instances) ||
    !Number.isInteger(connections) ||
    connections < 2 ||
    !Number.isInteger(departingConnections) ||
    departingConnections < 0 ||
    departingConnections > 256 ||
    (departingConnections > 0 && floods !== null) ||
    (args["flood-profile"] && floods === null) ||
    !/^[A-Za-z0-9_-]*$/.test(args["results-suffix"] ?? "") ||
    !policiesValid ||
    !profileWindows.every((n) => Number.isInteger(n) && n >= 1) ||
    !restartsValid ||
    !floodsValid ||
    (rate !== null && (!Number.isInteger(rate) || rate < 1 || args.rounds || floods !== null)) ||
    !Number.isInteger(redisRttMs) ||
    redisRttMs < 0 ||
    redisRttMs > 200
  ) {
    (args.help ? console.log : console.error)(
      "usage: npm run bench:soak -- [--minutes N (≥ 1, default 10)] [--instances 1|2] [--connections N (≥ 2, default 64)] [--rate N (req/s in all, paced; default: closed loop)] [--departing N (0–256 departing visitors beside wrk, default 0)] [--rounds] [--policies JSON (CACHE_POLICIES)] [--profile-windows 8,14 (1-based)] [--location] [--restart-at S,S… (multiples of 30 s)] [--location-off-at S (with --location)] [--redis-rtt MS (0–200, default 0)] [--no-fleet] [--results-suffix NAME]\n" +
        "       npm run bench:soak -- --flood departing|crawler|both [--flood-seconds N (1–120, default 15)] [--flood-connections N (2–256; default departing 8, crawler 32)] [--flood-zipf N (wrk connections beside each flood's second run, default 16; 0: no such run)] [--flood-departures reported|unreported (a reset, or a plain close the worker never hears of; default reported)] [--flood-path /healthz (the departing flood asks this instead of random products)] [--flood-profile] [--results-suffix NAME]",
    );
    process.exit(args.help ? 0 : 2);
  }
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
    departuresReported: args["flood-departures"] !== "unreported",
    departingPath: args["flood-path"],
    mode: args.rounds ? ("rounds" as const) : ("soak" as const),
    plan: args.rounds ? PLANS.rounds() : PLANS.soak(minutes),
  };
}
export type SoakOptions = ReturnType<typeof soakOptions>;
