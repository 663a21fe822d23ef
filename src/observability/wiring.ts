// How the tier feeds its observers: breaker state changes and origin call
// outcomes go to the metrics (status page) and to the structured log.
import type { BreakerState } from "../shared/breaker";
import type { Clock } from "../shared/clock";
import type { OriginClientOptions } from "../origin/client";
import { createRateLimitedLog, logEvent } from "./log";
import type { Metrics } from "./metrics";

/** Origin failures are logged at most once per service per this interval; the rest are counted as `suppressed`. */
const ORIGIN_FAILURE_LOG_INTERVAL_MS = 10_000;

/** A breaker's `onChange`: one log line per change (error when it opens), and its state noted for the status page. */
export function watchBreaker(name: string, metrics?: Metrics): (from: BreakerState, to: BreakerState) => void {
  return (from, to) => {
    metrics?.noteBreaker(name, to);
    logEvent("breaker", { name, from, to }, to === "open" ? "error" : to === "half-open" ? "warn" : "info");
  };
}

/**
 * The origin client's `onFetch`: counts every call, and logs failures
 * rate-limited per service. A background refresh that gave way because
 * visitors held the origin slots is counted, not logged: that is the limiter
 * working as designed (the visitor got the stale copy), and logging it sent
 * on-call engineers looking for an origin problem that was not there.
 */
export function watchOrigin(metrics: Metrics, clock: Clock): NonNullable<OriginClientOptions["onFetch"]> {
  const failureLog = createRateLimitedLog({ intervalMs: ORIGIN_FAILURE_LOG_INTERVAL_MS, clock });
  return (service, outcome, detail, priority) => {
    metrics.recordOriginFetch(service, outcome);
    if (outcome === "found" || outcome === "absent") return;
    if (outcome === "overloaded" && priority === "refresh") return;
    failureLog(service, "origin_failure", { service, failure: outcome, detail });
  };
}
