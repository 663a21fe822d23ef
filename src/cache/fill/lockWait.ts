// A fill that lost the lock (fill.ts) waits here, a bounded time, for the winner's result in L2. Its own module because the wait is a
// policy of its own, with its own pacing and reasons to give up: what the fill does with the outcome (use it, or fetch) stays in fill.ts.
import type { Background } from "../../shared/subrequests";
import type { Config } from "../../config";
import type { ResourceName } from "../../origin/resources";
import type { Clock } from "../../shared/clock";
import { pauses } from "../../shared/leases";
import { peekFreshness } from "../l2/codec";
import type { Entry } from "../entry";
import type { FillCalls } from "../l2/fillBatch";
import type { L2 } from "../l2/l2";
import type { L2Entries } from "../l2/l2Entries";
import { DEFAULTS } from "../../config/defaults";

/** What claiming the lock again says: a fresh copy, the lock is now this fill's, still held by the winner, or no answer. */
export type Reclaimed = Entry | "ours" | "held" | undefined;

/** What a fill is about, and which copy ends it or a wait of it (the part of fill.ts's FillContext the wait reads). */
export interface Wanted {
  resource: ResourceName;
  id: string;
  /** Hands background work (the L2 write, deleting an invalid value, an outage probe) to `ctx.waitUntil`. */
  background: Background;
  /** Copies fetched before this (any purge, soft included) are not taken as fresh: a soft purge's refresh must reach the origin. */
  freshAfter: number;
  /** Copies fresh only until this are not worth taking (refresh-ahead wants fresher); 0: fresh now. */
  freshBeyond: number;
  /**
   * Set by flights.ts for a visitor's fill: whether anybody still waits for it (its visitor, or one who joined it). Checked before each
   * step that would start new work, a poll included (overload/departures.ts).
   */
  wanted?: () => boolean;
}

interface LockWaitDeps {
  config: Pick<Config, "lockTtlMs" | "l2TimeoutMs">;
  /** Redis left a call about `key` unanswered because it does not answer (readThrough.ts, redisSilence); otherwise a poll without an answer is one read late. */
  redisSilent: (key: string, answeredBefore: number) => boolean;
  l2Entries: L2Entries;
  clock: Clock;
}

export function createLockWait({ config, l2Entries, clock, redisSilent }: LockWaitDeps) {
  /** A copy fresh enough to end a loser's wait: fresh now and beyond what the fill wants, and fetched after the last purge it knows. */
  function isWaitedFor(copy: Pick<Entry, "fetchedAt" | "freshUntil">, wanted: Wanted): boolean {
    return copy.freshUntil > Math.max(clock.now(), wanted.freshBeyond) && copy.fetchedAt >= wanted.freshAfter;
  }

  /**
   * Polls L2 until a fresh entry appears, the winner lets go of its lock without one (its origin fetch failed), L2 is skipped (its breaker
   * opened), or `lockTtlMs` is spent. Giving up is a reason to fetch, not an error. A poll that failed while the breaker stays closed is
   * one poll lost (a saturated isolate reads replies late): only when Redis is silent (redisSilent) and the claim again (`reclaim`) gets no
   * answer either does the wait end, so that one poll read late is no second origin fetch for a herd's product.
   *
   * It stops ("departed") before a poll once nobody waits for the fill.
   *
   * `ownToken`: this fill's claim got no answer, so it may have taken the lock all the same. A lock holding that token is this fill's own:
   * "ours", fetch and write as the winner.
   *
   * A poll that finds the lock free and no fresh copy does not end the wait by itself: `reclaim` claims the lock again where it lives (why:
   * docs/architecture.md#read-replicas).
   *
   * The polls go through `calls`: the waits of one page's fills poll together (l2/fillBatch.ts), one MGET a round.
   */
  return async function waitForWinner(
    l2: L2,
    calls: FillCalls,
    key: string,
    lock: string,
    wanted: Wanted,
    reclaim: () => Promise<Reclaimed>,
    ownToken?: string,
  ): Promise<Entry | "ours" | "departed" | undefined> {
    const giveUpAt = clock.now() + config.lockTtlMs;
    // Polls never further apart than a visitor's L2 budget: a winner that writes late is seen within one budget of it.
    for (const delay of pauses(DEFAULTS.lockPollFirstMs, config.l2TimeoutMs, giveUpAt, clock.now)) {
      if (wanted.wanted && !wanted.wanted()) return "departed";
      const answeredBefore = l2.answered(key);
      const [value, holder] = await calls.pollLock(key, lock, delay);
      if (value === undefined || holder === undefined) {
        if (!l2.accepts(key)) return undefined; // L2 is skipped now: nothing will come
        if (!redisSilent(key, answeredBefore)) continue; // one reply read late
      } else {
        // Until the winner writes, a poll finds the stale copy it is replacing: its header says so, and it is not decoded (gunzip, parse,
        // schema) again on every poll. A decoded entry carries the header's deadlines.
        const head = value ? peekFreshness(value) : undefined;
        const entry = head && isWaitedFor(head, wanted) ? l2Entries.read(key, value!, wanted.resource, wanted.id, wanted.background) : undefined;
        if (entry) return entry;
        if (holder === ownToken) return "ours";
        if (holder !== null) continue;
      }
      // The lock looks free, or Redis looks silent: the claim again, where the lock lives, tells which. Silent indeed, it is unanswered
      // too, and the fill fetches; answered "held", the poll was only late.
      const again = await reclaim();
      if (again !== "held") return again;
    }
    return undefined;
  };
}
