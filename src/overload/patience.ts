// A hold for visitors who leave (docs/architecture.md#overload). While most
// of the cold pages of the last seconds were left by their visitors before
// they were answered (a departing flood: crawlers with short time-outs,
// bots, clients that give up after a few ms), a cold page with no copy to
// show starts its work only once its visitor has stayed a little longer
// than those visitors stay, and at most `maxHoldMs` (./index.ts: one CoDel
// interval, 100 ms: clients that leave later are rare, and a first view
// 100 ms late is still a fast one). A visitor who leaves
// within the hold has cost a timer: no L2 read, no claim, no origin fetch.
// One who stays pays the hold on a first view, and only during such a flood.
// (./departures.ts bounds what becomes of work already started when its
// visitor leaves; this keeps the flood's work from starting at all.) The
// hold is fitted to the leavers, not a whole interval: the pages of
// visitors who stay, a closed-loop client's among them, pay only a little
// more than the leavers stay.
//
// Everything here is plain numbers, read and written by the requests
// themselves: a page's departure is counted by its signal's listener, which
// runs when the visitor leaves even if the request is cancelled and its
// page never ends; a page that ends answered counts when it ends.
import type { Clock } from "../shared/clock";
import { INTERVAL_MS } from "./limit";

export interface PatienceOptions {
  clock: Clock;
  /** The hold's ceiling, ms; 0 turns the hold off. */
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
  /** The hold's ceiling, ms. */
  maxHoldMs: number;
}

export interface Patience {
  /** The longest hold, ms. */
  readonly maxHoldMs: number;
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
/**
 * The window the share and the departures' times are taken over: long
 * enough to hold a flood's start and a few of a closed-loop client's round
 * trips, short enough that an isolate stops holding within two seconds of a
 * flood's end. Fewer than RECENT_MIN_PAGES pages in it say nothing: a share
 * of a handful of pages is a coin toss, not a flood.
 */
const RECENT_MS = 2000;
const RECENT_MIN_PAGES = 16;

/** Pages left and answered over the last RECENT_MS, as two halves (the current one and the one before), rolled by the requests themselves: no timer. */
function createOutcomes(clock: Clock) {
  let current = { from: clock.now(), left: 0, answered: 0 };
  let previous = { left: 0, answered: 0 };
  const roll = () => {
    const now = clock.now();
    if (now - current.from < RECENT_MS / 2) return;
    previous = now - current.from < RECENT_MS ? current : { left: 0, answered: 0 };
    current = { from: now, left: 0, answered: 0 };
  };
  return {
    note(outcome: "left" | "answered") {
      roll();
      current[outcome]++;
    },
    /** The share of the window's pages left before their answer (0 while too few to say). */
    leftShare() {
      roll();
      const left = current.left + previous.left;
      const pages = left + current.answered + previous.answered;
      return pages < RECENT_MIN_PAGES ? 0 : left / pages;
    },
  };
}

export function createPatience({ clock, maxHoldMs }: PatienceOptions): Patience {
  const outcomes = createOutcomes(clock);
  /** When each of the last AGES_KEPT departures happened and how long after its page started (a ring). */
  const ages: { at: number; ms: number }[] = [];
  let agesNext = 0;
  const counts = { held: 0, leftWhileHeld: 0 };
  let hold = { at: Number.NEGATIVE_INFINITY, ms: 0 };

  const share = () => outcomes.leftShare();

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
    // Worked out at most twice an interval: it sorts the recent departures.
    // Most visitors leave: at least half of the recent cold pages (ordinary traffic's departures are a few per cent).
    if (now - hold.at >= INTERVAL_MS / 2) hold = { at: now, ms: share() >= 0.5 ? holdFor(now) : 0 };
    return hold.ms;
  }

  return {
    maxHoldMs,
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
    stats: () => ({ holdMs: holdMs(), departedShare: share(), ...counts, maxHoldMs }),
  };
}
