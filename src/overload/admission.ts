// Admission of new work (docs/architecture.md#overload): a page that L1 can
// serve is always served; a page that needs new work (an L1 miss: an L2
// read, a lock claim, an origin fetch) starts it within the isolate's limit
// of cold pages in progress (./limit.ts), and otherwise waits for its turn on
// its own timers (no CPU), COLD_PAGE_WAIT_MS at most, then is shed: its copy,
// or a quick 503 with Retry-After. A page with a copy usable on error does
// not wait. One page an INTERVAL_MS that has waited half its wait goes past
// the limit (its last chance): closed-loop visitors of cached pages can keep
// the isolate congested and the limit at its floor for good.
//
// The waiting pages are a fair queue by client (./fairShare.ts, in
// shared/limiter.ts), with FQ-CoDel's push-out from the fattest flow (RFC
// 8290). A client already holding its share of the queue while pages wait
// is answered 429 one INTERVAL_MS after it came, its work never started, and
// a page of its that is shed is a 429 too: its own excess, where another's
// is the isolate's busyness, a 503.
//
// Before all this, while most visitors leave before their answer, a page
// with no copy is held (./patience.ts). A visitor who leaves gives up its
// place, or its slot, at once: what is left of its page is background work
// (./departures.ts), in the room the limit has spare while no page waits.
import { createLimiter, LimiterFull } from "../shared/limiter";
import type { Clock } from "../shared/clock";
import { INTERVAL_MS, type ColdLimit } from "./limit";
import type { Patience } from "./patience";
import { createFairShare } from "./fairShare";
import { ONE_BROWSER, UNKNOWN_CLIENT } from "./client";

export interface AdmissionOptions {
  clock: Clock;
  /** How late the isolate runs now, in ms (./lag.ts), for the status page. */
  lateness: () => number;
  /** The isolate's limit of cold pages in progress (./limit.ts). */
  limit: ColdLimit;
  /** The hold of cold pages during a departing flood (./patience.ts), its longest bounding a page's lease. */
  patience: Patience;
  /** Pages needing new work in progress at most, and waiting at most (COLD_PAGES_MAX). */
  maxColdPages: number;
  /** How long a page without a copy waits for its turn (COLD_PAGE_WAIT_MS). */
  coldPageWaitMs: number;
  /** A cold page's slot ends here at the latest, whatever became of its request: the longest a page read may take. */
  coldPageLeaseMs: number;
}

/** What admit says of a shed page: "busy" (no turn within its wait, or no room to wait), or "over share": its client held more than its share of the queue (a 429, the client's own excess, not the isolate's busyness: a 503). */
type Shed = "busy" | "over share";

export interface AdmissionStats {
  lagMs: number;
  /** Whether the isolate's lateness stands (./limit.ts), and the limit it sets now. */
  congested: boolean;
  limit: number;
  /** Clients with cold pages in admission's hands now (waiting or in progress). */
  clients: number;
  coldPages: number;
  coldPagesQueued: number;
  admitted: number;
  /** Of those, pages that went past the limit at their last chance. */
  lastChance: number;
  /** Pages shed: no turn within their wait (or no room to wait), or on arrival, their client holding its share of the queue already while pages waited. */
  shed: { busy: number; overShare: number };
  /** Of those, waiting pages whose place in the full queue went to another client's page (a client holding fewer). */
  pushedOut: number;
  /** Of those, pages beyond their client's share of the queue (those shed on arrival included): answered 429, not 503. */
  overShare: number;
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
  admit<T>(work: () => Promise<T>, wait: boolean, visitor?: AbortSignal, client?: string): Promise<T | Shed | "left">;
  /** What a shed page got. */
  noteShed(outcome: "stale" | "refused"): void;
  /** Whether `others` more places of work would fit in the limit beside the pages in progress, with no page waiting: the room of work nobody waits for (./departures.ts). */
  spareRoom(others: number): boolean;
  stats(): AdmissionStats;
}

