// Admission of cold pages: the limit, the wait for a turn in a fair queue by
// criticality and client, the last chance, the 503 and the 429 (docs/architecture.md#overload).
import { createLimiter, LimiterFull } from "../shared/limiter";
import { createLeaseTable } from "../shared/leases";
import type { Clock } from "../shared/clock";
import { INTERVAL_MS, type ColdLimit } from "./limit";
import type { Patience } from "./patience";
import { createFairShare, UNKNOWN_CLIENT } from "./fairShare";

export interface AdmissionOptions {
  clock: Clock;
  limit: ColdLimit;
  patience: Patience;
  /** Pages needing new work in progress at most, and waiting at most (COLD_PAGES_MAX). */
  maxColdPages: number;
  /** How long a page without a copy waits for its turn (COLD_PAGE_WAIT_MS). */
  coldPageWaitMs: number;
  /** A cold page's slot ends here at the latest, whatever became of its request: the longest a page read may take. */
  coldPageLeaseMs: number;
}

/** How a page asks for its turn (Admission.admit). */
interface Turn {
  wait: boolean;
  sheddable?: boolean;
  visitor?: AbortSignal;
  client?: string;
}

/** A shed page: "busy" (no turn within its wait, or no room to wait: a 503), or "over share" (its client's own excess: a 429). */
type Shed = "busy" | "over share";
export type Admission = ReturnType<typeof createAdmission>;

export function createAdmission({ clock, limit, patience, maxColdPages, coldPageWaitMs, coldPageLeaseMs }: AdmissionOptions) {
  const fair = createFairShare(clock);
  /** shed: pages answered 503 ("busy") and 429 ("over share"). */
  const counts = { admitted: 0, lastChance: 0, shed: { busy: 0, overShare: 0 }, shedServedStale: 0, shedRefused: 0 };
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
    maxHoldMs: coldPageLeaseMs,
    // A page whose visitor left is in progress for nobody: what is left of it is background work (./departures.ts).
    freeWhenCallerLeaves: true,
    rank: (client) => fair.holding(client),
    clock,
  });
  const timesShare = (client: string) => fair.timesShare(client, maxColdPages);
  const shed = (why: Shed) => (counts.shed[why === "busy" ? "busy" : "overShare"]++, why);

  return {
    /** Runs one page's new work once admitted, or says why it was shed (and never runs it). `wait`: whether it may wait for its turn
     * (not with a copy to serve); `sheddable`: shed, it is still a page (PageWork); `visitor`: its request's signal; `client`: who asks. */
    async admit<T>(work: () => Promise<T>, { wait, sheddable = false, visitor, client = UNKNOWN_CLIENT }: Turn): Promise<T | Shed | "left"> {
      const answered = patience.follow(visitor);
      // Past its share while pages wait: no place taken, and refused an interval after it came (one refused at once asks again
      // at once). Else its place among its client's pages lasts its hold, its wait and its work at most.
      const release =
        wait && slots.queued > 0 && timesShare(client) >= 1 ? undefined : fair.start(client, patience.maxHoldMs + coldPageWaitMs + coldPageLeaseMs);
      // A page with a copy to show is never held: it shows it.
      const holdMs = !release ? INTERVAL_MS : wait ? patience.holdMs() : 0;
      let started = false;
      try {
        if (holdMs > 0) {
          await new Promise((resolve) => setTimeout(resolve, holdMs));
          if (release) patience.noteHeld(!visitor?.aborted);
          if (visitor?.aborted) return "left";
          if (!release) return shed("over share");
        }
        const run = async () => {
          started = true;
          counts.admitted++;
          return await work().finally(() => limit.update(slots.inFlight));
        };
        return await slots.run(run, { waitMs: wait ? coldPageWaitMs : 0, caller: visitor, key: client, sheddable });
      } catch (error) {
        // The work's own errors (a LimiterFull among them) are not a shed; a visitor who left while waiting was not shed either.
        if (!(error instanceof LimiterFull) || started) throw error;
        if (visitor?.aborted) return "left";
        return shed(timesShare(client) <= 1 ? "busy" : "over share");
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
    /** `clients`: clients with cold pages in admission's hands now. */
    stats: () => ({
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

/** What a page lacks once L1 has served it, as the read path (cache/readThrough.ts) knows it, and the steps to read or shed it. */
interface PageWork {
  /** Its subject's key, when L1 lacks the subject: the subject's fill leads the page's. */
  subjectKey?: string;
  /** Whether what it lacks is under way in this isolate now: joining that is no new work, and is not shed. */
  joins(): boolean;
  /** Whether it has a copy it would show of every part it lacks: then it does not wait for its turn. */
  withCopies: boolean;
  /** Whether it has a copy of every core part it lacks: shed, it is still a page, not a 503, so it waits behind those that are not. */
  sheddable: boolean;
  /** Reads what it lacks past L1; `afterWait`: L1 first, which a request that went ahead meanwhile may have filled. */
  read(afterWait: boolean): Promise<void>;
  /** Serves what it still lacks as shed (`why`), a 503 or a 429: "stale", "refused", or undefined when nothing is left to shed. */
  shed(why: Shed): Promise<"stale" | "refused" | undefined>;
  visitor?: AbortSignal;
  client?: string;
}
export type PageAdmission = ReturnType<typeof createPageAdmission>;

/**
 * Where a page's new work meets admission. Later pages for a product whose page waits for its turn go on and join what it
 * starts, rather than queue as new work (a herd for one product would fill the queue and be shed). `turnLeaseMs`: the longest
 * a waiting page holds its product's place; `places`: products held at most (a cancelled page's place is never given back,
 * only reclaimed when the table is full). A place holds a number, not the page: a reclaimed one keeps no request alive.
 */
export function createPageAdmission(options: { admission: Pick<Admission, "admit" | "noteShed">; clock: Clock; turnLeaseMs: number; places: number }) {
  const { admission, clock } = options;
  const awaitingTurn = createLeaseTable<string, number>({ clock, capacity: options.places });
  const joins = (work: PageWork) => work.joins() || (work.subjectKey !== undefined && awaitingTurn.holder(work.subjectKey) !== undefined);
  let pages = 0;
  return {
    /** Reads `work` as admission lets it, or sheds it; true when it was shed as its client's excess (a 429, not a 503). */
    async admitPage(work: PageWork): Promise<boolean> {
      const { subjectKey: key } = work;
      if (joins(work)) {
        await work.read(false);
        return false;
      }
      const page = ++pages;
      if (key) awaitingTurn.take(key, clock.now() + options.turnLeaseMs, page);
      const admitting = admission.admit(() => work.read(true), { ...work, wait: !work.withCopies });
      const admitted = await admitting.finally(() => key && awaitingTurn.release(key, page));
      // Not shed when its visitor left (nobody reads the answer).
      if (typeof admitted !== "string" || admitted === "left" || work.visitor?.aborted) return false;
      // Refused for busyness while a page that went on meanwhile started what it lacks: it joins that.
      if (admitted === "busy" && joins(work)) {
        await work.read(true);
        return false;
      }
      const shed = await work.shed(admitted);
      if (shed) admission.noteShed(shed);
      return shed !== undefined && admitted === "over share";
    },
  };
}
