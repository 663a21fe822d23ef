// The hold of cold pages while most visitors leave, fitted to the leavers (docs/architecture.md#overload).
import type { Clock } from "../shared/clock";
import { ONE_BROWSER } from "./fairShare";
import { INTERVAL_MS } from "./limit";

export type Patience = ReturnType<typeof createPatience>;

/** `maxHoldMs`: the hold's ceiling (0: off); `windowMs`: the window departures are judged over; `pagesKept`: outcomes kept (./index.ts says why each). */
export function createPatience({ clock, maxHoldMs, windowMs, pagesKept }: { clock: Clock; maxHoldMs: number; windowMs: number; pagesKept: number }) {
  /** The last `pagesKept` cold pages' outcomes (a ring): when, and for a page left, how long after it started (undefined: left on arrival). */
  const outcomes: { at: number; left: boolean; ms?: number }[] = [];
  let next = 0;
  const note = (left: boolean, ms?: number) => {
    outcomes[next] = { at: clock.now(), left, ms };
    next = (next + 1) % pagesKept;
  };
  const counts = { held: 0, leftWhileHeld: 0 };
  let hold = { at: Number.NEGATIVE_INFINITY, ms: 0, share: 0 };

  function judge(now: number) {
    const recent = outcomes.filter((outcome) => now - outcome.at <= windowMs);
    const left = recent.filter((outcome) => outcome.left);
    const share = recent.length === 0 ? 0 : left.length / recent.length;
    // A flood: at least half the recent cold pages left (ordinary traffic's are a few per cent), and more than one browser's
    // pages (a visitor closing a tab of six loading pages is no flood).
    if (share < 0.5 || left.length <= ONE_BROWSER) return { at: now, ms: 0, share };
    const stayed = left.flatMap((outcome) => outcome.ms ?? []).sort((a, b) => a - b);
    // How long the leavers stayed, at the 95th percentile, with a quarter more to spare.
    const p95 = stayed[Math.min(stayed.length - 1, Math.floor(stayed.length * 0.95))];
    return { at: now, ms: p95 === undefined ? 0 : Math.min(maxHoldMs, Math.ceil(p95 * 1.25) + 1), share };
  }

  function current() {
    const now = clock.now();
    // Judged at most twice an interval: it sorts the recent departures.
    if (maxHoldMs > 0 && now - hold.at >= INTERVAL_MS / 2) hold = judge(now);
    return hold;
  }

  return {
    maxHoldMs,
    /** The hold a cold page with no copy to show waits before its work starts, ms: 0 unless most visitors leave. */
    holdMs: () => current().ms,
    /** Follows one cold page from now: its departure, if its visitor leaves, or (call the result) its answer. */
    follow(visitor: AbortSignal | undefined): () => void {
      const startedAt = clock.now();
      if (visitor?.aborted) {
        note(true);
        return () => {};
      }
      const onLeave = () => note(true, clock.now() - startedAt);
      visitor?.addEventListener("abort", onLeave, { once: true });
      return () => {
        visitor?.removeEventListener("abort", onLeave);
        if (!visitor?.aborted) note(false);
      };
    },
    /** A held page's visitor stayed through the hold (true) or left during it (work never started). */
    noteHeld(stayed: boolean) {
      counts.held++;
      if (!stayed) counts.leftWhileHeld++;
    },
    /** departedShare: of the recent cold pages, those whose visitors left before their answer. */
    stats: () => ({ holdMs: current().ms, departedShare: current().share, ...counts, maxHoldMs }),
  };
}
