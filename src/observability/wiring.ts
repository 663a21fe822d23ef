// How the tier feeds its observers: breaker state changes and origin call
// outcomes go to the metrics (status page) and to the structured log.
import type { BreakerState } from "../shared/breaker";
import type { Clock } from "../shared/clock";
import type { OriginClientOptions } from "../origin/client";
import { createRateLimitedLog, logEvent } from "../shared/log";
import type { Fleet, FleetPage } from "./fleet";
import type { Metrics, PageRecord } from "./metrics";
import type { Timings } from "../cache/pageRequest";
import { DEFAULTS } from "../config/defaults";
import type { Background } from "../shared/subrequests";

export type RecordPage = (view: PageRecord & FleetPage, colo: string | undefined, background: Background) => void;

/** Counts a page view on this isolate's status page and tells the fleet of it: the one place pages are counted. */
export function recordPages(metrics: Metrics, fleet: Fleet): RecordPage {
  return (view, colo, background) => {
    metrics.recordPage(view);
    fleet.page(view, colo, background);
  };
}

/** A breaker's `onChange`: one log line per change (error when it opens), its state noted for the status page and told to the fleet. */
export function watchBreaker(name: string, metrics?: Metrics, fleet?: Fleet): (from: BreakerState, to: BreakerState) => void {
  return (from, to) => {
    metrics?.noteBreaker(name, to);
    fleet?.breaker(name, from, to);
    logEvent("breaker", { name, from, to }, to === "open" ? "error" : to === "half-open" ? "warn" : "info");
  };
}

/**
 * The origin client's `onFetch`: counts every call, and logs failures rate-limited per service. A
 * background refresh that gave way because visitors held the origin slots is counted, not logged:
 * that is the limiter working as designed (the visitor got the stale copy), not an origin problem.
 */
export function watchOrigin(metrics: Metrics, clock: Clock, fleet?: Fleet): NonNullable<OriginClientOptions["onFetch"]> {
  const failureLog = createRateLimitedLog({ intervalMs: DEFAULTS.logEveryMs, clock });
  return (service, outcome, detail, priority) => {
    metrics.recordOriginFetch(service, outcome);
    fleet?.origin(service, outcome);
    if (outcome === "found" || outcome === "absent" || outcome === "abandoned") return;
    if (outcome === "overloaded" && priority === "refresh") return;
    failureLog(service, "origin_failure", { service, failure: outcome, detail });
  };
}

/** What a product page's read cost, for `watchSlowPages`. */
export interface PageRead {
  id: string;
  /** From the request's arrival to its data read (purge sync included). */
  ms: number;
  /** The read's parts (Server-Timing: l1, l2, origin). */
  timings: Timings;
  /** The page's Cache-Status: where each resource came from, and whether it waited for another's fill. */
  cacheStatus: string;
}

/**
 * A warning for a page whose data took `slowMs` or longer to read, at most one line per interval with the count of the others.
 * `slowMs` is the longest origin timeout (tier.ts): a read longer than any one service is given has waited on more than one
 * answer (a slot, a lock's winner, a turn, a retry, a service that timed out), which its Cache-Status and timings name.
 */
export function watchSlowPages(slowMs: number, clock: Clock): (read: PageRead) => void {
  const log = createRateLimitedLog({ intervalMs: DEFAULTS.logEveryMs, clock });
  return (read) => {
    if (read.ms >= slowMs) log("slow_page", "slow_page", { ...read, slowMs }, "warn");
  };
}
