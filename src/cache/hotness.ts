// Whether a product is hot in this isolate, in bounded memory: a count-min
// sketch (32 KB) whose counters halve every minute, so an estimate follows the
// recent rate. It never under-counts. A hot product's fresh entries are
// refreshed ahead of their end (fill/refreshes.ts).
import type { Clock } from "../shared/clock";
import { hashPair } from "../shared/hash";

export interface HotnessOptions {
  /** Requests a minute from which a product is hot. */
  hotPerMinute: number;
  clock: Clock;
}

/**
 * The sketch's size, by its published bounds (Cormode & Muthukrishnan): an
 * estimate exceeds the true count by at most e/WIDTH of all counted requests
 * (0.13%) except with probability e^-DEPTH (2%): a cold product looks hot by
 * collision only in an isolate counting over 20,000 requests (some 10,000 a
 * minute), and then costs one early refresh.
 */
const DEPTH = 4;
const WIDTH = 2048;
/** A minute, the unit hotPerMinute is in: a steady r requests a minute then holds the estimate between r/2 (after its first minute) and 2r. */
export const HALVING_MS = 60_000;

export function createHotness({ hotPerMinute, clock }: HotnessOptions) {
  const counters = new Uint32Array(DEPTH * WIDTH);
  let nextHalving = clock.now() + HALVING_MS;

  function decay(): void {
    // Lazily, and at most one halving per elapsed period (capped: an idle hour zeroes it).
    while (clock.now() >= nextHalving) {
      for (let i = 0; i < counters.length; i++) counters[i]! >>>= 1;
      nextHalving += HALVING_MS;
      if (nextHalving < clock.now() - 32 * HALVING_MS) nextHalving = clock.now() + HALVING_MS;
    }
  }

  return {
    /** Counts one request for `id` and says whether it is hot now. */
    offer(id: string): boolean {
      decay();
      const [h1, h2] = hashPair(id);
      let estimate = Infinity;
      for (let row = 0; row < DEPTH; row++) {
        const index = row * WIDTH + (((h1! + Math.imul(row, h2!)) >>> 0) % WIDTH);
        estimate = Math.min(estimate, ++counters[index]!);
      }
      // From half of it: one asked for hotPerMinute times a minute is hot at every moment from its first half-minute on.
      return estimate >= hotPerMinute / 2;
    },
  };
}
