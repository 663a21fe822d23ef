// How many cold pages may be in progress at once: an adaptive concurrency
// limit. Its update is Gradient2's (Netflix concurrency-limits): once per
// interval, limit ← limit × gradient + allowance, smoothed, the gradient
// kept within [0.5, 1]. What it follows is not the cold pages' own latency
// (mostly the origin's, which a slower origin raises whatever the isolate
// does) but what cold work costs every page: how late the isolate runs
// (./lag.ts), measured as CoDel measures a queue, by the smallest lag of the
// interval (the part that did not drain), against a fixed target
// (SHED_LAG_MS). Against its own long-run average, as Gradient2 has it, a
// flood that lasted raised the baseline and the limit grew
// (docs/performance.md, "Overload floods").
//
// The allowance keeps the limit at 8 or more while the isolate runs late
// whatever the cold pages do (closed-loop visitors of cached pages): cold
// pages keep moving, at a CPU share eight cannot make large. While the lag
// is within the target, the limit grows by a share of itself each interval
// it was half used (TCP's slow start, smoothed as the rest): cold pages
// waiting on a slow origin, which cost the isolate nothing, are not held to
// a limit learnt under a flood for longer than a second or two.
// Plain numbers, updated by whichever request looks after the interval.
import type { Clock } from "../shared/clock";

export interface ColdLimit {
  /** Cold pages that may be in progress now. */
  limit(): number;
  /** Whether the last interval's smallest lag was over the target (the limit then shrinks). */
  late(): boolean;
  /** A look at the isolate: its lag now and the cold pages in progress. */
  observe(lagMs: number, inProgress: number): void;
}

const INTERVAL_MS = 100;
/** Gradient2's queue allowance: the limit where a gradient of 0.5 holds it is twice this. */
const ALLOWANCE = 4;
/** Share of each interval's new limit taken (Gradient2's smoothing). */
const SMOOTHING = 0.2;
const INITIAL = 16;

export function createColdLimit({ clock, targetMs, ceiling }: { clock: Clock; targetMs: number; ceiling: number }): ColdLimit {
  let limit = Math.min(ceiling, INITIAL);
  let lastLate = false;
  let intervalFrom = clock.now();
  let smallestLag = Number.POSITIVE_INFINITY;
  let busiest = 0;

  function update(): void {
    if (smallestLag === Number.POSITIVE_INFINITY) return;
    lastLate = smallestLag > targetMs;
    if (lastLate) {
      const gradient = Math.max(0.5, targetMs / smallestLag);
      limit = limit * (1 - SMOOTHING) + (limit * gradient + ALLOWANCE) * SMOOTHING;
    } else if (busiest >= limit / 2) {
      limit *= 1 + SMOOTHING;
    }
    limit = Math.max(1, Math.min(ceiling, limit));
  }

  return {
    limit: () => Math.max(1, Math.floor(limit)),
    late: () => lastLate,
    observe(lagMs, inProgress) {
      const now = clock.now();
      if (now - intervalFrom >= INTERVAL_MS) {
        // After a quiet spell the last interval says nothing of now.
        if (now - intervalFrom < 2 * INTERVAL_MS) update();
        else lastLate = false;
        intervalFrom = now;
        smallestLag = Number.POSITIVE_INFINITY;
        busiest = 0;
      }
      smallestLag = Math.min(smallestLag, lagMs);
      busiest = Math.max(busiest, inProgress);
    },
  };
}
