// What bench:peers runs and what each phase yields: the scenarios' names and
// labels, their seeds and durations (full and --quick), and the Row each one
// adds to the report. The order in which they run: scenarios.ts.
import type { Phase, Workload } from "../lib/wrk";
import type { RedisUsage } from "../../dev/harness/redisProbe";
import { PRODUCT_POLICY, type Settings, type SystemName } from "./systems";

/** The cold herd: this many requests at once for one product nobody asked for. */
export const HERD_REQUESTS = 1000;

export type ScenarioName =
  | "warm-up"
  | "fixed"
  | "saturation"
  | "cached"
  | "healthz"
  | "healthz-fixed"
  | "herd"
  | "origin-slow"
  | "origin-down"
  | "price-change"
  | "redis-down";

export const SCENARIO_LABELS: Record<ScenarioName, string> = {
  "warm-up": "warm-up",
  fixed: "fixed offered load",
  saturation: "saturation",
  cached: "saturation, cached set",
  healthz: "/healthz floor",
  "healthz-fixed": "/healthz floor, fixed offered load",
  herd: `cold herd ×${HERD_REQUESTS}`,
  "origin-slow": "origin +500 ms",
  "origin-down": "origin down",
  "price-change": "price change",
  "redis-down": "Redis down",
};

/** Every phase has its own seed, so that every system gets the same draws in it. */
export const SEEDS = { cached: 10, warmUp: 1, fixed: 2, saturation: 3, census: 4, slow: 5, recover: 6, down: 7, price: 8, redisDown: 9, calibrationProbe: 11 };

export interface Staleness {
  id: string;
  oldPrice: string | null;
  newPrice: string;
  /** What was done right after the change (PURGE, POST /__purge, nothing). */
  purge: string;
  /** ms the purge call took. */
  purgeMs: number | null;
  /** Seconds from the committed change until every response (every target) showed the new price; null: not within capS. */
  seconds: number | null;
  capS: number;
  /** Poll answers (every 50 ms, per target) that still showed the old price after the change. */
  oldAnswers: number;
  polls: number;
  pollErrors: number;
  /** Seconds between the system's first Zipf request (rank 1 comes within the first few) and the change: its cache entry's age at most. */
  entryAgeS: number;
  /** True while the poll goes on after the measured load ended (Nginx: until expiry). */
  pending: boolean;
}

export interface Row {
  system: SystemName;
  scenario: ScenarioName;
  load: Phase;
  /** Requests the system's demo origin received during the scenario, per service. */
  origin: Record<string, number>;
  originTotal: number;
  /** CPU seconds per role during the phase (see procs.ts cpuSample), and its wall time. */
  cpu: { wallS: number; seconds: Record<string, number> };
  /** The tiers: Redis's own count during the phase. */
  redis?: RedisUsage;
  staleness?: Staleness;
  extra: Record<string, unknown>;
  notes: string[];
}

export interface Context {
  settings: Settings;
  signal: AbortSignal;
  workload: Workload;
  /** Requests a second of the paced phases. */
  rate: number;
  phase(label: string, ms?: number): void;
  note(text: string): void;
}

/** The phases, full and --quick, in seconds. */
export function durations(quick: boolean) {
  const q = <T>(full: T, quickValue: T) => (quick ? quickValue : full);
  return {
    /** The top Zipf ranks each asked for once, before anything is measured (71% of the draws go to the top 3,000). */
    walkRanks: q(3000, 500),
    /** The calibration's closed-loop probe, right after its walk. */
    probeS: q(5, 2),
    warmUpS: q(10, 3),
    fixedS: q(15, 5),
    saturationS: q(15, 5),
    cachedS: q(6, 3),
    healthzS: q(8, 3),
    censusS: q(4, 3),
    /** The calibration tier, idle with its two isolates up, for the Redis idle cost. */
    idleS: q(60, 10),
    ceilingS: q(4, 3),
    faultS: q(6, 4),
    /** Idle after a fault is cleared (longer than the origin breaker's 2-s cool-down), then paced load, not measured. */
    pauseS: 3,
    recoverS: 2,
    /** The paced load around the price change; the change comes after the lead. */
    priceLoadS: q(8, 5),
    priceLeadS: 1,
    /** Cap on the price poll: the product ttl + 30 s (full); quick runs stop after 20 s. */
    priceCapS: quick ? 20 : PRODUCT_POLICY.ttlS + 30,
  };
}
export type Durations = ReturnType<typeof durations>;
