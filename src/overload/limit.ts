// The limit of cold pages in progress: AIMD on CoDel's standing queue of the lag (docs/architecture.md#overload).
import type { Clock } from "../shared/clock";

/** CoDel's target (RFC 8289, §4.4): the sojourn a busy isolate may run at for good (5 ms: "5–10% of the interval"). */
export const TARGET_MS = 5;
/** CoDel's interval (RFC 8289, §4.3): how long every sample must stay above the target before it is congestion (100 ms: "a worst-case RTT"). */
export const INTERVAL_MS = 100;

export type ColdLimit = ReturnType<typeof createColdLimit>;

/** `min`: the floor, where it starts (one browser's pages, ./fairShare.ts); `max`: the ceiling. */
export function createColdLimit({ clock, min, max }: { clock: Clock; min: number; max: number }) {
  let limit = min;
  /** CoDel's first_above_time: since when every sample has been above TARGET_MS, plus INTERVAL_MS; 0 while the last was within it. */
  let standingFrom = 0;
  let lastSampleAt = Number.NEGATIVE_INFINITY;
  let lastDecreaseAt = Number.NEGATIVE_INFINITY;
  // No sample for an interval: nothing is queued to show a queue.
  const congested = () => standingFrom > 0 && clock.now() >= standingFrom && clock.now() - lastSampleAt < INTERVAL_MS;
  return {
    /** Cold pages that may be in progress now. */
    current: () => Math.floor(limit),
    /** A sample, in ms: the isolate's lag read at a reply. */
    sample(ms: number) {
      lastSampleAt = clock.now();
      if (ms <= TARGET_MS) standingFrom = 0;
      else if (standingFrom === 0) standingFrom = lastSampleAt + INTERVAL_MS;
    },
    /** Whether every sample of the last interval was above the target (and samples are still coming). */
    congested,
    /** A cold page ended with `inFlight` in progress (itself included): the limit grows, or (once an interval at most) halves. */
    update(inFlight: number) {
      if (!congested()) {
        if (inFlight * 2 >= limit) limit = Math.min(max, limit + 1);
      } else if (clock.now() - lastDecreaseAt >= INTERVAL_MS) {
        // TCP's multiplicative decrease (RFC 5681), once a round trip: pages ending together in one congested moment are one sign.
        lastDecreaseAt = clock.now();
        limit = Math.max(min, limit / 2);
      }
    },
  };
}
