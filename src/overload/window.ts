// Counts over the last few seconds, as two half-windows of plain numbers:
// the window is the current half and the one before it. Read and written by
// the requests themselves (no timer): a half rolls over when a request finds
// it past its end.
import type { Clock } from "../shared/clock";

export interface WindowCounts<K extends string> {
  note(outcome: K): void;
  /** Each outcome's count over the window (the current half and the one before), in an object the next call fills again: read it at once. */
  counts(): Readonly<Record<K, number>>;
}

export function createWindowCounts<K extends string>(clock: Clock, windowMs: number, outcomes: readonly K[]): WindowCounts<K> {
  const half = windowMs / 2;
  const zero = () => Object.fromEntries(outcomes.map((outcome) => [outcome, 0])) as Record<K, number>;
  let currentFrom = clock.now();
  let current = zero();
  let previous = zero();
  /** The sums counts() gives, one object filled again on every call: waiting pages ask on every look, and a new one each time was garbage by the thousand a second. */
  const sum = zero();

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
    counts() {
      roll();
      for (const outcome of outcomes) sum[outcome] = current[outcome] + previous[outcome];
      return sum;
    },
  };
}
