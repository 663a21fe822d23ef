// How many pages needing new work an isolate takes on at once
// (docs/architecture.md#overload): an AIMD concurrency limit, as Netflix's
// concurrency-limits library has it (AIMDLimit: add one while at least half
// the limit is in use, multiply by 0.9 on a sign of congestion; TCP's
// congestion avoidance, RFC 5681, is the same law), whose sign of congestion
// is CoDel's standing queue (RFC 8289): the isolate has run more than
// TARGET_MS late (./lag.ts) for a whole INTERVAL_MS. A burst that the
// isolate works off within the interval is no congestion; a queue that
// stands is, whatever made it (a crawler's renders, a flood of first views).
//
// Every request an isolate takes queues behind the work already in it, and
// a cold page's work (replies to parse, a page to render) lands in that
// queue: fewer cold pages in progress, a shorter queue for the cached pages.
// The limit never falls below one page: cold pages never stop altogether,
// and a load that keeps the isolate late whatever the cold pages do (closed-
// loop visitors of cached pages) still has its first views served, one
// after the other.
//
// Plain numbers, read and written by the requests themselves.
import type { Clock } from "../shared/clock";

/** CoDel's target (RFC 8289, §4.4): the lateness a busy isolate may run at for good (5 ms: "5–10% of the interval"). */
export const TARGET_MS = 5;
/** CoDel's interval (RFC 8289, §4.3): how long the lateness must stand before it is congestion (100 ms: "a worst-case RTT"). */
export const INTERVAL_MS = 100;
/** AIMDLimit's backoffRatio (Netflix concurrency-limits' default): what is left of the limit at each sign of congestion. */
const BACKOFF = 0.9;

export interface ColdLimit {
  /** Cold pages that may be in progress now. */
  current(): number;
  /** Whether the isolate's lateness stands (CoDel's congestion): also read by those who must not take a late isolate's time-outs for a silent Redis. */
  congested(): boolean;
  /** A cold page ended with `inFlight` in progress (itself included): the limit grows or shrinks. */
  update(inFlight: number): void;
}

export function createColdLimit({ clock, lateness, max }: { clock: Clock; lateness: () => number; max: number }): ColdLimit {
  let limit = 1;
  /** When the lateness went above TARGET_MS and has stayed there since, plus INTERVAL_MS; 0 while it is below. */
  let standingFrom = 0;
  function congested(): boolean {
    const now = clock.now();
    if (lateness() <= TARGET_MS) {
      standingFrom = 0;
      return false;
    }
    if (standingFrom === 0) standingFrom = now + INTERVAL_MS;
    return now >= standingFrom;
  }
  return {
    current: () => Math.floor(limit),
    congested,
    update(inFlight) {
      if (congested()) limit = Math.max(1, limit * BACKOFF);
      else if (inFlight * 2 >= limit) limit = Math.min(max, limit + 1);
    },
  };
}
