// bench:soak's location tier (issue 31): the isolates share one location
// cache (dev/harness/locationServer.ts: a process of its own, as a data
// center's cache is outside its isolates; emptied at the start of every run),
// and `--restart-at` / `--location-off-at` stop every workerd process
// mid-soak and start it again on the same port: L1 and the purge view are
// lost as after a deploy; L2 (Redis) and the location cache survive.
// Right after a restart, before the load resumes, a probe asks for pages the
// location holds but no new isolate's L1 does, then for the same pages again
// (L1 hits now): their latencies side by side. See bench/soak/README.md.
import { useLocationServer } from "../../dev/harness/bundle";
import { member } from "../../dev/harness/cacheStatus";
import { forkLocationServer, type LocationServerStats } from "../../dev/harness/locationServer";
import { PAGE_RESOURCES } from "../../src/origin/resources";
import { startWorkers, type WorkerInstance, type WorkerLogs } from "../stack";
import { countStatuses, get, percentile, type Answer } from "../lib/probe";

type OnCleanup = Parameters<typeof startWorkers>[3];

/** The isolates of one data center: workerd processes sharing one location cache, restartable in place. */
export interface Fleet {
  /** The running instances; replaced in place by a restart (same ports, new processes). */
  readonly workers: WorkerInstance[];
  /** What the location cache holds and answered so far. */
  location(): Promise<LocationServerStats>;
  /** Stops every workerd process, then starts them again on the same ports, the location tier `on` or `off`; the ms it took. */
  restart(location: "on" | "off"): Promise<number>;
  /** Stops every workerd process and the location cache. */
  stop(): Promise<void>;
}

export async function startFleet(
  count: number,
  bindings: Record<string, string>,
  logs: WorkerLogs,
  onCleanup: OnCleanup,
  fleetPointsUrl?: string,
): Promise<Fleet> {
  const location = await forkLocationServer();
  const closeLocation = onCleanup("location cache", () => location.close());
  useLocationServer(location.address);
  const recorded = fleetPointsUrl === undefined ? {} : { fleetPointsUrl };
  let running = await startWorkers(count, bindings, logs, onCleanup, true, recorded);
  const workers = [...running.workers];
  return {
    workers,
    location: () => location.stats(),
    async restart(location) {
      const started = performance.now();
      const ports = workers.map((w) => Number(new URL(w.url).port));
      await running.stop();
      running = await startWorkers(count, { ...bindings, LOCATION_CACHE: location }, logs, onCleanup, true, { ports, ...recorded });
      workers.splice(0, workers.length, ...running.workers);
      return Math.round(performance.now() - started);
    },
    async stop() {
      await running.stop();
      await closeLocation();
    },
  };
}

const DEPTH = ["pp-l1", "pp-location", "pp-l2", "pp-origin"];

/** The deepest tier that answered a part of the page (Cache-Status), e.g. "pp-location"; "?" without the header. */
function deepestTier(cacheStatus: string | undefined): string {
  if (!cacheStatus) return "?";
  const tiers = PAGE_RESOURCES.map((resource) => member(cacheStatus, resource).split(";")[0] ?? "");
  return DEPTH[Math.max(...tiers.map((tier) => DEPTH.indexOf(tier)))] ?? "?";
}

/** Server-Timing's `location;dur=…` (ms), if the page has one. */
function locationDur(serverTiming: string | undefined): number | null {
  const match = /(?:^|,)\s*location;dur=([\d.]+)/.exec(serverTiming ?? "");
  return match ? Number(match[1]) : null;
}

interface ProbePass {
  /** Pages by the deepest tier that answered one of their parts. */
  byTier: Record<string, number>;
  /** p50 ms of every page asked, and of those whose deepest tier was the expected `tier` (null: none). */
  p50Ms: number;
  tier: string;
  tierP50Ms: number | null;
  tierPages: number;
  /** p50 of Server-Timing's location;dur over the pages that have one (null: none). */
  locationDurP50Ms: number | null;
  statuses: Record<string, number>;
}

export interface LocationProbe {
  pages: number;
  /** Each page's first ask after the restart (a location hit expected; an L2 one with the tier off), and its second, at once (an L1 hit). */
  first: ProbePass;
  again: ProbePass;
}

/**
 * `paths` asked one at a time, page i of instance i mod n, each on a socket
 * of its own, and each asked again at once: the first ask finds the page in
 * the location (`expected` "pp-location"; "pp-l2" with the tier off) and in
 * no new L1, the second in L1. Run right after a restart and before the
 * load. Interleaved, so that whatever drifts over the probe's seconds (the
 * isolate's code still being compiled, its first purge-log reads, other
 * processes) falls on both kinds alike, where two passes (every first ask,
 * then every second) put it on the first pass alone (docs/performance.md,
 * "The location tier").
 * `warmPaths`, other pages, are asked first the same way and not measured: a
 * new isolate's first pages run its code cold (V8 compiles it as it goes).
 */
export async function probeLocation(
  targets: readonly string[],
  paths: readonly string[],
  expected: string,
  warmPaths: readonly string[],
): Promise<LocationProbe> {
  for (const [i, path] of warmPaths.entries()) await get(`${targets[i % targets.length]}${path}`);
  const firstAnswers = [];
  const againAnswers = [];
  for (const [i, path] of paths.entries()) {
    const url = `${targets[i % targets.length]}${path}`;
    firstAnswers.push(await get(url));
    againAnswers.push(await get(url));
  }
  const pass = (answers: readonly Answer[], tier: string): ProbePass => {
    const tiers = answers.map((a) => deepestTier(a.headers?.["cache-status"] as string | undefined));
    const sorted = (ms: number[]) => ms.sort((a, b) => a - b);
    const ofTier = sorted(answers.filter((_, i) => tiers[i] === tier).map((a) => a.ms));
    const durs = sorted(answers.map((a) => locationDur(a.headers?.["server-timing"] as string | undefined)).filter((d): d is number => d !== null));
    const count = (keys: string[]) => keys.reduce<Record<string, number>>((c, k) => ((c[k] = (c[k] ?? 0) + 1), c), {});
    return {
      byTier: count(tiers),
      p50Ms: percentile(sorted(answers.map((a) => a.ms)), 50),
      tier,
      tierP50Ms: ofTier.length ? percentile(ofTier, 50) : null,
      tierPages: ofTier.length,
      locationDurP50Ms: durs.length ? percentile(durs, 50) : null,
      statuses: countStatuses(answers),
    };
  };
  const first = pass(firstAnswers, expected);
  const again = pass(againAnswers, "pp-l1");
  return { pages: paths.length, first, again };
}
