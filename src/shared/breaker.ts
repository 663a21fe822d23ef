// A circuit breaker per isolate around L2 or one origin service
// (docs/architecture.md#circuit-breakers): it opens when the service is failing — at least
// `failureThreshold` failures among its recent calls, and at least half of
// them — and the service is then not called at all; after `coolDownMs` one
// probe is let through (half-open); its success closes the breaker, its
// failure opens it again. A rate, not a run of failures in a row: an isolate
// busy rendering handles some replies after their budget ran out, and a few
// such timeouts among many answers are not an outage. And when every failure
// counted is a time-out, a lasting one: they must span at least
// `minFailureSpanMs`, since calls that all time out within a few ms of each
// other were stalled together here (a garbage collection, a burst of
// rendering), while a hung service keeps failing. An error (a refused
// connection, a 5xx) is the service's own word, and counts at once.
//
// Only the service's own failures count
// (docs/architecture.md#sharing-work-across-requests-in-one-isolate): a call that failed while another call to the same service
// succeeded says that the service answers and that this
// call was delayed here (a busy isolate handles a reply late; a cancelled
// request's call never completes), so it is not counted. The half-open probe
// is a lease: a probe whose request vanished is replaced after `coolDownMs`.
import type { Clock } from "./clock";

export type BreakerState = "closed" | "open" | "half-open";

export interface BreakerOptions {
  /** Failures (errors or timeouts) among the last `4 × failureThreshold` calls that open the breaker, if they are at least half of them. */
  failureThreshold: number;
  /** How long the breaker stays open before one probe. */
  coolDownMs: number;
  /** When all counted failures are time-outs, they must span at least this long (default 0). */
  minFailureSpanMs?: number;
  clock: Clock;
  /** Told of every state change (for logs and the status page); must not throw. */
  onChange?: (from: BreakerState, to: BreakerState) => void;
}

export interface Breaker {
  /** Whether a call may go to L2 now. In half-open state only one probe at a time gets `true`. */
  allow(): boolean;
  success(): void;
  /**
   * A failed call. `successesAtStart`: `successes` when it began; it is not
   * counted when a call to the service succeeded since (the failure was this
   * isolate's, see above).
   */
  failure(successesAtStart?: number, timedOut?: boolean): void;
  /** Successful calls so far: read when a call begins, handed to `failure`. */
  readonly successes: number;
  state(): BreakerState;
}

export function createBreaker({ failureThreshold, coolDownMs, minFailureSpanMs = 0, clock, onChange }: BreakerOptions): Breaker {
  let state: BreakerState = "closed";
  const become = (next: BreakerState) => {
    const from = state;
    state = next;
    if (from !== next) onChange?.(from, next);
  };
  /** Outcomes of the recent calls (a failure's time and kind, or null for a success), oldest first: the window the rate is taken over. */
  const recent: ({ at: number; timedOut: boolean } | null)[] = [];
  const windowSize = failureThreshold * 4;
  const note = (outcome: { at: number; timedOut: boolean } | null) => {
    recent.push(outcome);
    if (recent.length > windowSize) recent.shift();
  };
  function failing(): boolean {
    const failed = recent.filter((outcome) => outcome !== null);
    if (failed.length < failureThreshold || failed.length * 2 < recent.length) return false;
    if (!failed.every((outcome) => outcome.timedOut)) return true;
    return failed[failed.length - 1]!.at - failed[0]!.at >= minFailureSpanMs;
  }
  let openedAt = 0;
  /** Until when the half-open probe handed out is awaited (0: none out). */
  let probeUntil = 0;
  let successes = 0;

  return {
    allow() {
      if (state === "closed") return true;
      if (state === "open" && clock.now() - openedAt >= coolDownMs) become("half-open");
      if (state === "half-open" && clock.now() >= probeUntil) {
        probeUntil = clock.now() + coolDownMs;
        return true;
      }
      return false;
    },
    success() {
      successes++;
      // A call that began before the breaker opened says nothing about now:
      // only the half-open probe may close it (else the breaker flaps).
      if (state === "open") return;
      if (state === "half-open") recent.length = 0;
      note(null);
      become("closed");
      probeUntil = 0;
    },
    failure(successesAtStart = successes, timedOut = false) {
      if (state === "open") return;
      if (state === "closed" && successes > successesAtStart) return;
      probeUntil = 0;
      note({ at: clock.now(), timedOut });
      if (state === "half-open" || failing()) {
        openedAt = clock.now();
        become("open");
      }
    },
    state: () => state,
    get successes() {
      return successes;
    },
  };
}
