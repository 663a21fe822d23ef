// Admission of new work (docs/architecture.md#overload): a cold page starts
// its work within the isolate's limit (./limit.ts), or waits for its turn on
// its own timers in a fair queue by client (./fairShare.ts, FQ-CoDel's
// push-out from the fattest flow, RFC 8290), coldPageWaitMs at most, then is
// shed (its copy, a 503, or a 429 past its client's share). One waiting page an
// interval that has waited half its wait goes past the limit (its last chance).
// A departing flood's pages are held first (./patience.ts); a visitor who
// leaves gives up its place or slot at once (./departures.ts).
import { createLimiter, LimiterFull } from "../shared/limiter";
import { createLeaseTable } from "../shared/leases";
import type { Clock } from "../shared/clock";
import { INTERVAL_MS, type ColdLimit } from "./limit";
import type { Patience } from "./patience";
import { createFairShare, ONE_BROWSER, UNKNOWN_CLIENT } from "./fairShare";

export interface AdmissionOptions {
  clock: Clock;
  /** How late the isolate runs now, in ms (./lag.ts), for the status page. */
  lateness: () => number;
  limit: ColdLimit;
  patience: Patience;
  /** Pages needing new work in progress at most, and waiting at most (COLD_PAGES_MAX). */
  maxColdPages: number;
  /** How long a page without a copy waits for its turn (COLD_PAGE_WAIT_MS). */
  coldPageWaitMs: number;
  /** A cold page's slot ends here at the latest, whatever became of its request: the longest a page read may take. */
  coldPageLeaseMs: number;
}

/** A shed page: "busy" (no turn within its wait, or no room to wait: a 503), or "over share" (its client's own excess: a 429). */
type Shed = "busy" | "over share";
export type Admission = ReturnType<typeof createAdmission>;

export function createAdmission(options: AdmissionOptions) {
  const { clock, maxColdPages, limit, patience, coldPageWaitMs } = options;
  const fair = createFairShare(clock);
  /** The longest a cold page is in admission's hands: its hold, its wait and its work. */
  const pageLeaseMs = patience.maxHoldMs + coldPageWaitMs + options.coldPageLeaseMs;
  const counts = { admitted: 0, lastChance: 0, shed: { busy: 0, overShare: 0 }, overShare: 0, shedServedStale: 0, shedRefused: 0 };
  let lastChanceAt = Number.NEGATIVE_INFINITY;
  const slots = createLimiter({
    maxConcurrent: maxColdPages,
    limit: () => limit.current(),
    pastLimit(waitedMs) {
      if (waitedMs < coldPageWaitMs / 2 || clock.now() - lastChanceAt < INTERVAL_MS) return false;
      lastChanceAt = clock.now();
      counts.lastChance++;
      return true;
    },
    maxQueued: maxColdPages,
    maxWaitMs: coldPageWaitMs,
    maxHoldMs: options.coldPageLeaseMs,
    // A page whose visitor left is in progress for nobody: what is left of it is background work.
    freeWhenCallerLeaves: true,
    rank: (client) => fair.holding(client),
    clock,
  });
  /**
   * How many times its share of the queue `client` holds. None for "unknown"
   * (everybody), a client alone (what it meets is the isolate's busyness), or
   * one holding less than a browser's pages.
   */
  const timesShare = (client: string) =>
    client === UNKNOWN_CLIENT || fair.clients() < 2 || fair.holding(client) < ONE_BROWSER ? 0 : fair.timesShare(client, maxColdPages);
  const overShare = (): "over share" => (counts.overShare++, "over share");

  async function admitNow<T>(work: () => Promise<T>, wait: boolean, visitor: AbortSignal | undefined, client: string): Promise<T | Shed | "left"> {
    let started = false;
    try {
      const run = async () => {
        started = true;
        counts.admitted++;
        try {
          return await work();
        } finally {
          limit.update(slots.inFlight);
        }
      };
      return await slots.run(run, { waitMs: wait ? coldPageWaitMs : 0, caller: visitor, key: client });
    } catch (error) {
      // The work's own LimiterFull (none is expected: the origin client turns its own into answers) is not a shed.
      if (!(error instanceof LimiterFull) || started) throw error;
      // A visitor who left while waiting was not shed: nobody is answered (./departures.ts counts the page).
      if (visitor?.aborted) return "left";
      counts.shed.busy++;
      return timesShare(client) <= 1 ? "busy" : overShare();
    }
  }

  return {
    /**
     * Runs one page's new work once admitted, or says why it was shed (and
     * never runs it). `wait`: whether it may wait for its turn (not when it has
     * a copy to serve); `visitor`: its request's signal; `client`: who asks.
     */
    async admit<T>(work: () => Promise<T>, wait: boolean, visitor?: AbortSignal, client = UNKNOWN_CLIENT): Promise<T | Shed | "left"> {
      const answered = patience.follow(visitor);
      const release = wait && slots.queued > 0 && timesShare(client) >= 1 ? undefined : fair.start(client, pageLeaseMs);
      try {
        if (!release) {
          // Past its share while pages wait: refused an interval after it came (one refused at once asks again at once).
          await new Promise((resolve) => setTimeout(resolve, INTERVAL_MS));
          if (visitor?.aborted) return "left";
          counts.shed.overShare++;
          return overShare();
        }
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
        release?.();
      }
    },
    /** What a shed page got: its copies ("stale"), or a part missing ("refused"). */
    noteShed(outcome: "stale" | "refused") {
      counts[outcome === "stale" ? "shedServedStale" : "shedRefused"]++;
    },
    /** Whether `others` more places of work would fit beside the pages in progress, with no page waiting: room for work nobody waits for. */
    spareRoom: (others: number) => slots.queued === 0 && slots.inFlight + others < limit.current(),
    stats: () => ({
      lagMs: options.lateness(),
      congested: limit.congested(),
      limit: limit.current(),
      /** Clients with cold pages in admission's hands now. */
      clients: fair.clients(),
      coldPages: slots.inFlight,
      coldPagesQueued: slots.queued,
      pushedOut: slots.pushedOut,
      ...counts,
      shed: { ...counts.shed },
    }),
  };
}

