// How many pages needing new work an isolate takes on at once
// (docs/architecture.md#overload): an AIMD concurrency limit. It adds one
// page each time a page ends with at least half the limit in use (Netflix
// concurrency-limits' AIMDLimit), and halves at most once an interval while
// the isolate is congested, as TCP halves its window once a round trip
// (RFC 5681): pages that end together in one congested moment are one sign
// of it, not one each. Congested is CoDel's standing queue (RFC 8289): every
// sample of the last INTERVAL_MS above TARGET_MS. A sample is the isolate's
// lag read at a reply (./lag.ts: how long replies wait to be read, the queue
// new requests wait in too); one within the target shows the queue drained,
// as one packet's short sojourn does in CoDel.
//
// Every request an isolate takes queues behind the work already in it, and
// a cold page's work (replies to parse, a page to render) lands in that
// queue: fewer cold pages in progress, a shorter queue for the cached pages.
// The limit never falls below its floor, one browser's pages (./client.ts):
// cold pages never stop, and a lag read wrong costs latency, not 503s.
//
// Plain numbers, read and written by the requests themselves.
import type { Clock } from "../shared/clock";

/** CoDel's target (RFC 8289, §4.4): the sojourn a busy isolate may run at for good (5 ms: "5–10% of the interval"). */
export const TARGET_MS = 5;
/** CoDel's interval (RFC 8289, §4.3): how long every sample must stay above the target before it is congestion (100 ms: "a worst-case RTT"). */
export const INTERVAL_MS = 100;

export interface ColdLimit {
  /** Cold pages that may be in progress now. */
  current(): number;
  /** A sample, in ms: the isolate's lag read at a reply. */
  sample(ms: number): void;
  /** Whether every sample of the last interval was above the target (and samples are still coming). */
  congested(): boolean;
  /** A cold page ended with `inFlight` in progress (itself included): the limit grows, or (once an interval at most) shrinks. */
  update(inFlight: number): void;
}

/** `min`: the floor (./index.ts: one browser's pages, ./client.ts, or `max` when that is fewer); `max`: the ceiling. */
export function createColdLimit({ clock, min, max }: { clock: Clock; min: number; max: number }): ColdLimit {
  let limit = min;
  /** Since when every sample has been above TARGET_MS, plus INTERVAL_MS (CoDel's first_above_time); 0 while the last was within it. */
  let standingFrom = 0;
  let lastSampleAt = Number.NEGATIVE_INFINITY;
  let lastDecreaseAt = Number.NEGATIVE_INFINITY;
  function congested(): boolean {
    const now = clock.now();
    // No sample for an interval: nothing is queued to show a queue.
    return standingFrom > 0 && now >= standingFrom && now - lastSampleAt < INTERVAL_MS;
  }
  return {
    current: () => Math.floor(limit),
    sample(ms) {
      const now = clock.now();
      lastSampleAt = now;
      if (ms <= TARGET_MS) standingFrom = 0;
      else if (standingFrom === 0) standingFrom = now + INTERVAL_MS;
    },
    congested,
    update(inFlight) {
      if (congested()) {
        const now = clock.now();
        if (now - lastDecreaseAt < INTERVAL_MS) return;
        lastDecreaseAt = now;
        // TCP's multiplicative decrease (RFC 5681): half the limit is left after an interval of congestion.
        limit = Math.max(min, limit / 2);
      } else if (inFlight * 2 >= limit) limit = Math.min(max, limit + 1);
    },
  };
}
