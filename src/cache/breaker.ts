// A circuit breaker per isolate around L2 (design.md, "When Redis fails"):
// after `failureThreshold` failures in a row it opens and L2 is not called at
// all; after `coolDownMs` one probe is let through (half-open); its success
// closes the breaker, its failure opens it again.
import type { Clock } from "./clock";

export type BreakerState = "closed" | "open" | "half-open";

export interface BreakerOptions {
  /** Consecutive failures (errors or timeouts) that open the breaker. */
  failureThreshold: number;
  /** How long the breaker stays open before one probe. */
  coolDownMs: number;
  clock: Clock;
}

export interface Breaker {
  /** Whether a call may go to L2 now. In half-open state only one probe at a time gets `true`. */
  allow(): boolean;
  success(): void;
  failure(): void;
  state(): BreakerState;
}

export function createBreaker({ failureThreshold, coolDownMs, clock }: BreakerOptions): Breaker {
  let state: BreakerState = "closed";
  let failures = 0;
  let openedAt = 0;
  let probeInFlight = false;

  return {
    allow() {
      if (state === "closed") return true;
      if (state === "open" && clock.now() - openedAt >= coolDownMs) state = "half-open";
      if (state === "half-open" && !probeInFlight) {
        probeInFlight = true;
        return true;
      }
      return false;
    },
    success() {
      state = "closed";
      failures = 0;
      probeInFlight = false;
    },
    failure() {
      probeInFlight = false;
      failures++;
      if (state === "half-open" || failures >= failureThreshold) {
        state = "open";
        openedAt = clock.now();
      }
    },
    state: () => state,
  };
}
