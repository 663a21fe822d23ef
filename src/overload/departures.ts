// Work for visitors who left, and the room for fills nobody waits for (docs/architecture.md#overload).
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

/** `room`: whether one more fill nobody waits for fits beside `background` others; `backgroundFillMs`: how long one counts, its write's longest. */
export function createDepartures({ clock, room, backgroundFillMs }: { clock: Clock; room: (background: number) => boolean; backgroundFillMs: number }) {
  // A lease per finishing fill, ended by its deadline: its write goes out with the isolate's others, and nothing reports when it has.
  const finishing = createLeaseTable<number, true>({ clock });
  let next = 0;
  /** Pages left before their answer; fills stopped before (or during) a step nobody waited for; fills at the origin when their visitors left, written within the room or dropped. */
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
