// What the isolate's recent pages were, counted over the last two seconds as
// two half-windows of plain numbers (the current half and the one before
// it): the share of cold pages (admission.ts: mostly cold?) and of visitors
// who left before their answer (patience.ts: a departing flood?). Read and
// written by the requests themselves (no timer): a half rolls over when a
// request finds it past its end.
import type { Clock } from "../shared/clock";

/**
 * The window: long enough to hold a flood's start and a few of a closed-loop
 * client's round trips, short enough that an isolate stops acting on a flood
 * within two seconds of its end.
 */
export const RECENT_MS = 2000;
/** Fewer pages than this in the window say nothing: a share of a handful of pages is a coin toss, not a flood. */
export const RECENT_MIN_PAGES = 16;

export interface WindowCounts<K extends string> {
  note(outcome: K): void;
  /** The share of the window's pages that were `outcome` (0 while fewer than RECENT_MIN_PAGES were counted). */
  share(outcome: K): number;
}

export function createWindowCounts<K extends string>(clock: Clock, outcomes: readonly K[]): WindowCounts<K> {
  const half = RECENT_MS / 2;
  const zero = () => Object.fromEntries(outcomes.map((outcome) => [outcome, 0])) as Record<K, number>;
  let currentFrom = clock.now();
  let current = zero();
  let previous = zero();

  function roll(): void {
    const now = clock.now();
    if (now - currentFrom < half) return;
    previous = now - currentFrom < 2 * half ? current : zero();
    current = zero();
    currentFrom = now;
  }

  return {
    note(outcome) {
      roll();
      current[outcome]++;
    },
    share(outcome) {
      // Summed without an object: waiting pages ask on every look, and an object a look was garbage by the thousand a second.
      roll();
      let pages = 0;
      for (const each of outcomes) pages += current[each] + previous[each];
      return pages < RECENT_MIN_PAGES ? 0 : (current[outcome] + previous[outcome]) / pages;
    },
  };
}
