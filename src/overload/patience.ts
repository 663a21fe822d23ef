// A hold for visitors who leave (docs/architecture.md#overload). While most
// of the cold pages of the last seconds were left by their visitors before
// they were answered (a departing flood: crawlers with short time-outs,
// bots, clients that give up after a few ms), a cold page with no copy to
// show starts its work only once its visitor has stayed a little longer
// than those visitors stay, and at most `maxHoldMs`. A visitor who leaves
// within the hold has cost a timer: no L2 read, no claim, no origin fetch.
// One who stays pays the hold on a first view, and only during such a flood.
// (./departures.ts bounds what becomes of work already started when its
// visitor leaves; this keeps the flood's work from starting at all: with
// nothing held, 8 connections leaving after 1–30 ms made 1.15 Redis
// commands and 1.71 origin fetches per request, bench:soak --flood.)
//
// Everything here is plain numbers, read and written by the requests
// themselves: a page's departure is counted by its signal's listener, which
// runs when the visitor leaves even if the request is cancelled and its
// page never ends; a page that ends answered counts when it ends.
import type { Clock } from "../shared/clock";
import { createWindowCounts, RECENT_MS } from "./window";

export interface PatienceOptions {
  clock: Clock;
  /** Cold pages hold while at least this share of them were left before their answer (0–1). */
  departedShare: number;
  /** The hold's ceiling, ms (DEFAULTS.departureHoldMaxMs); 0 turns the hold off. */
  maxHoldMs: number;
}

export interface PatienceStats {
  /** The hold a cold page with no copy gets now, ms (0: no departing flood). */
  holdMs: number;
  /** Share of the window's cold pages whose visitors left before their answer. */
  departedShare: number;
  /** Cold pages held, and of those, pages whose visitor left during the hold (work never started). */
  held: number;
  leftWhileHeld: number;
}

export interface Patience {
  /** The hold a cold page with no copy to show waits before its work starts, ms: 0 unless most visitors leave. */
  holdMs(): number;
  /** Follows one cold page from now: its departure, if its visitor leaves, or (call the result) its answer. */
  follow(visitor: AbortSignal | undefined): () => void;
  /** A held page's visitor stayed through the hold (true) or left during it. */
  noteHeld(stayed: boolean): void;
  stats(): PatienceStats;
}

/** Departures' times kept: the hold is a high quantile of these. */
const AGES_KEPT = 64;

export function createPatience({ clock, departedShare, maxHoldMs }: PatienceOptions): Patience {
  const outcomes = createWindowCounts(clock, ["left", "answered"] as const);
  /** When each of the last AGES_KEPT departures happened and how long after its page started (a ring). */
  const ages: { at: number; ms: number }[] = [];
  let agesNext = 0;
  const counts = { held: 0, leftWhileHeld: 0 };
  let hold = { at: Number.NEGATIVE_INFINITY, ms: 0 };

  const share = () => outcomes.share("left");

  /** How long the recent leavers stayed, at the 95th percentile, with a quarter more to spare. */
  function holdFor(now: number): number {
    const recent = ages.filter((age) => now - age.at <= RECENT_MS).map((age) => age.ms);
    if (recent.length === 0) return 0;
    recent.sort((a, b) => a - b);
    const stayed = recent[Math.min(recent.length - 1, Math.floor(recent.length * 0.95))] ?? 0;
    return Math.min(maxHoldMs, Math.ceil(stayed * 1.25) + 1);
  }

  function holdMs(): number {
    if (maxHoldMs <= 0) return 0;
    const now = clock.now();
    // Worked out at most every 50 ms: it sorts the recent departures.
    if (now - hold.at >= 50) hold = { at: now, ms: share() >= departedShare ? holdFor(now) : 0 };
    return hold.ms;
  }

  return {
    holdMs,
    follow(visitor) {
      const startedAt = clock.now();
      if (visitor?.aborted) {
        outcomes.note("left");
        return () => {};
      }
      const onLeave = () => {
        const now = clock.now();
        outcomes.note("left");
        ages[agesNext] = { at: now, ms: now - startedAt };
        agesNext = (agesNext + 1) % AGES_KEPT;
      };
      visitor?.addEventListener("abort", onLeave, { once: true });
      return () => {
        visitor?.removeEventListener("abort", onLeave);
        if (!visitor?.aborted) outcomes.note("answered");
      };
    },
    noteHeld(stayed) {
      counts.held++;
      if (!stayed) counts.leftWhileHeld++;
    },
    stats: () => ({ holdMs: holdMs(), departedShare: share(), ...counts }),
  };
}
