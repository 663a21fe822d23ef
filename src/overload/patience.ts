// A hold for visitors who leave (docs/architecture.md#overload). While most
// of the recent cold pages were left by their visitors before they were
// answered (a departing flood: crawlers with short time-outs, bots, clients
// that give up after a few ms), a cold page with no copy to show starts its
// work only after `maxHoldMs` (./index.ts: one CoDel interval, RFC 8289's
// worst-case round trip: a visitor still there after it is one who waits
// for pages). A visitor who leaves within the hold has cost a timer: no L2
// read, no claim, no origin fetch; one who stays pays the hold on a first
// view, and only during such a flood. (./departures.ts bounds what becomes
// of work already started when its visitor leaves; this keeps the flood's
// work from starting at all.)
//
// Everything here is plain numbers, read and written by the requests
// themselves: a page's departure is counted by its signal's listener, which
// runs when the visitor leaves even if the request is cancelled and its
// page never ends; a page that ends answered counts when it ends.
import type { Clock } from "../shared/clock";

export interface PatienceOptions {
  clock: Clock;
  /** The hold, ms; 0 turns it off. */
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
  /** The hold while most visitors leave, ms. */
  maxHoldMs: number;
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

/**
 * The window the share is taken over: long
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
  const counts = { held: 0, leftWhileHeld: 0 };

  const share = () => outcomes.leftShare();

  /**
   * The whole hold while most visitors leave (at least half of the recent cold pages: ordinary traffic's
   * departures are a few per cent, a flood of visitors who leave is most of the cold pages), none otherwise.
   */
  const holdMs = () => (maxHoldMs > 0 && share() >= 0.5 ? maxHoldMs : 0);

  return {
    holdMs,
    follow(visitor) {
      if (visitor?.aborted) {
        outcomes.note("left");
        return () => {};
      }
      const onLeave = () => outcomes.note("left");
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
