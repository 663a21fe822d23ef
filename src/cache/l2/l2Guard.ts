// How every L2 call is made (l2.ts): within its time budget, through the breaker, its failure sorted as Redis's or this isolate's own, an
// outage confirmed by a probe before time-outs alone open the breaker. Apart from l2.ts (what calls send): one rule for every call.
import type { Redis } from "@upstash/redis/cloudflare";
import type { Breaker } from "../../shared/breaker";
import { currentLagMs, isIsolateError, isTimeout, noticedLate } from "../../shared/leases";
import { gatePlaceMs, subrequest, type Background } from "../../shared/subrequests";

export interface L2CallOptions {
  /** A write: the longer background budget, and counted as dropped when it fails. */
  isWrite?: boolean;
  /** Tried even while the breaker is open (operator calls such as purges). */
  force?: boolean;
  /**
   * Off the breaker: skipped while it is open, and its failures never count toward opening it; with the background budget (background reads
   * whose size or cost is not the page path's: a purge-log sync, which a visitor waits for at most its own bound).
   */
  passive?: boolean;
  /**
   * The request's `ctx.waitUntil`: where the outage probe that this call's time-out may ask for runs (breaker.ts: `confirmTimeouts`), so
   * that no visitor waits for it. Without it the call awaits the probe (callers already off the visitor's path).
   */
  background?: Background;
}

/** What the calls count (l2.ts: L2Stats adds the backlog's count). */
export interface L2CallStats {
  /** Calls not made because the breaker was open. */
  skipped: number;
  /** Calls that failed or ran out of time. */
  failures: number;
  /** Writes L2 did not take when they were made (failures, open breaker): they wait in the backlog (l2.ts), see `replayedWrites`. */
  droppedWrites: number;
  /** Of the failures, those that were this isolate's own (cross-request I/O, the subrequest budget, a time-out noticed late), not counted by the breaker. */
  isolateErrors: number;
  /** Of the failures, those the breaker counted as Redis's: time-outs, and other errors (refused, reset, an error answer). */
  countedTimeouts: number;
  countedErrors: number;
  /** Times the counted time-outs would have opened the breaker, and Redis answered a direct probe (breaker.ts: `confirmTimeouts`). */
  outagesDismissed: number;
}

interface L2GuardOptions {
  breaker: Breaker;
  stats: L2CallStats;
  /** The client the outage probe pings with (its own deadline, `probeTimeoutMs`). */
  prober: Redis;
  /** Budgets, ms: see L2Options. */
  timeoutMs: number;
  writeTimeoutMs: number;
  probeTimeoutMs: number;
  timing?: CallTiming;
  /** Called (in the probe's background work) once a recovery probe closed the breaker: the writes kept meanwhile go out. */
  onRecovered?: () => Promise<void>;
}

/** What L2 calls tell the lag meter (shared/lag.ts). */
export interface CallTiming {
  /** A call Redis answered took `ms`, from its send to its reply read. */
  observeReply(ms: number): void;
  /** A call's time-out was this isolate's own doing: it ran `ms` late then. */
  observeLate(ms: number): void;
}

export function createL2Guard({ breaker, stats, prober, timeoutMs, writeTimeoutMs, probeTimeoutMs, timing, onRecovered }: L2GuardOptions) {
  /** A PING within the probe's budget; `sent` is told when it leaves the request's connection gate. */
  function ping(sent?: () => void): Promise<unknown> {
    const send = () => {
      sent?.();
      return prober.ping();
    };
    return subrequest(send, gatePlaceMs(probeTimeoutMs), "l2");
  }

  /**
   * Time-outs alone would open the breaker (see breaker.ts): ask Redis directly, once, with a budget long enough for this isolate's own
   * stalls. Runs under the `waitUntil` of the request whose failure asked, if it has one.
   */
  async function confirmOutage(): Promise<void> {
    let startedAt = 0;
    try {
      await ping(() => (startedAt = Date.now()));
      breaker.success();
      stats.outagesDismissed++;
      breaker.confirmed(false);
    } catch (error) {
      breaker.confirmed(isIsolateError(error) || noticedLate(startedAt, probeTimeoutMs) ? undefined : true);
    }
  }

  /**
   * Asks Redis whether it is back while the breaker is open (breaker.ts, `recoveryProbeDue`): within the probe's budget, under the
   * `waitUntil` of the request that found it due (every page read asks: l2.ts, `recoverIfDue`). An answer closes the breaker, and the
   * writes kept while it was open go out with the next page read.
   */
  async function probeRecovery(): Promise<void> {
    const answered = await ping()
      .then(() => true)
      .catch(() => false);
    breaker.recovered(answered);
    if (answered) await onRecovered?.();
  }

  /** Sends a recovery probe, under `background`, if the breaker says one is due (it is open). */
  function recoverIfDue(background: Background): void {
    if (breaker.recoveryProbeDue()) background(probeRecovery());
  }

  /**
   * One call, `undefined` if it failed or was skipped. `force`: try even while the breaker is open (an operator's purge must be recorded if
   * Redis can take it: the breaker protects visitors from a slow Redis, not Redis from an occasional admin call).
   */
  async function guarded<T>(
    call: () => Promise<T>,
    {
      isWrite = false,
      force = false,
      passive = false,
      background,
      budgetMs = isWrite || passive ? writeTimeoutMs : timeoutMs,
    }: L2CallOptions & { budgetMs?: number } = {},
  ): Promise<T | undefined> {
    if (!force && (passive ? breaker.state() === "open" : !breaker.allow())) {
      stats.skipped++;
      if (isWrite) stats.droppedWrites++;
      return undefined;
    }
    const successesAtStart = breaker.successes;
    let startedAt = 0;
    try {
      // The call's time budget starts once this request has a connection free.
      const result = await subrequest(
        () => {
          startedAt = Date.now();
          return call();
        },
        gatePlaceMs(budgetMs),
        "l2",
      );
      breaker.success();
      timing?.observeReply(Date.now() - startedAt);
      return result;
    } catch (error) {
      // Not Redis's failure but this isolate's (see breaker.ts): its own errors, and a time-out noticed late or while its own queue was a
      // good part of the budget long (lateness). Told to the lag meter at once: the caller decides next whether Redis hangs
      // (cache/fill/fill.ts), and a fresh isolate in a herd has no reply yet to have measured it by.
      const lateMs = await lateness(error, startedAt, budgetMs);
      if (lateMs > 0) timing?.observeLate(lateMs);
      if (isIsolateError(error) || lateMs > 0) stats.isolateErrors++;
      else if (!passive) {
        if (isTimeout(error)) stats.countedTimeouts++;
        else stats.countedErrors++;
        if (breaker.failure(successesAtStart, isTimeout(error)) === "confirm") {
          // Not this visitor's wait: it lost its read already.
          if (background) background(confirmOutage());
          else await confirmOutage();
        }
      }
      stats.failures++;
      if (isWrite) stats.droppedWrites++;
      return undefined;
    }
  }

  return { guarded, recoverIfDue };
}

/**
 * How late this isolate ran when a call failed, if late enough to be the cause (0 otherwise): the failure was noticed well past the budget,
 * or, for a time-out, a 1-ms timer right then waits a quarter of the budget.
 */
async function lateness(error: unknown, startedAt: number, budgetMs: number): Promise<number> {
  const now = Date.now();
  if (noticedLate(startedAt, budgetMs, now)) return now - startedAt - budgetMs;
  if (!isTimeout(error)) return 0;
  const lag = await currentLagMs();
  return lag > budgetMs / 4 ? lag : 0;
}
