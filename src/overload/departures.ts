// Work for visitors who left (docs/architecture.md#overload). A visitor who
// closes the connection aborts the request's signal (the
// `enable_request_signal` compatibility flag); from then on the page starts
// no new work: no L2 read, claim, poll, fetch or render. A fill already at
// the origin when its visitors left may finish and write its answer for the
// next visitor, as background work in the room the limit of cold pages has
// spare while no visitor's page waits (no visitor waits behind work nobody
// waits for); past it the fetch is cut short (or an answer already in stays
// in this isolate's L1) and its lock is released for another to fill.
import { createLeaseTable } from "../shared/leases";
import type { Clock } from "../shared/clock";

/** Thrown by a step that was about to start, or was doing, work nobody waits for any more. */
export class Departed extends Error {
  constructor(step: string) {
    super(`nobody waits for this any more: ${step} stopped`);
    this.name = "Departed";
  }
}

const departedAt = new Map<string, Departed>();

/**
 * The Departed error of `step`, made once: a flood of visitors who leave
 * throws it thousands of times a second, and an Error's stack trace is
 * taken when it is made. It carries no
 * request's data, so one per step is shared.
 */
export function departed(step: string): Departed {
  let error = departedAt.get(step);
  if (!error) departedAt.set(step, (error = new Departed(step)));
  return error;
}

export interface DepartureStats {
  /** Pages whose visitor left before they were answered: no further step, no render. */
  pagesLeft: number;
  /** Fills stopped before a lock claim, a poll or an origin fetch that nobody waited for, or during the fetch. */
  fillsStopped: number;
  /** Fills whose visitors left while they were at the origin, written within the budget. */
  fillsFinished: number;
  /** The same past the budget: cut short at the origin, or (answered already) kept in L1 only; the lock released. */
  fillsDropped: number;
  /** Background fills finishing now. */
  backgroundFills: number;
}

export interface Departures {
  /** A page found its visitor gone and stopped. */
  pageLeft(): void;
  /** A fill found nobody waiting and stopped before a step. */
  fillStopped(): void;
  /** A fill that nobody waits for any more got its answer: may it write it (within the budget)? */
  mayFinish(): boolean;
  stats(): DepartureStats;
}

export interface DeparturesOptions {
  clock: Clock;
  /** Whether work nobody waits for may take one more place now, `background` such places being taken (admission's spare room). */
  room: (background: number) => boolean;
  /** How long one counts against the budget: the longest its write may take (queued, then sent). */
  backgroundFillMs: number;
}

export function createDepartures({ clock, room, backgroundFillMs }: DeparturesOptions): Departures {
  const finishing = createLeaseTable<number, true>({ clock });
  let next = 0;
  const counts = { pagesLeft: 0, fillsStopped: 0, fillsFinished: 0, fillsDropped: 0 };
  return {
    pageLeft: () => void counts.pagesLeft++,
    fillStopped: () => void counts.fillsStopped++,
    mayFinish() {
      // A lease per finishing fill, ended by its deadline: the write goes out with
      // the isolate's other writes, and nothing reports when it has.
      if (room(finishing.size()) && finishing.take(next++, clock.now() + backgroundFillMs, true)) {
        counts.fillsFinished++;
        return true;
      }
      counts.fillsDropped++;
      return false;
    },
    stats: () => ({ ...counts, backgroundFills: finishing.size() }),
  };
}
