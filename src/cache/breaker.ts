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
  /** Told of every state change (for logs and the status page); must not throw. */
  onChange?: (from: BreakerState, to: BreakerState) => void;
}

export interface Breaker {
  /** Whether a call may go to L2 now. In half-open state only one probe at a time gets `true`. */
  allow(): boolean;
  success(): void;
  failure(): void;
  state(): BreakerState;
}

export function createBreaker({ failureThreshold, coolDownMs, clock, onChange }: BreakerOptions): Breaker {
  let state: BreakerState = "closed";
  const become = (next: BreakerState) => {
    const from = state;
    state = next;
    if (from !== next) onChange?.(from, next);
  };
  let failures = 0;
  let openedAt = 0;
  let probeInFlight = false;

  return {
    allow() {
      if (state === "closed") return true;
      if (state === "open" && clock.now() - openedAt >= coolDownMs) become("half-open");
      if (state === "half-open" && !probeInFlight) {
        probeInFlight = true;
        return true;
      }
      return false;
    },
    success() {
      // A call that began before the breaker opened says nothing about now:
      // only the half-open probe may close it (else the breaker flaps).
      if (state === "open") return;
      become("closed");
      failures = 0;
      probeInFlight = false;
    },
    failure() {
      if (state === "open") return;
      probeInFlight = false;
      failures++;
      if (state === "half-open" || failures >= failureThreshold) {
        openedAt = clock.now();
        become("open");
      }
    },
    state: () => state,
  };
}
