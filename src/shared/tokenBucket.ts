// A token bucket in plain numbers: `burst` tokens at most, one more every
// `everyMs`, refilled as time passes when it is looked at. Plain data, so
// that it may be shared by every request of an isolate (no timer, no
// promise): the admission queue's pace (./limiter.ts) and the pages let go
// at their last chance (overload/admission.ts).

export interface TokenBucket {
  /** Whole tokens there are now. */
  available(): number;
  /** Spends one token (the caller looked first). */
  spend(): void;
}

export function createTokenBucket({ everyMs, burst, clock }: { everyMs: number; burst: number; clock: { now(): number } }): TokenBucket {
  let tokens = burst;
  let filledAt = clock.now();
  return {
    available() {
      const now = clock.now();
      tokens = Math.min(burst, tokens + (now - filledAt) / everyMs);
      filledAt = now;
      return Math.floor(tokens);
    },
    spend() {
      tokens -= 1;
    },
  };
}