/** What a page lacks once L1 has served it, as the read path (cache/readThrough.ts) knows it, and the steps to read or shed it. */
interface PageWork {
  /** Its subject's key, when L1 lacks the subject: the subject's fill leads the page's. */
  subjectKey?: string;
  /** Whether what it lacks is under way in this isolate already: joining is no new work, and is not shed. */
  joins: boolean;
  /** Whether it has a copy it would show of every part it lacks: then it does not wait for its turn. */
  withCopies: boolean;
  /** Reads what it lacks past L1; `afterWait`: L1 first, which a request that went ahead meanwhile may have filled. */
  read(afterWait: boolean): Promise<void>;
  /** Serves what it still lacks as shed: "stale", "refused", or undefined when nothing is left to shed. */
  shed(): "stale" | "refused" | undefined;
  visitor?: AbortSignal;
  client?: string;
}
export type PageAdmission = ReturnType<typeof createPageAdmission>;

/**
 * Where a page's new work meets admission. Later pages for a product whose
 * page waits for its turn go on and join what it starts, rather than queue as
 * new work (a herd for one product would fill the queue and be shed).
 * `turnLeaseMs`: the longest a waiting page holds its product's place.
 */
export function createPageAdmission({
  admission,
  clock,
  turnLeaseMs,
}: {
  admission: Pick<Admission, "admit" | "noteShed">;
  clock: Clock;
  turnLeaseMs: number;
}) {
  const awaitingTurn = createLeaseTable<string, number>({ clock });
  let nextPage = 0;
  return {
    /** Reads `work` as admission lets it, or sheds it; true when it was shed as its client's excess (a 429, not a 503). */
    async admitPage(work: PageWork): Promise<boolean> {
      const { subjectKey } = work;
      if (work.joins || (subjectKey !== undefined && awaitingTurn.holder(subjectKey) !== undefined)) {
        await work.read(false);
        return false;
      }
      const page = ++nextPage;
      if (subjectKey) awaitingTurn.take(subjectKey, clock.now() + turnLeaseMs, page);
      let admitted: Awaited<ReturnType<typeof admission.admit<void>>>;
      try {
        admitted = await admission.admit(() => work.read(true), !work.withCopies, work.visitor, work.client);
      } finally {
        if (subjectKey) awaitingTurn.release(subjectKey, page);
      }
      // Not shed when its visitor left (nobody reads the answer); followers that went on meanwhile may have filled what it lacks.
      if (typeof admitted !== "string" || admitted === "left" || work.visitor?.aborted) return false;
      const shed = work.shed();
      if (shed) admission.noteShed(shed);
      return shed !== undefined && admitted === "over share";
    },
  };
}
