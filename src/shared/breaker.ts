// A circuit breaker per isolate around L2 or one origin service
// (docs/architecture.md#circuit-breakers). It opens when the service is
// failing: at least `failureThreshold` failures among its recent calls, and
// at least half of them. Open, the service is not called; after `coolDownMs`
// one probe goes (half-open), whose success closes it and failure reopens it.
// A rate, not a run of failures: a busy isolate handles some replies after
// their budget, and a few such time-outs among many answers are no outage.
// Time-outs alone must also span `minFailureSpanMs`: calls timing out within
// a few ms of each other were stalled together here (a GC, a burst of
// rendering), while a hung service keeps failing. An error (a refused
// connection, a 5xx) is the service's own word, and counts at once.
//
// A saturated isolate reads replies late for seconds on end, and a time-out
// cannot tell a reply that never came from one read too late: with
// `confirmTimeouts`, time-outs alone do not open the breaker, but `failure`
// asks the caller to probe the service once, with a budget long enough for
// any local queue ("confirm"), and to report with `confirmed`. Only a failed
// probe opens it; an answer dismisses the time-outs.
//
// Only the service's own failures count
// (docs/architecture.md#sharing-work-across-requests-in-one-isolate): a call
// that failed while another call to it succeeded was delayed here (a reply
// handled late, a cancelled request's call), and is not counted. The
// half-open probe and the confirmation are leases: one whose request
// vanished is replaced after `coolDownMs`.
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
  /** While open, how often a recovery probe is asked for (`recoveryProbeDue`): its answer closes the breaker before the cool-down ends. None when absent. */
  recoveryProbeEveryMs?: number;
  clock: Clock;
  /** Told of every state change (for logs and the status page); must not throw. */
  onChange?: (from: BreakerState, to: BreakerState) => void;
}

export interface Breaker {
  /** Whether a call may go to L2 now. In half-open state only one probe at a time gets `true`. */
  allow(): boolean;
  success(): void;
  /** A failed call, not counted when a call succeeded since `successesAtStart` (see above); "confirm": probe, and report with `confirmed`. */
  failure(successesAtStart?: number, timedOut?: boolean): "confirm" | undefined;
  /** The probe `failure` asked for: true, no answer (it opens); false, answered (the time-outs are forgotten); undefined, noticed late itself (says nothing). */
  confirmed(failed: boolean | undefined): void;
  /** Whether a confirmation is out: the service's health is in question (callers stop waiting on it, but still call it). */
  confirming(): boolean;
  /** While not closed, whether to send a recovery probe now: at most once per `recoveryProbeEveryMs` (a lease). Report with `recovered`. */
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
