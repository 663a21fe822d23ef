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
// Time-outs can still be this isolate's after that: a saturated isolate
// reads replies late for seconds on end, and a time-out cannot tell a reply
// that never came from one read too late. With `confirmTimeouts`, time-outs
// alone do not open the breaker: `failure` asks the caller to confirm
// ("confirm"), the caller asks the service directly, once, with a budget
// long enough for any local queue (a probe), and reports with `confirmed`.
// Only a failed probe opens it; an answer dismisses the time-outs. The
// confirmation is a lease: one out at a time, and one whose request vanished
// lapses after `coolDownMs`.
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
  /** Time-outs alone open the breaker only once the caller's direct probe fails too (see above). */
  confirmTimeouts?: boolean;
  /**
   * While open, a recovery probe may be asked for this often (see
   * `recoveryProbeDue`): a cheap call off every visitor's path whose answer
   * closes the breaker at once, rather than at the end of the cool-down.
   * None when absent.
   */
  recoveryProbeEveryMs?: number;
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
   * isolate's, see above). Returns "confirm" when the caller must probe the
   * service and report with `confirmed` before time-outs may open it.
   */
  failure(successesAtStart?: number, timedOut?: boolean): "confirm" | undefined;
  /**
   * The outcome of a probe asked for by `failure`: true when the service did
   * not answer it either (the breaker opens), false when it answered (the
   * time-outs were this isolate's, and are forgotten), undefined when the
   * probe says nothing (it was itself noticed late): the lease is given back.
   */
  confirmed(failed: boolean | undefined): void;
  /** Whether a confirmation is out: the service's health is in question (callers stop waiting on it, but still call it). */
  confirming(): boolean;
  /**
   * While open (or half-open), whether the caller should send a recovery
   * probe now: true at most once per `recoveryProbeEveryMs` (a lease: a
   * probe whose request vanished is replaced then). Report with `recovered`.
   */
  recoveryProbeDue(): boolean;
  /** A recovery probe's outcome: an answer closes the breaker at once; a failure leaves it as it is. */
  recovered(answered: boolean): void;
  /** Successful calls so far: read when a call begins, handed to `failure`. */
  readonly successes: number;
  state(): BreakerState;
}

export function createBreaker({
  failureThreshold,
  coolDownMs,
  minFailureSpanMs = 0,
  confirmTimeouts = false,
  recoveryProbeEveryMs,
  clock,
  onChange,
}: BreakerOptions): Breaker {
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
  /** Whether the recent calls say the service is failing: "timeouts" when only time-outs say so. */
  function failing(): false | "errors" | "timeouts" {
    const failed = recent.filter((outcome) => outcome !== null);
    if (failed.length < failureThreshold || failed.length * 2 < recent.length) return false;
    if (!failed.every((outcome) => outcome.timedOut)) return "errors";
    return failed[failed.length - 1]!.at - failed[0]!.at >= minFailureSpanMs ? "timeouts" : false;
  }
  let openedAt = 0;
  /** Until when the half-open probe handed out is awaited (0: none out). */
  let probeUntil = 0;
  /** Until when the confirmation asked for is awaited (0: none out). */
  let confirmUntil = 0;
  let successes = 0;
  /** When the last recovery probe was handed out. */
  let recoveryProbeAt = -Infinity;
  const open = () => {
    openedAt = clock.now();
    confirmUntil = 0;
    become("open");
  };

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
      if (state === "open") return undefined;
      if (state === "closed" && successes > successesAtStart) return undefined;
      probeUntil = 0;
      note({ at: clock.now(), timedOut });
      if (state === "half-open") open();
      else {
        const verdict = failing();
        if (verdict === "errors" || (verdict === "timeouts" && !confirmTimeouts)) open();
        else if (verdict === "timeouts" && clock.now() >= confirmUntil) {
          confirmUntil = clock.now() + coolDownMs;
          return "confirm";
        }
      }
      return undefined;
    },
    confirmed(failed) {
      if (confirmUntil === 0) return;
      confirmUntil = 0;
      if (state !== "closed" || failed === undefined) return;
      if (failed) open();
      else {
        // The service answered: the time-outs were this isolate's delay.
        const kept = recent.filter((outcome) => outcome === null || !outcome.timedOut);
        recent.length = 0;
        recent.push(...kept);
      }
    },
    confirming: () => state === "closed" && clock.now() < confirmUntil,
    recoveryProbeDue() {
      if (state === "closed" || recoveryProbeEveryMs === undefined) return false;
      const now = clock.now();
      if (now - recoveryProbeAt < recoveryProbeEveryMs) return false;
      recoveryProbeAt = now;
      return true;
    },
    recovered(answered) {
      if (!answered || state === "closed") return;
      recent.length = 0;
      probeUntil = 0;
      become("closed");
    },
    state: () => state,
    get successes() {
      return successes;
    },
  };
}
