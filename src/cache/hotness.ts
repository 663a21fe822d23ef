// How often each product is asked for in this isolate, in bounded memory: a
// count-min sketch (4 rows × 2,048 counters, 32 KB) whose counters halve
// every minute, so an estimate follows the recent rate (a steady r requests
// a minute converges to 2r). It never under-counts; collisions can only make
// a cold product look warmer, which costs one early refresh, nothing more.
// Its tiers (cold, warm, hot) decide how early a fresh entry is refreshed
// (fill/refreshes.ts, DEFAULTS.refreshAheadShare).
import type { Clock } from "../shared/clock";
import { hashPair } from "../shared/hash";

export type Heat = "cold" | "warm" | "hot";

export interface HotnessOptions {
  /** Requests a minute from which a product is warm / hot. */
  warmPerMinute: number;
  hotPerMinute: number;
  clock: Clock;
}

const DEPTH = 4;
const WIDTH = 2048;
const HALVING_MS = 60_000;

export function createHotness({ warmPerMinute, hotPerMinute, clock }: HotnessOptions) {
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
    /** Counts one request for `id` and says how hot it is now. */
    offer(id: string): Heat {
      decay();
      const [h1, h2] = hashPair(id);
      let estimate = Infinity;
      for (let row = 0; row < DEPTH; row++) {
        const index = row * WIDTH + (((h1! + Math.imul(row, h2!)) >>> 0) % WIDTH);
        estimate = Math.min(estimate, ++counters[index]!);
      }
      // A steady rate r (per minute) settles near 2r between halvings.
      const perMinute = estimate / 2;
      return perMinute >= hotPerMinute ? "hot" : perMinute >= warmPerMinute ? "warm" : "cold";
    },
  };
}
