// Admission of new work (docs/architecture.md#overload): one controller. A
// page that L1 can serve is always served, never queued. A page that needs
// new work (an L1 miss: an L2 read, a lock claim, an origin fetch) takes a
// place among the cold pages in progress, as many as an adaptive limit
// allows (./coldLimit.ts: Gradient2's update, steered by how late the
// isolate runs against SHED_LAG_MS; COLD_PAGES_MAX at most).
//
// Past the limit it waits for its turn, off the CPU (on its own timers;
// shared/limiter.ts), in an order fair per client (./fairShare.ts: the
// client holding fewest cold pages first), for COLD_PAGE_WAIT_MS at most.
// Under overload a flood's pages wait less, as in Facebook's controlled
// delay ("Fail at Scale", after CoDel): while the queue has not emptied for
// an interval and the isolate runs late, a page that has waited an interval
// gives its place up if its client holds more cold pages than the isolate's
// whole limit. A queue that stands is not absorbing a burst, and a client
// that alone could fill the isolate (a flood whose visitors left unseen, a
// crawl) is shed past that (its copy, or a quick 503 with Retry-After;
// cache/pageSteps.ts, shedPage) rather than held: a waiting page costs the
// isolate its looks. Clients that hold a few pages each (visitors, closed
// loops of a few connections) wait their turn, COLD_PAGE_WAIT_MS at most.
// A page with a copy usable on error does not wait.
//
// Before all this, while most cold pages' visitors leave before their
// answer, a page with no copy is held (./patience.ts): whoever leaves within
// the hold never takes a place here.
import { createLimiter, LimiterFull } from "../shared/limiter";
import type { Clock } from "../shared/clock";
import type { LagMeter } from "./lag";
import type { Patience } from "./patience";
import { createColdLimit } from "./coldLimit";
import { createFairShare } from "./fairShare";

export interface AdmissionOptions {
  clock: Clock;
  lag: LagMeter;
  /** The hold of cold pages during a departing flood (./patience.ts), and its longest. */
  patience: Patience;
  maxHoldMs: number;
  /** The lag the limit holds cold work to, ms (SHED_LAG_MS). */
  targetLagMs: number;
  /** The limit's ceiling: cold pages in progress at once (COLD_PAGES_MAX). */
  maxColdPages: number;
  /** Pages that may wait for their turn, and how long each may wait (COLD_PAGE_WAIT_MS). */
  maxColdPagesQueued: number;
  coldPageWaitMs: number;
  /** A cold page's slot ends here at the latest, whatever became of its request: the longest a page read may take. */
  coldPageLeaseMs: number;
}

/** Why a cold page was shed: it gave its place up in a standing queue while the isolate ran late, or no slot came free (or the queue was full). */
type ShedReason = "lagging" | "busy";

/** CoDel's interval: a queue that has not emptied for this long stands, and under it a page waits this long at most. */
const STANDING_MS = 100;

export interface AdmissionStats {
  lagMs: number;
  /** Cold pages that may be in progress now (the adaptive limit). */
  limit: number;
  /** Clients with cold pages in admission's hands now (held, waiting or in progress). */
  clients: number;
  coldPages: number;
  coldPagesQueued: number;
  admitted: number;
  shed: Record<ShedReason, number>;
  /** What the shed pages got: every part from a copy usable on error, or a part missing (a 503, or a section's default). */
  shedServedStale: number;
  shedRefused: number;
}

export interface Admission {
  /**
   * Runs one page's new work once the isolate admits it, or says why it was
   * shed (and then never runs it). `wait`: whether the page may wait for its
   * turn (not when it has a copy to serve at once); `visitor`: its request's
   * signal (one who left gives up its place, or its slot, at once); `client`:
   * who asks (./client.ts), for the order of the waiting pages.
   */
  admit<T>(work: () => Promise<T>, wait: boolean, visitor?: AbortSignal, client?: string): Promise<T | ShedReason | "left">;
  /** What a shed page got. */
  noteShed(outcome: "stale" | "refused"): void;
  stats(): AdmissionStats;
}

export function createAdmission(options: AdmissionOptions): Admission {
  const { clock, lag, patience } = options;
  const limit = createColdLimit({ clock, targetMs: options.targetLagMs, ceiling: options.maxColdPages });
  const fair = createFairShare(clock);
  /** The longest a cold page is in admission's hands: its hold, its wait and its work. */
  const pageLeaseMs = options.maxHoldMs + options.coldPageWaitMs + options.coldPageLeaseMs;
  const counts = { admitted: 0, shed: { lagging: 0, busy: 0 }, shedServedStale: 0, shedRefused: 0 };
  const look = () => limit.observe(lag.lagMs(), slots.inFlight);
  const slots = createLimiter({
    maxConcurrent: options.maxColdPages,
    maxQueued: options.maxColdPagesQueued,
    maxWaitMs: options.coldPageWaitMs,
    maxHoldMs: options.coldPageLeaseMs,
    admits: () => (look(), slots.inFlight < limit.limit()),
    givesUp: (waitedMs, client) =>
      waitedMs >= STANDING_MS && limit.late() && clock.now() - slots.lastEmptyAt >= STANDING_MS && fair.holding(client) > limit.limit(),
    // A page whose visitor left is in progress for nobody: what is left of it is background work.
    freeWhenCallerLeaves: true,
    rank: (client) => fair.holding(client),
    clock,
  });

  async function admitNow<T>(work: () => Promise<T>, wait: boolean, visitor: AbortSignal | undefined, client: string): Promise<T | ShedReason | "left"> {
    let started = false;
    try {
      return await slots.run(
        () => {
          started = true;
          counts.admitted++;
          return work();
        },
        { waitMs: wait ? options.coldPageWaitMs : 0, caller: visitor, key: client },
      );
    } catch (error) {
      // The work's own LimiterFull (none is expected: the origin client turns its own into answers) is not a shed.
      if (!(error instanceof LimiterFull) || started) throw error;
      // A visitor who left while waiting was not shed: nobody is answered (overload/departures.ts counts the page).
      if (visitor?.aborted) return "left";
      const reason = limit.late() ? "lagging" : "busy";
      counts.shed[reason]++;
      return reason;
    }
  }

  return {
    async admit(work, wait, visitor, client = "unknown") {
      const answered = patience.follow(visitor);
      const release = fair.start(client, pageLeaseMs);
      try {
        // A page with a copy to show is never held: it shows it.
        const holdMs = wait ? patience.holdMs() : 0;
        if (holdMs > 0) {
          await new Promise((resolve) => setTimeout(resolve, holdMs));
          patience.noteHeld(!visitor?.aborted);
          if (visitor?.aborted) return "left";
        }
        return await admitNow(work, wait, visitor, client);
      } finally {
        answered();
        release();
      }
    },
    noteShed(outcome) {
      if (outcome === "stale") counts.shedServedStale++;
      else counts.shedRefused++;
    },
    stats: () => ({
      lagMs: lag.lagMs(),
      limit: limit.limit(),
      clients: fair.clients(),
      coldPages: slots.inFlight,
      coldPagesQueued: slots.queued,
      ...counts,
      shed: { ...counts.shed },
    }),
  };
}