export function createAdmission(options: AdmissionOptions): Admission {
  const { clock, maxColdPages, limit, patience } = options;
  const fair = createFairShare(clock);
  /** The longest a cold page is in admission's hands: its hold, its wait and its work. */
  const pageLeaseMs = patience.maxHoldMs + options.coldPageWaitMs + options.coldPageLeaseMs;
  const counts = { admitted: 0, lastChance: 0, shed: { busy: 0, overShare: 0 }, overShare: 0, shedServedStale: 0, shedRefused: 0 };
  /** When a page last went past the limit: one an interval at most. */
  let lastChanceAt = Number.NEGATIVE_INFINITY;
  const lastChance = (waitedMs: number) => {
    const now = clock.now();
    if (waitedMs < options.coldPageWaitMs / 2 || now - lastChanceAt < INTERVAL_MS) return false;
    lastChanceAt = now;
    counts.lastChance++;
    return true;
  };
  const slots = createLimiter({
    maxConcurrent: maxColdPages,
    limit: () => limit.current(),
    pastLimit: lastChance,
    maxQueued: maxColdPages,
    maxWaitMs: options.coldPageWaitMs,
    maxHoldMs: options.coldPageLeaseMs,
    // A page whose visitor left is in progress for nobody: what is left of it is background work.
    freeWhenCallerLeaves: true,
    rank: (client) => fair.holding(client),
    clock,
  });

  /**
   * How many times its share of the queue `client` holds: whether its next
   * page is queued, and its shed pages' status. None for "unknown" (every
   * request off the platform: all visitors, never one client asking too
   * much) nor for a client alone: with nobody to share with, what it meets is
   * the isolate's busyness (a 503 after its wait), not its excess.
   */
  const timesShare = (client: string) =>
    client === UNKNOWN_CLIENT || fair.clients() < 2 || fair.holding(client) < ONE_BROWSER ? 0 : fair.timesShare(client, maxColdPages);

  function overShare(): "over share" {
    counts.overShare++;
    return "over share";
  }

  async function admitNow<T>(work: () => Promise<T>, wait: boolean, visitor: AbortSignal | undefined, client: string): Promise<T | Shed | "left"> {
    let started = false;
    try {
      return await slots.run(
        async () => {
          started = true;
          counts.admitted++;
          try {
            return await work();
          } finally {
            limit.update(slots.inFlight);
          }
        },
        { waitMs: wait ? options.coldPageWaitMs : 0, caller: visitor, key: client },
      );
    } catch (error) {
      // The work's own LimiterFull (none is expected: the origin client turns its own into answers) is not a shed.
      if (!(error instanceof LimiterFull) || started) throw error;
      // A visitor who left while waiting was not shed: nobody is answered (overload/departures.ts counts the page).
      if (visitor?.aborted) return "left";
      counts.shed.busy++;
      return timesShare(client) <= 1 ? "busy" : overShare();
    }
  }

  return {
    async admit(work, wait, visitor, client = UNKNOWN_CLIENT) {
      const answered = patience.follow(visitor);
      if (wait && slots.queued > 0 && timesShare(client) >= 1) {
        try {
          // Nothing started, nothing holding a place: one timer, then the answer.
          await new Promise((resolve) => setTimeout(resolve, INTERVAL_MS));
          if (visitor?.aborted) return "left";
          counts.shed.overShare++;
          return overShare();
        } finally {
          answered();
        }
      }
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
    spareRoom: (others) => slots.queued === 0 && slots.inFlight + others < limit.current(),
    stats: () => ({
      lagMs: options.lateness(),
      congested: limit.congested(),
      limit: limit.current(),
      clients: fair.clients(),
      coldPages: slots.inFlight,
      coldPagesQueued: slots.queued,
      pushedOut: slots.pushedOut,
      ...counts,
      shed: { ...counts.shed },
    }),
  };
}
