// Work for visitors who left (docs/architecture.md#overload): from a
// visitor's departure on, its page starts no new work. A fill already at the
// origin may finish and write its answer for the next visitor, as background
// work in the room the limit of cold pages has spare while no page waits;
// past it the fetch is cut short (or its answer stays in this isolate's L1)
// and its lock is released for another to fill.
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

/** The Departed error of `step`, made once: a departing flood throws it thousands of times a second, an Error takes its stack when made, and it carries no request's data. */
export function departed(step: string): Departed {
  let error = departedAt.get(step);
  if (!error) departedAt.set(step, (error = new Departed(step)));
  return error;
}

export type Departures = ReturnType<typeof createDepartures>;

/**
 * `room`: whether work nobody waits for may take one more place now,
 * `background` such places being taken (admission's spare room).
 * `backgroundFillMs`: how long one counts against it, the longest its write
 * may take (queued, then sent).
 */
export function createDepartures({ clock, room, backgroundFillMs }: { clock: Clock; room: (background: number) => boolean; backgroundFillMs: number }) {
  // A lease per finishing fill, ended by its deadline: its write goes out with the isolate's others, and nothing reports when it has.
  const finishing = createLeaseTable<number, true>({ clock });
  let next = 0;
  /**
   * Pages left before their answer (no further step, no render); fills stopped
   * before a claim, a poll or a fetch nobody waited for, or during the fetch;
   * fills whose visitors left while at the origin, written within the room
   * (finished) or not (dropped: cut short, or kept in L1; the lock released).
   */
  const counts = { pagesLeft: 0, fillsStopped: 0, fillsFinished: 0, fillsDropped: 0 };
  return {
    pageLeft: () => void counts.pagesLeft++,
    fillStopped: () => void counts.fillsStopped++,
    /** A fill that nobody waits for any more got its answer: may it write it (within the room)? */
    mayFinish(): boolean {
      const finishes = room(finishing.size()) && finishing.take(next++, clock.now() + backgroundFillMs, true);
      counts[finishes ? "fillsFinished" : "fillsDropped"]++;
      return finishes;
    },
    /** backgroundFills: those finishing now. */
    stats: () => ({ ...counts, backgroundFills: finishing.size() }),
  };
}
